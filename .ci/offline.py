"""Make the built site work offline and from any folder (`file://` or a sub-path of a server), and check that it does.

`install_assets` copies KaTeX, mermaid and the theme's font (npm packages pinned in .ci/package.json, fetched once
with `npm pack` into a cache) and the site's own script (.ci/site.js) into `_docs/site_libs/`. `rewrite_site` then
rewrites every page and stylesheet:
  - the CDN addresses smalldocs writes for KaTeX and mermaid -> the bundled copies, relative to the page (mermaid's
    classic build, as a browser refuses ES modules from `file://`); the theme's Google Fonts import -> the bundled font;
  - links to the project's published site (settings.ini `doc_host` + `doc_baseurl`, where nbdev points its
    cross-references) -> links relative to the page; one to an anchor that show_doc did not make: a method's -> its
    class's, any other -> the page (or no link, on the page itself); the markdown links nbdev writes into a
    signature's comments (shown as text) -> the backticked name;
  - a notebook named in inline code (`13_model`, `13_model.ipynb`, `nbs/13_model.ipynb`) -> a link to its page;
  - each line of a code block (code cells, fenced blocks, printed outputs) in a span that knows its indent, so a long
    line wraps under itself, and each run of non-space characters in a span that does not break (styles.css): a line
    wraps at its spaces only, never inside a flag, a number or a path (a browser breaks after any `-`: `--` / `window_size`,
    `1e-` / `3`);
  - search from `file://`: the index also as search.js, which smalldocs.js loads there (a browser refuses fetch()).
`check_site` scans the final HTML and the CSS the pages load (no browser) and returns the problems:
  - a page or stylesheet that loads anything from outside the site (scripts, stylesheets, images, fonts, frames,
    media, CSS `url()`/`@import`, a remote address in an inline script), or a local file that is not there;
  - a link that leaves the site for anywhere but the projects in ALLOWED_LINKS (the project's own published site
    counts as leaving: link its pages relatively), and a link to a page or anchor of the site that does not exist."""
import base64, fnmatch, hashlib, html, json, os, posixpath, re, shutil, subprocess, tarfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

PKG = Path(__file__).with_name('package.json')

# Where a page may link outside the site: named projects, by address prefix (the project's own repository is added
# from settings.ini `git_url`: the source links of show_doc and "Report an issue").
ALLOWED_LINKS = {
    'PyTorch': ('https://pytorch.org/', 'https://docs.pytorch.org/', 'https://github.com/pytorch/'),
    'Hugging Face (transformers, datasets, tokenizers, safetensors)': ('https://huggingface.co/docs/',
                                                                      'https://github.com/huggingface/'),
    'nbdev, fastcore, execnb': ('https://nbdev.fast.ai/', 'https://fastcore.fast.ai/', 'https://execnb.fast.ai/',
                                'https://github.com/AnswerDotAI/', 'https://github.com/fastai/'),
    'Python': ('https://docs.python.org/',),
    'NumPy, matplotlib': ('https://numpy.org/doc/', 'https://matplotlib.org/'),
    'papers on arXiv': ('https://arxiv.org/abs/', 'https://arxiv.org/pdf/'),
    'Quarto': ('https://quarto.org/',),
}

# ---- assets ----
def sri(f):
    "The Subresource Integrity string of a file, as npm records a tarball's."
    return 'sha512-' + base64.b64encode(hashlib.sha512(Path(f).read_bytes()).digest()).decode()

def cache_dir(): return Path(os.environ.get('XDG_CACHE_HOME') or Path.home()/'.cache')/'astrai_nb'/'npm'

def fetch_assets():
    "Each package of .ci/package.json as its npm tarball, fetched once into the cache and checked: {name: path}."
    pkg, d, out = json.loads(PKG.read_text()), cache_dir(), {}
    d.mkdir(parents=True, exist_ok=True)
    for name, ver in pkg['dependencies'].items():
        want, f = pkg['integrity'][name], d/f"{name.lstrip('@').replace('/', '-')}-{ver}.tgz"
        if not (f.exists() and sri(f) == want):
            if not shutil.which('npm'):
                raise SystemExit(f'docs error: npm fetches {name}@{ver} for the site (once): install it (apt-get install -y npm)')
            r = subprocess.run(['npm', 'pack', f'{name}@{ver}', '--json', '--pack-destination', str(d)],
                               capture_output=True, text=True)
            if r.returncode: raise SystemExit(f'docs error: `npm pack {name}@{ver}` failed:\n{r.stderr.strip()[-2000:]}')
            f = d/json.loads(r.stdout)[0]['filename']
        if sri(f) != want:
            raise SystemExit(f'docs error: {f} is not the {name}@{ver} that .ci/package.json pins (integrity '
                             f'{sri(f)[:30]}..., want {want[:30]}...): delete it to fetch it again')
        out[name] = f
    return out

