"""Look at the built site in a real browser: Debian's headless Chromium, driven over the DevTools protocol on a pipe
(`--remote-debugging-pipe`, so nothing but the standard library is needed), with every host name unresolvable so
that a page that needs the network shows it.

`check_pages` loads each page from `file://` and returns its problems:
  - a request for anything that is not a file of the site (`file:`, `data:`, `blob:` are the site's own);
  - raw maths left in the rendered text: a `$...$`, `$$`, `\\(` or `\\[` outside code, or a `.math` span that KaTeX did
    not typeset, or a formula KaTeX could not parse (`.katex-error`, with KaTeX's message);
  - a mermaid diagram that is not an SVG, or is mermaid's error picture;
  - a code block cut off: wider than its box and neither wrapping nor scrolling;
  - an uncaught JavaScript error;
  - on the first page, a search for the first sidebar entry that finds nothing.
`screenshots` saves PNGs of whole pages. As a script it takes screenshots:
  python .ci/browser.py [--out _docs_shots] [--width 1280] [PAGE.html ...]   (default: index, rope and trainer)"""
import argparse, base64, json, os, select, shutil, subprocess, tempfile, time
from pathlib import Path

SHOTS = ('index.html', 'rope.html', 'trainer.html')  # the pages worth a look, as their notebooks name them
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--no-default-browser-check',
         '--disable-background-networking', '--disable-dev-shm-usage', '--disable-component-update', '--disable-sync', '--disable-extensions',
         '--mute-audio', '--host-resolver-rules=MAP * ~NOTFOUND', '--remote-debugging-pipe']

def find_chromium():
    "The Chromium (or Chrome) to use: $CHROMIUM, or the first on the PATH; None when there is none."
    for c in (os.environ.get('CHROMIUM'), 'chromium', 'chromium-browser', 'google-chrome'):
        if c and shutil.which(c): return shutil.which(c)

class Browser:
    "One headless Chromium; `call` sends a DevTools command and returns its result, `wait` waits for an event."
    def __init__(self, exe=None, timeout=30):
        exe = exe or find_chromium()
        if not exe: raise RuntimeError('no Chromium: install it (`apt-get install -y chromium`; .ci/run does) or set $CHROMIUM')
        self.tmp = tempfile.mkdtemp(prefix='astrai_nb_chromium_')
        to_b, self._w = os.pipe(); self._r, from_b = os.pipe()  # the browser reads commands on fd 3, writes on fd 4
        cmd = ' '.join(f"'{a}'" for a in [exe, *FLAGS, f'--user-data-dir={self.tmp}', 'about:blank'])
        self.proc = subprocess.Popen(['sh', '-c', f'exec {cmd} 3<&{to_b} 4>&{from_b}'], pass_fds=(to_b, from_b),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_b); os.close(from_b)
        self.timeout, self._id, self._buf, self.events = timeout, 0, b'', []

    def _recv(self, deadline):
        while b'\0' not in self._buf:
            left = deadline - time.time()
            if left <= 0 or not select.select([self._r], [], [], left)[0]: raise TimeoutError('Chromium did not answer in time')
            chunk = os.read(self._r, 1 << 20)
            if not chunk: raise RuntimeError(f'Chromium exited (code {self.proc.poll()})')
            self._buf += chunk
        msg, self._buf = self._buf.split(b'\0', 1)
        return json.loads(msg)

    def call(self, method, session=None, timeout=None, **params):
        self._id += 1; mid = self._id
        msg = {'id': mid, 'method': method, 'params': params, **({'sessionId': session} if session else {})}
        os.write(self._w, json.dumps(msg).encode() + b'\0')
        deadline = time.time() + (timeout or self.timeout)
        while True:
            m = self._recv(deadline)
            if m.get('id') == mid:
                if 'error' in m: raise RuntimeError(f"{method}: {m['error'].get('message')}")
                return m.get('result', {})
            self.events.append(m)

    def wait(self, method, session=None, timeout=None):
        "The first event `method` (of `session`) not yet seen; earlier events stay in `events`."
        deadline = time.time() + (timeout or self.timeout)
        while True:
            for i, m in enumerate(self.events):
                if m.get('method') == method and m.get('sessionId') == session: return self.events.pop(i)
            self.events.append(self._recv(deadline))

    def new_page(self, width=1280, height=900):
        "A fresh tab with the page, network and runtime domains on: its session id."
        tid = self.call('Target.createTarget', url='about:blank')['targetId']
        s = self.call('Target.attachToTarget', targetId=tid, flatten=True)['sessionId']
        for m in ('Page.enable', 'Network.enable', 'Runtime.enable'): self.call(m, s)
        self.call('Emulation.setDeviceMetricsOverride', s, width=width, height=height, deviceScaleFactor=1, mobile=False)
        return s

    def load(self, session, url, ready_js='true', timeout=15):
        "Open `url` in the tab and wait for its load event, then until `ready_js` is true (or `timeout`)."
        self.events = [e for e in self.events if e.get('sessionId') != session]
        self.call('Page.navigate', session, url=url)
        self.wait('Page.loadEventFired', session, timeout=timeout)
        deadline = time.time() + timeout
        while not self.eval(session, ready_js) and time.time() < deadline: time.sleep(0.05)

    def eval(self, session, js):
        r = self.call('Runtime.evaluate', session, expression=js, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in r: raise RuntimeError(f"page script failed: {r['exceptionDetails'].get('text')}")
        return r['result'].get('value')

    def session_events(self, session, method):
        return [e['params'] for e in self.events if e.get('sessionId') == session and e.get('method') == method]

    def close(self):
        try: self.call('Browser.close', timeout=5)
        except Exception: pass
        try: self.proc.wait(5)
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        os.close(self._r); os.close(self._w)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self): return self
    def __exit__(self, *a): self.close()

