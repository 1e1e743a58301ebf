"""The notebooks' explorers in a real JupyterLab, driven in headless Chromium (.ci/browser.py, the DevTools protocol).

An explorer is a cell whose saved output is an ipywidgets view (`explorer` in nbs/15_viz.ipynb). For every notebook
that has one, this:
  1. copies it into a temporary folder, up to its last explorer (the cells after it, `#| eval: false` cells and those
     flagged `slow` or `gpu` left out, as nbdev_test leaves them out), with a Python kernelspec if it has none
     (JupyterLab may still ask for a kernel while its list of kernels loads: the preselected one is accepted);
  2. opens it in JupyterLab (started here on 127.0.0.1 with a random token, its settings, runtime and workspaces in the
     temporary folder, autosave off: nothing is written back) and checks, before anything runs, that each explorer's
     saved output shows its note (that it needs a running kernel), not the widget's raw `interactive(children=...`;
  3. runs every cell (Run ▸ Run All Cells, clicked) and checks that no output is an error;
  4. in each explorer: no label cut short (wider than its box), a figure drawn, and, after its first slider is moved
     one step with the arrow key (focused handle, `Input.dispatchKeyEvent`), a new figure (the image's data differs);
     it prints one line per explorer with the time from the key press to the new image;
  5. checks that the browser console shows no error and no uncaught exception.
Exits 1 when anything fails, saying what; the last line is `S s; N of N explorers redrawn, N problems`. About 2 minutes on 2 cores.
Usage: python .ci/jupyterlab.py [nbs/10_mask.ipynb ...] [--timeout 180] [--shots DIR]"""
import argparse, base64, json, os, secrets, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

import browser  # .ci/, beside this file

ROOT = Path(__file__).resolve().parent.parent
WIDGET = 'application/vnd.jupyter.widget-view+json'
SKIP_FLAGS = ('slow', 'gpu')  # as nbdev_test --flags dist: these cells do not run
SETTINGS = {  # JupyterLab user settings, in the temporary settings folder
    '@jupyterlab/docmanager-extension/plugin': {'autosave': False},
    '@jupyterlab/notebook-extension/tracker': {'windowingMode': 'none'},  # every cell in the page, not only those in view
    '@jupyterlab/apputils-extension/notification': {'fetchNews': 'false', 'checkForUpdates': False},
}
# browser.py makes every host name unresolvable, the loopback address included: let Chromium reach the local JupyterLab
browser.FLAGS = [f.replace('MAP * ~NOTFOUND', 'MAP * ~NOTFOUND, EXCLUDE 127.0.0.1') for f in browser.FLAGS]

def src(cell): return ''.join(cell['source']) if isinstance(cell['source'], list) else cell['source']

def explorer_cells(nb) -> list[int]:
    "Indices of the cells whose saved output is a widget view: the explorers."
    return [i for i, c in enumerate(nb['cells']) if c['cell_type'] == 'code'
            and any(WIDGET in o.get('data', {}) for o in c.get('outputs', []))]

def skipped(cell) -> bool:
    "Whether nbdev_test --flags dist skips the cell: `#| eval: false`, or a slow or gpu flag."
    opts = [l[2:].strip() for l in src(cell).split('\n') if l.startswith('#|')]
    return any(o.replace(' ', '') == 'eval:false' or o in SKIP_FLAGS for o in opts)

def prepare(path:Path, dest:Path) -> tuple[list[int], list[str]]:
    "Copy the notebook at `path` into `dest`, up to its last explorer; its explorers' indices there and the problems of their saved outputs."
    nb = json.loads(path.read_text(encoding='utf-8'))
    last = explorer_cells(nb)[-1]
    nb['cells'] = [c for c in nb['cells'][:last + 1] if c['cell_type'] != 'code' or not skipped(c)]
    nb['metadata'].setdefault('kernelspec', {'name': 'python3', 'display_name': 'Python 3 (ipykernel)', 'language': 'python'})
    problems = []
    for i in explorer_cells(nb):
        data = [o['data'] for o in nb['cells'][i]['outputs'] if WIDGET in o.get('data', {})][0]
        if 'text/html' not in data or src({'source': data.get('text/plain', '')}).startswith('interactive('):
            problems.append(f"{path.name}: cell {i}: its saved output is a bare widget (`{src({'source': data.get('text/plain', '')})[:40]}...`), "
                            "no note for a reader with no kernel: make it with astrai_nb.viz.explorer and run the notebook")
    (dest/path.name).write_text(json.dumps(nb, indent=1), encoding='utf-8')
    return explorer_cells(nb), problems