def install_assets(docs):
    """Copy the files .ci/package.json names from each tarball into `docs`/site_libs/NAME/ (a leading `dist/` dropped),
    and the site's own script, .ci/site.js."""
    pkg = json.loads(PKG.read_text())
    (Path(docs)/SITE_JS).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PKG.with_name('site.js'), Path(docs)/SITE_JS)
    for name, tgz in fetch_assets().items():
        dest, pats = Path(docs)/'site_libs'/name.split('/')[-1], pkg['files'][name]
        shutil.rmtree(dest, ignore_errors=True)
        missing = set(pats)
        with tarfile.open(tgz) as t:
            for m in t.getmembers():
                rel = m.name.split('/', 1)[-1]  # npm tarballs hold package/...
                hit = {p for p in pats if fnmatch.fnmatch(rel, p)}
                if not (m.isfile() and hit): continue
                missing -= hit
                to = dest/re.sub(r'^dist/', '', rel); to.parent.mkdir(parents=True, exist_ok=True)
                to.write_bytes(t.extractfile(m).read())
        if missing: raise SystemExit(f'docs error: {tgz.name} has no {", ".join(missing)} (.ci/package.json `files`)')

# ---- rewriting ----
SITE_JS = 'site_libs/astrai_nb/site.js'  # .ci/site.js: fits wide formulas, draws mermaid diagrams (zoom on click)
KATEX_CDN = re.compile(r'https://cdn\.jsdelivr\.net/npm/katex@[^/"\']+/dist/')
MERMAID_MODULE = re.compile(r"""<script type="module">import mermaid from ['"][^'"]+['"];(.*?)</script>""", re.S)
GOOGLE_FONT = re.compile(r'@import\s+url\(["\']?https://fonts\.googleapis\.com/css2\?family=Source\+Sans\+Pro[^)]*\)\s*;?')
NB_CODE = re.compile(r'<code>((?:nbs/)?(?:[\w.-]+/)*\d[\w-]*?)(?:\.ipynb)?</code>')
SKIP = re.compile(r'(?s)<(pre|a|script|style|head|textarea)\b.*?</\1>')  # no notebook links inside these

def rel_to(target, page):
    "`target` (relative to the site's root) as a link from `page` (also relative to the root)."
    return posixpath.relpath(target, posixpath.dirname(page) or '.')

def own_prefix(cfg):
    "The address of the project's published site, where nbdev points cross-references: `doc_host` + `doc_baseurl`."
    base = cfg.get('doc_baseurl', '').strip('/')
    return cfg.get('doc_host', '').rstrip('/') + ('/' + base if base else '')

CODE = re.compile(r'(<pre(?: class="(?![^"]*\bmermaid\b)[^"]*")?><code\b[^>]*>)(.*?)(</code></pre>)', re.S)  # not mermaid's
TAG = re.compile(r'(<[^>]+>)')
VOID = {'br', 'wbr', 'img', 'input', 'hr'}

def keep_tokens(line):
    """A line of highlighted code (balanced HTML) with each run of non-space characters that a browser could break (one
    that is not all ASCII letters, digits and `_`) in a `<span class="w">`, which styles.css keeps on one line. The tags
    open at a run's edge (a highlighted string that holds a space) are closed before the span's edge and opened again
    after it, so the markup stays nested."""
    items = []                                    # tags, runs of spaces, and the text between them
    for part in TAG.split(line):
        items += [part] if part.startswith('<') else [c for c in re.split(r'([ \t]+)', part) if c]
    out, stack, seg = [], [], []
    def reopen(): return ''.join(t for _, t in stack)
    def close(): return ''.join(f'</{n}>' for n, _ in reversed(stack))
    def emit(parts):
        for p in parts:
            if p.startswith('</'): stack and stack.pop()
            elif p.startswith('<') and not p.endswith('/>') and (n := re.match(r'<([\w-]+)', p)) and n.group(1).lower() not in VOID:
                stack.append((n.group(1), p))
            out.append(p)
    def flush():
        text = ''.join(p for p in seg if not p.startswith('<'))
        if len(text) < 2 or re.fullmatch(r'[A-Za-z0-9_]*', text): emit(seg)
        else: out.append(close() + '<span class="w">' + reopen()); emit(seg); out.append(close() + '</span>' + reopen())
        seg.clear()
    for p in items:
        if p[0] in ' \t': flush(); out.append(p)
        else: seg.append(p)
    flush()
    return re.sub(r'<span\b[^>]*></span>', '', ''.join(out))