# Ready: loaded, and every mermaid block drawn (mermaid draws after the load event).
READY_JS = "document.readyState === 'complete' && [...document.querySelectorAll('pre.mermaid')].every(p => p.querySelector('svg'))"

# What is wrong on the page, in the rendered DOM (the same walk for every page).
PROBLEMS_JS = r"""(() => {
  const out = [], main = document.querySelector('main') || document.body;
  const skip = 'code, pre, script, style, textarea, .katex, .katex-error, .mermaid';
  const blocks = new Set(['P','LI','TD','TH','H1','H2','H3','H4','H5','H6','DT','DD','BLOCKQUOTE','FIGCAPTION','DIV','SECTION','TABLE','TR','UL','OL','DL','HEADER','FOOTER','MAIN','ARTICLE']);
  // the page's text outside code and maths, a line per block, so a `$` never pairs with one in another paragraph
  const text = (el) => { let s = '';
    for (const n of el.childNodes) {
      if (n.nodeType === 3) s += n.nodeValue;
      else if (n.nodeType === 1 && !n.matches(skip)) s += blocks.has(n.tagName) ? '\n' + text(n) + '\n' : text(n);
    } return s; };
  for (const line of text(main).split('\n')) {
    const m = line.match(/\$\$|\$[^$]+\$|\\\(|\\\[/);
    if (m) out.push(`raw maths in the text: "${line.trim().slice(Math.max(0, m.index - 60), m.index + m[0].length + 40)}"`);
  }
  const spans = [...main.querySelectorAll('span.math')], typeset = spans.filter(s => s.querySelector('.katex'));
  for (const s of spans) if (!s.querySelector('.katex, .katex-error')) out.push(`formula not typeset (is KaTeX loaded?): ${s.textContent.slice(0, 80)}`);
  for (const e of main.querySelectorAll('.katex-error')) out.push(`KaTeX cannot typeset ${JSON.stringify(e.textContent.slice(0, 80))}: ${e.title}`);
  const charts = [...main.querySelectorAll('pre.mermaid')];
  for (const p of charts) {
    const svg = p.querySelector('svg');
    if (!svg) out.push(`mermaid diagram not drawn: ${p.textContent.slice(0, 60)}`);
    else if ((svg.getAttribute('aria-roledescription') || '') === 'error') out.push(`mermaid cannot draw: ${p.textContent.slice(0, 60)}`);
  }
  for (const p of main.querySelectorAll('pre')) {
    if (p.closest('.mermaid') || p.scrollWidth <= p.clientWidth + 1) continue;
    const cs = getComputedStyle(p);
    if (!['auto', 'scroll'].includes(cs.overflowX) && !cs.whiteSpace.startsWith('pre-wrap') && cs.whiteSpace !== 'break-spaces')
      out.push(`code cut off (${p.scrollWidth}px of text in ${p.clientWidth}px, neither wrapping nor scrolling): ${p.textContent.slice(0, 60)}`);
  }
  return {problems: out, formulas: spans.length, typeset: typeset.length, diagrams: charts.length,
          drawn: charts.filter(p => p.querySelector('svg')).length, height: document.documentElement.scrollHeight};
})()"""