def free_port() -> int:
    s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()
    return port

def start_lab(tmp:Path, root:Path) -> tuple[subprocess.Popen, str, str]:
    "JupyterLab on 127.0.0.1 serving `root`, its own settings and runtime under `tmp`: the process, base URL and token."
    for plugin, values in SETTINGS.items():
        p = tmp/'settings'/(plugin + '.jupyterlab-settings'); p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(values))
    token, port = secrets.token_hex(16), free_port()
    env = {**os.environ, 'JUPYTER_CONFIG_DIR': str(tmp/'config'), 'JUPYTER_RUNTIME_DIR': str(tmp/'runtime'),
           'JUPYTERLAB_SETTINGS_DIR': str(tmp/'settings'), 'JUPYTERLAB_WORKSPACES_DIR': str(tmp/'workspaces'),
           'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1'),
           'PYTHONPATH': os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')]).rstrip(os.pathsep)}  # this checkout's package
    cmd = [sys.executable, '-m', 'jupyterlab', '--no-browser', '--ServerApp.ip=127.0.0.1', f'--ServerApp.port={port}',
           '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}',
           '--ServerApp.terminals_enabled=False', '--LabApp.news_url=', *(['--allow-root'] if os.geteuid() == 0 else [])]
    proc = subprocess.Popen(cmd, env=env, stdout=open(tmp/'jupyterlab.log', 'w'), stderr=subprocess.STDOUT, start_new_session=True)
    base, t0 = f'http://127.0.0.1:{port}', time.time()
    while True:
        try:
            urllib.request.urlopen(urllib.request.Request(f'{base}/api/status', headers={'Authorization': f'token {token}'}), timeout=2)
            return proc, base, token
        except OSError:
            if proc.poll() is not None or time.time() - t0 > 90:
                stop_lab(proc)
                raise RuntimeError(f"JupyterLab did not start (is `jupyterlab` installed? pip install -e '.[dev]'):\n"
                                   + (tmp/'jupyterlab.log').read_text()[-2000:])
            time.sleep(0.3)

def stop_lab(proc):
    "Stop JupyterLab and the kernels it started (its own process group)."
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try: proc.wait(15)
        except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait()

def api(base, token, path, method='GET'):
    req = urllib.request.Request(f'{base}{path}', method=method, headers={'Authorization': f'token {token}'})
    with urllib.request.urlopen(req, timeout=30) as r: body = r.read()
    return json.loads(body) if body else None

# ---- in the page ----
CELLS_JS = "document.querySelectorAll('.jp-Notebook .jp-Cell')"