def hang_lines(code):
    """Each line of highlighted code in a `<span class="cl">` that knows its indent (`--i`), so that a long line wraps
    with a hanging indent under itself (styles.css) instead of at the left edge, where it reads as a new line; and
    wraps at its spaces only (`keep_tokens`)."""
    out, carry = [], []
    for line in code.split('\n'):
        body, indent = ''.join(carry) + line, len(re.match(r' *', html.unescape(re.sub(r'<[^>]+>', '', line))).group())
        for tag in re.findall(r'<span[^>]*>|</span>', line):  # spans (a string, a comment) that go on to the next line
            if tag == '</span>': carry = carry[:-1]
            else: carry.append(tag)
        out.append(f'<span class="cl" style="--i:{indent}ch">{keep_tokens(body + "</span>" * len(carry))}</span>')
    return '\n'.join(out)

def rewrite_page(s, page, own, notebooks):
    "One page's HTML (`page`: its path in the site) with local assets, code lines in spans, notebook names linked."
    off = '../' * page.count('/')
    s = KATEX_CDN.sub(off + 'site_libs/katex/', s)
    s = CODE.sub(lambda m: m.group(0) if 'class="cl"' in m.group(2) or 'id="cb' in m.group(2)
                 else m.group(1) + hang_lines(m.group(2)) + m.group(3), s)
    s = MERMAID_MODULE.sub(lambda m: f'<script src="{off}site_libs/mermaid/mermaid.min.js"></script>'
                           f'<script>{m.group(1).replace("startOnLoad:true", "startOnLoad:false")}</script>', s)  # site.js draws
    if SITE_JS not in s: s = s.replace('</head>', f'<script src="{off}{SITE_JS}" defer></script></head>', 1)
    if own: s = re.sub(rf'\[`([^`\]]+)`\]\({re.escape(own)}/[^)\s]*\)', r'`\1`', s)  # doclinks nbdev writes into a signature's comments
    def link(m):
        name = re.sub(r'^nbs/', '', m.group(1))
        target = notebooks.get(name)
        return f'<a href="{rel_to(target, page)}">{m.group(0)}</a>' if target else m.group(0)
    parts, last, out = SKIP.finditer(s), 0, []
    for m in parts:
        out += [NB_CODE.sub(link, s[last:m.start()]), m.group(0)]; last = m.end()
    return ''.join(out) + NB_CODE.sub(link, s[last:])

def own_links(s, page, own, ids):
    """nbdev's cross-references on a page (links to `own`, the published site) made relative to `page`. `ids`: each
    page's path -> its anchors. An anchor the page lacks: a method's (`#class.name`, which only show_doc makes) -> its
    class's; any other (a private helper nbdev indexes but nobody documents) -> the page's top, or no link on itself."""
    def fix(m):
        pre, url, post, body = m.groups()
        path, _, frag = unquote(url[len(own):]).lstrip('/').partition('#')
        path, have = path or 'index.html', ids.get(path or 'index.html')
        while frag and have is not None and frag not in have and '.' in frag: frag = frag.rsplit('.', 1)[0]
        if frag and have is not None and frag not in have:
            if path == page: return body
            frag = ''
        return f'<a{pre}href="{rel_to(path, page)}{"#" + frag if frag else ""}"{post}>{body}</a>'
    return re.sub(rf'<a\b([^>]*?)\bhref="({re.escape(own)}(?:/[^"]*)?)"([^>]*)>(.*?)</a>', fix, s, flags=re.S) if own else s