# Search the site for the first sidebar entry's title: how many results show.
SEARCH_JS = r"""(async () => {
  const i = document.querySelector('.smalldocs-search input'), q = document.querySelector('.sidebar-item .menu-text');
  if (!i || !q) return -1;
  i.focus(); i.value = q.textContent.trim(); i.dispatchEvent(new Event('input'));
  for (let t = 0; t < 50; t++) {
    await new Promise(r => setTimeout(r, 100));
    const n = document.querySelectorAll('.search-result').length; if (n) return n;
  }
  return 0;
})()"""

LOCAL = ('file:', 'data:', 'blob:', 'about:', 'chrome-error:', 'devtools:')

def check_pages(docs, pages, browser=None, timeout=15):
    "Load each page (paths relative to `docs`) in Chromium: `{page: result}`, each with its `problems` (a list of strings)."
    docs, res = Path(docs).resolve(), {}
    own = browser is None
    b = browser or Browser()
    try:
        s = b.new_page()
        for p in pages:
            t0 = time.time()
            try: b.load(s, (docs/p).as_uri(), READY_JS, timeout)
            except TimeoutError: pass  # what did not finish shows as problems below
            r = b.eval(s, PROBLEMS_JS)
            urls = {q['request']['url'] for q in b.session_events(s, 'Network.requestWillBeSent')}
            r['problems'] += [f'loads {u} (not a file of the site)' for u in sorted(urls) if not u.startswith(LOCAL)]
            r['problems'] += [f"JavaScript error: {e['exceptionDetails'].get('exception', {}).get('description', e['exceptionDetails'].get('text'))}".split('\n')[0]
                              for e in b.session_events(s, 'Runtime.exceptionThrown')]
            if not res:  # on the first page: the search box finds the site's pages
                n = b.eval(s, SEARCH_JS)
                if n == 0: r['problems'].append('search finds nothing for the first sidebar entry (did its index load?)')
            r['seconds'] = time.time() - t0
            res[p] = r
    finally:
        if own: b.close()
    return res

def screenshots(docs, pages, out, width=1280, height=900, part=8000):
    """PNGs of `pages` (relative to `docs`) into `out`: NAME.top.png, the first screen, and the whole page as NAME.png,
    or as NAME-1.png, NAME-2.png, ... in parts of `part` pixels when it is longer. The paths written."""
    docs, out, paths = Path(docs).resolve(), Path(out), []
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob('*.png'): old.unlink()
    with Browser() as b:
        s = b.new_page(width, height)
        for p in pages:
            b.load(s, (docs/p).as_uri(), READY_JS)
            b.eval(s, 'document.fonts.ready.then(() => true)')
            h = int(b.call('Page.getLayoutMetrics', s)['cssContentSize']['height'])
            stem, n = Path(p).stem, -(-h // part)
            shots = [(f'{stem}.top.png', 0, min(height, h))]
            shots += [(f'{stem}{f"-{i+1}" if n > 1 else ""}.png', i * part, min(part, h - i * part)) for i in range(n)]
            for name, y, hh in shots:
                shot = b.call('Page.captureScreenshot', s, format='png', captureBeyondViewport=True,
                              clip={'x': 0, 'y': y, 'width': width, 'height': hh, 'scale': 1})
                (out/name).write_bytes(base64.b64decode(shot['data'])); paths.append(out/name)
    return paths

def main():
    ap = argparse.ArgumentParser(description='Screenshots of the built docs site with headless Chromium.')
    ap.add_argument('pages', nargs='*', default=list(SHOTS), help='pages relative to the site (default: %(default)s)')
    ap.add_argument('--docs', default='_docs', help='the built site (python .ci/docs.py builds it)')
    ap.add_argument('--out', default='_docs_shots', help='where the PNGs go (kept out of git)')
    ap.add_argument('--width', type=int, default=1280)
    a = ap.parse_args()
    for p in screenshots(a.docs, a.pages, a.out, a.width): print(p)

if __name__ == '__main__': main()