def click(b, s, selector, text):
    "Move the mouse onto the element matching `selector` whose text is `text`, and click it."
    box = b.eval(s, f"""(() => {{ const e = [...document.querySelectorAll({json.dumps(selector)})]
        .find(e => e.textContent.trim() === {json.dumps(text)});
      if (!e) return null; const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
    if not box: raise RuntimeError(f'no {selector} "{text}" in the page')
    b.call('Input.dispatchMouseEvent', s, type='mouseMoved', x=box[0], y=box[1])
    for t in ('mousePressed', 'mouseReleased'):
        b.call('Input.dispatchMouseEvent', s, type=t, x=box[0], y=box[1], button='left', clickCount=1)

def run_all(b, s, timeout) -> tuple[float, list[str]]:
    "Run ▸ Run All Cells; wait until every code cell has run or one fails: (seconds, the error outputs' first lines)."
    t0 = time.time()
    while True:  # the item is disabled until the notebook and its kernel are ready: open the menu until it is not
        if b.eval(s, "document.querySelector('.jp-Dialog .jp-Dialog-header')?.textContent.trim()") == 'Select Kernel':
            click(b, s, '.jp-Dialog-button.jp-mod-accept', 'Select')    # its kernelspec's kernel, preselected
            time.sleep(0.5)
        idle = b.eval(s, "[...document.querySelectorAll('.jp-StatusBar-TextItem')].some(e => /[|] Idle$/.test(e.textContent.trim()))")
        if idle:  # the kernel started and waits
            click(b, s, '.lm-MenuBar-itemLabel', 'Run'); time.sleep(0.3)
            if b.eval(s, """[...document.querySelectorAll('.lm-Menu-item')].some(i =>
                 i.textContent.includes('Run All Cells') && !i.classList.contains('lm-mod-disabled'))"""): break
        if time.time() - t0 > 90: raise RuntimeError('the notebook and its kernel were not ready in 90 s')
        b.call('Input.dispatchKeyEvent', s, type='rawKeyDown', key='Escape', code='Escape', windowsVirtualKeyCode=27)
        time.sleep(1)
    click(b, s, '.lm-Menu-itemLabel', 'Run All Cells')
    t0 = time.time()
    while time.time() - t0 < timeout:
        time.sleep(0.5)
        st = b.eval(s, f"""(() => {{
          const prompts = [...{CELLS_JS}].filter(c => c.classList.contains('jp-CodeCell'))
            .map(c => c.querySelector('.jp-InputPrompt').textContent.trim());
          const errors = [...document.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
            .map(o => o.innerText).filter(t => /Traceback|Error/.test(t));
          return {{done: prompts.every(p => /^\\[\\d+\\]:$/.test(p)), errors, prompts}}; }})()""")
        if st['done'] or st['errors']: break
    else: st['errors'] = st['errors'] or [f"the notebook did not finish in {timeout} s: cells' prompts {' '.join(st['prompts'])}"]
    return time.time() - t0, [([l for l in e.split('\n') if 'Error' in l] or [e[:200]])[-1].strip() for e in st['errors']]

def explorer_state(b, s, k):
    "The k-th explorer in the page: its labels cut short, its image's data, its first slider's description and value."
    return b.eval(s, f"""(() => {{
      const w = document.querySelectorAll('.widget-interact')[{k}];
      if (!w) return null;
      const img = w.querySelector('.widget-output img'), h = w.querySelector('.noUi-handle');
      const sl = h && h.closest('.widget-slider');
      const err = [...w.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
        .map(o => o.innerText.split('\\n').filter(l => /Error/.test(l)).pop() || o.innerText.slice(0, 200));   // its last line
      return {{cut: [...w.querySelectorAll('.widget-label')].filter(l => l.scrollWidth > l.clientWidth + 1).map(l => l.textContent),
              img: img ? img.src : null, slider: sl ? sl.querySelector('.widget-label').textContent : null,
              value: h ? h.getAttribute('aria-valuetext') : null, errors: err}}; }})()""")

def move_slider(b, s, k) -> None:
    "Focus the k-th explorer's first slider handle and press the right arrow key once."
    b.eval(s, f"document.querySelectorAll('.widget-interact')[{k}].querySelector('.noUi-handle').focus()")
    for t in ('rawKeyDown', 'keyUp'):
        b.call('Input.dispatchKeyEvent', s, type=t, key='ArrowRight', code='ArrowRight', windowsVirtualKeyCode=39,
               nativeVirtualKeyCode=39)

def console_errors(b, s) -> list[str]:
    "The page's uncaught exceptions, console errors and error log entries so far."
    out = [f"uncaught: {e['exceptionDetails'].get('exception', {}).get('description', e['exceptionDetails'].get('text'))}".split('\n')[0]
           for e in b.session_events(s, 'Runtime.exceptionThrown')]
    out += ['console.error: ' + ' '.join(str(a.get('value', a.get('description', ''))) for a in e['args'])[:300]
            for e in b.session_events(s, 'Runtime.consoleAPICalled') if e['type'] == 'error']
    out += [f"{e['entry']['source']} error: {e['entry']['text']} {e['entry'].get('url', '')}".strip()[:300]
            for e in b.session_events(s, 'Log.entryAdded') if e['entry']['level'] == 'error']
    return out

def check_notebook(b, base, token, name, n_explorers, timeout, shots=None) -> tuple[list[str], list[str]]:
    "Open, check, run and move one notebook's explorers: (a line per explorer, problems); a screenshot into `shots`."
    tid = b.call('Target.createTarget', url='about:blank')['targetId']      # a tab of its own, closed at the end
    s = b.call('Target.attachToTarget', targetId=tid, flatten=True)['sessionId']
    for m in ('Page.enable', 'Network.enable', 'Runtime.enable', 'Log.enable'): b.call(m, s)
    b.call('Emulation.setDeviceMetricsOverride', s, width=1400, height=1000, deviceScaleFactor=1, mobile=False)
    lines, problems = [], []
    try:
        try: b.load(s, f'{base}/lab/tree/{name}?reset&token={token}',   # reset: no notebook of the last tab reopened
                    f"{CELLS_JS}.length > 0", timeout=90)
        except TimeoutError: problems.append(f'{name}: JupyterLab did not open it in 90 s'); return lines, problems
        time.sleep(1)
        notes = b.eval(s, """[...document.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText)
                             .filter(t => t.includes('needs a running kernel') || t.startsWith('interactive('))""")
        if len([t for t in notes if 'needs a running kernel' in t]) != n_explorers:
            problems.append(f'{name}: before running, {n_explorers} explorer notes expected, the page shows: {notes}')
        if dialogs := b.eval(s, "[...document.querySelectorAll('.jp-Dialog')].map(d => d.innerText.slice(0, 200))"):
            problems.append(f'{name}: a dialog opened: {dialogs}')
        try: secs, errors = run_all(b, s, timeout)
        except RuntimeError as e: problems.append(f'{name}: {e}'); return lines, problems
        problems += [f'{name}: error output: {e}' for e in errors]
        if errors: return lines, problems
        for k in range(n_explorers):
            st = explorer_state(b, s, k)
            if st is None: problems.append(f'{name}: explorer {k + 1} of {n_explorers} is not in the page after running'); continue
            problems += [f'{name}: explorer {k + 1}: label cut short: {l}' for l in st['cut']]
            if not st['img'] or not st['slider']:
                problems.append(f"{name}: explorer {k + 1}: {'no figure drawn' if not st['img'] else 'no slider'} after running"); continue
            move_slider(b, s, k)
            t0 = time.time()
            while time.time() - t0 < 30:   # until a new figure, or an error in the widget
                new = explorer_state(b, s, k)
                if (new['img'] and new['img'] != st['img']) or new['errors']: break
                time.sleep(0.02)
            dt = time.time() - t0
            moved = f"{st['slider']} {st['value']} -> {new['value']}"
            if new['errors']: problems += [f'{name}: explorer {k + 1}: {moved}: error output: {e}' for e in new['errors']]
            elif new['img'] == st['img']: problems.append(f'{name}: explorer {k + 1}: {moved}: the figure did not change in 30 s')
            else: lines.append(f'{name}: explorer {k + 1}: {moved}: redrawn in {dt:.2f} s (the notebook ran in {secs:.0f} s)')
        problems += [f'{name}: browser console: {e}' for e in console_errors(b, s)]
        return lines, problems
    finally:
        if shots:
            shot = b.call('Page.captureScreenshot', s, format='png')['data']
            (Path(shots)/(Path(name).stem + '.png')).write_bytes(base64.b64decode(shot))
        b.call('Target.closeTarget', targetId=tid)
        for sess in api(base, token, '/api/sessions'): api(base, token, f"/api/sessions/{sess['id']}", 'DELETE')   # its kernel

def check_all(paths, tmp, timeout, shots, problems, lines):
    "Copy every notebook, start JupyterLab and Chromium, check each notebook; `problems` and `lines` grow as it goes."
    (tmp/'nbs').mkdir()
    todo = []
    for p in paths:
        cells, probs = prepare(p, tmp/'nbs'); problems += probs; todo.append((p.name, len(cells)))
    proc, base, token = start_lab(tmp, tmp/'nbs')
    try:
        with browser.Browser(timeout=60) as b:
            for name, k in todo:
                ls, probs = check_notebook(b, base, token, name, k, timeout, shots)
                for l in ls: print(l, flush=True)
                lines += ls; problems += probs
    finally: stop_lab(proc)

def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # killed (a CI timeout): stop JupyterLab on the way out
    ap = argparse.ArgumentParser(description="Drive the notebooks' explorers in JupyterLab in headless Chromium.")
    ap.add_argument('notebooks', nargs='*', help='notebooks to check (default: every notebook in nbs/ with an explorer)')
    ap.add_argument('--timeout', type=int, default=180, help='seconds for one notebook to run (default: %(default)s)')
    ap.add_argument('--shots', help='a folder for a screenshot of each notebook at the end of its check')
    a = ap.parse_args()
    nbs = {p: json.loads(p.read_text(encoding='utf-8')) for p in
           ([Path(p) for p in a.notebooks] or sorted(p for p in (ROOT/'nbs').rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts))}
    problems = [f'{p}: has no explorer' for p, nb in nbs.items() if a.notebooks and not explorer_cells(nb)]
    paths = [p for p, nb in nbs.items() if explorer_cells(nb)]
    n, lines, t0 = sum(len(explorer_cells(nbs[p])) for p in paths), [], time.time()
    if a.shots: Path(a.shots).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix='astrai_nb_jupyterlab_'))
    try: check_all(paths, tmp, a.timeout, a.shots, problems, lines)
    except RuntimeError as e: problems.append(str(e))   # no Chromium; JupyterLab would not start
    finally: shutil.rmtree(tmp, ignore_errors=True)
    for p in problems: print('FAILED:', p)
    print(f"{time.time() - t0:.0f} s; {len(lines)} of {n} explorers redrawn, {len(problems)} problems")
    sys.exit(1 if problems or len(lines) < n else 0)

if __name__ == '__main__': main()