SEARCH_FETCH = '''      const r = await fetch(offset + "search.json");
      index = await r.json();'''
SEARCH_LOAD = (  # a browser refuses fetch() from file://, but runs a script: search.js holds the same index
    '      index = location.protocol !== "file:" ? await (await fetch(offset + "search.json")).json()\n'
    '        : await new Promise((ok, no) => { const s = document.createElement("script"); s.src = offset + "search.js";\n'
    '            s.onload = () => ok(window.smalldocsSearchIndex); s.onerror = no; document.head.appendChild(s); });')

def local_search(docs):
    "Search from `file://` too: the index as a script (search.js) that smalldocs.js loads there instead of fetching it."
    docs = Path(docs); js = docs/'site_libs'/'smalldocs.js'
    if not (docs/'search.json').exists() or not js.exists(): return
    (docs/'search.js').write_text('window.smalldocsSearchIndex = ' + (docs/'search.json').read_text(encoding='utf-8') + ';\n', encoding='utf-8')
    js.write_text(js.read_text(encoding='utf-8').replace(SEARCH_FETCH, SEARCH_LOAD), encoding='utf-8')

def rewrite_site(docs, cfg, pages):
    """Rewrite every page and stylesheet of `docs` (see the module's doc). `pages`: each notebook's path (relative to
    nbs/) -> its page's name as a notebook (rename_pages). Returns how many pages changed."""
    docs, own = Path(docs), own_prefix(cfg)
    notebooks, stems = {}, {}
    for nb, page in pages.items():
        target = Path(page).with_suffix('.html').as_posix()
        notebooks[Path(nb).with_suffix('').as_posix()] = target
        stems.setdefault(Path(nb).stem, set()).add(target)
    notebooks.update({k: v.pop() for k, v in stems.items() if len(v) == 1 and k not in notebooks})  # a unique name alone
    font = docs/'site_libs'/'source-sans-pro'
    for css in docs.rglob('*.css'):
        s = css.read_text(encoding='utf-8')
        t = GOOGLE_FONT.sub(lambda m: ''.join(f'@import url("{rel_to((font/w).relative_to(docs).as_posix(), css.relative_to(docs).as_posix())}");'
                                              for w in ('300.css', '400.css', '700.css')), s)
        if t != s: css.write_text(t, encoding='utf-8')
    local_search(docs)
    texts = {f: f.read_text(encoding='utf-8') for f in sorted(docs.rglob('*.html'))}
    new = {f: rewrite_page(s, f.relative_to(docs).as_posix(), own, notebooks) for f, s in texts.items()}
    ids = {f.relative_to(docs).as_posix(): Page(s).ids for f, s in new.items()}
    n = 0
    for f, s in new.items():
        s = own_links(s, f.relative_to(docs).as_posix(), own, ids)
        if s != texts[f]: f.write_text(s, encoding='utf-8'); n += 1
    return n

# ---- checks ----
LOAD_ATTRS = {'script': ('src',), 'img': ('src', 'srcset'), 'source': ('src', 'srcset'), 'iframe': ('src',),
              'frame': ('src',), 'embed': ('src',), 'object': ('data',), 'video': ('src', 'poster'), 'audio': ('src',),
              'track': ('src',), 'input': ('src',), 'image': ('href', 'xlink:href'), 'use': ('href', 'xlink:href'),
              'feimage': ('href', 'xlink:href')}
NOT_LOADED = {'canonical', 'alternate', 'author', 'license', 'help', 'next', 'prev', 'search', 'bookmark'}  # <link rel=...>
CSS_URL = re.compile(r'''url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3''')

class Page(HTMLParser):
    "What a page loads, where it links, the ids it has, and its inline CSS and scripts."
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.loads, self.links, self.ids, self.css, self.scripts, self._in = [], [], set(), [], [], None
        self.feed(text); self.close()
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get('id'): self.ids.add(a['id'])
        if tag == 'a' and a.get('name'): self.ids.add(a['name'])
        for k in LOAD_ATTRS.get(tag, ()):
            for u in (a.get(k) or '').split(',') if k == 'srcset' else [a.get(k)]:
                if u and u.strip(): self.loads.append((f'<{tag} {k}>', u.strip().split()[0]))
        if tag == 'link' and a.get('href') and not set((a.get('rel') or '').lower().split()) & NOT_LOADED:
            self.loads.append((f'<link rel="{a.get("rel")}">', a['href']))
        if tag in ('a', 'area') and a.get('href') is not None: self.links.append(a['href'])
        if a.get('style'): self.css.append(a['style'])
        if tag in ('style', 'script') and not a.get('src'): self._in = tag
    def handle_endtag(self, tag): self._in = None
    def handle_data(self, d):
        if self._in == 'style': self.css.append(d)
        elif self._in == 'script': self.scripts.append(d)

def is_remote(u): return bool(re.match(r'^([a-z][a-z0-9+.-]*:|//)', u, re.I)) and not re.match(r'^(data|blob):', u, re.I)

def local_file(docs, base, u):
    "The file a relative address names (relative to the file `base`), or None when it leaves `docs`."
    p = unquote(urlsplit(u).path)
    f = ((base.parent/p) if p else base).resolve()
    return f if f.is_relative_to(docs.resolve()) else None

def check_css(docs, css_file, text, where, seen, errs):
    "The problems of a stylesheet's `url()`s and `@import`s, following the local ones."
    for m in CSS_URL.finditer(text):
        u = (m.group(2) or m.group(4) or '').strip()
        if not u or u.startswith(('data:', '#')): continue
        if is_remote(u): errs.append(f'{where}: loads {u} from outside the site (CSS {"@import" if m.group(4) else "url()"})'); continue
        f = local_file(docs, css_file, u)
        if not (f and f.is_file()): errs.append(f'{where}: loads {u}, which is not in the site'); continue
        if f.suffix == '.css' and f not in seen:
            seen.add(f); check_css(docs, f, f.read_text(encoding='utf-8'), f.relative_to(docs.resolve()).as_posix(), seen, errs)

def allowed(u, git_url):
    url = u.split('#')[0]
    if git_url and (url == git_url.rstrip('/') or url.startswith(git_url.rstrip('/') + '/')): return True
    return any(url.startswith(p) for ps in ALLOWED_LINKS.values() for p in ps)

def check_site(docs, cfg):
    "The problems of the built site in `docs` (see the module's doc): a list of strings, each naming its page."
    docs, errs, seen_css, parsed = Path(docs), [], set(), {}
    own, git_url = own_prefix(cfg), cfg.get('git_url', '')
    pages = sorted(docs.rglob('*.html'))
    for f in pages: parsed[f.resolve()] = Page(f.read_text(encoding='utf-8'))
    for f in pages:
        name, pg = f.relative_to(docs).as_posix(), parsed[f.resolve()]
        for what, u in pg.loads:
            if u.startswith('data:') or u.startswith('#'): continue
            if is_remote(u): errs.append(f'{name}: loads {u} from outside the site ({what})'); continue
            t = local_file(docs, f, u)
            if not (t and t.is_file()): errs.append(f'{name}: loads {u} ({what}), which is not in the site'); continue
            if t.suffix == '.css' and t not in seen_css:
                seen_css.add(t); check_css(docs, t, t.read_text(encoding='utf-8'), t.relative_to(docs.resolve()).as_posix(), seen_css, errs)
        for css in pg.css: check_css(docs, f, css, f'{name} (inline style)', seen_css, errs)
        for js in pg.scripts:
            for u in re.findall(r'''["'`](https?://[^"'`\s]+)''', js): errs.append(f'{name}: an inline script names {u}: load it from the site')
        for u in pg.links:
            if not u or u.startswith('#'):
                if u[1:] and unquote(u[1:]) not in pg.ids: errs.append(f'{name}: links to #{u[1:]}, which is not on the page')
                continue
            if own and (u == own or u.startswith(own + '/')):
                errs.append(f'{name}: links to the published site ({u}): link the page relatively'); continue
            if is_remote(u):
                if not allowed(u, git_url):
                    errs.append(f'{name}: links to {u}, outside the site and not to a project in .ci/offline.py ALLOWED_LINKS')
                continue
            t = local_file(docs, f, u)
            if not (t and t.exists()): errs.append(f'{name}: links to {u}, which is not in the site'); continue
            frag = unquote(urlsplit(u).fragment)
            if frag and t.suffix == '.html' and t in parsed and frag not in parsed[t].ids:
                errs.append(f'{name}: links to {u}, but {t.name} has no #{frag}')
    return errs
