"""Build the docs site offline into `_docs/` and `README.md` from `nbs/index.ipynb`, then check both.

`nbdev_docs` needs Quarto, which CI cannot install, so this runs nbdev's own steps (`refresh_quarto_yml`,
`_build_modidx`, `nbdev_sidebar`, `proc_nbs` -> `_proc/`) and renders `_proc/` with smalldocs, which reads
`_proc/_quarto.yml` and shows the outputs saved in the notebooks (it runs no code). The source nbdev shows for
`#| exports` cells is folded. Then .ci/offline.py makes the site work with no network and from any folder: KaTeX,
mermaid and the theme's font bundled (npm packages pinned in .ci/package.json), links to the project's own pages
relative, notebook names in inline code linked to their pages, long code lines wrapped at their spaces (never inside a
token) under their indent, search that works from `file://`. README.md is made from the processed index notebook, its
relative links (relative to nbs/, where the notebook is) made relative to the repository's root. Each step is printed
as it starts, and the notebooks and pages one by one as they are done.
Needs: `npm` (fetches the pinned packages once) and, for the browser checks, Debian's `chromium`.
The checks, each failing with a message that says what to do:
  - every notebook has its page, named as Quarto names it (`output-file`: 00_config.ipynb -> config.html);
  - every image saved in a notebook is on its page, and no figure is so wide that its text is unreadable at the
    site's column (MAX_FIGURE_INCHES);
  - a notebook that calls a plotting function holds at least one saved image (it was committed without running);
  - every name in a module's `__all__` is on the page of the notebook that exports it, functions and classes with
    a `show_doc` heading and signature;
  - no page loads anything from outside the site, and no link leaves it except to the projects in
    .ci/offline.py ALLOWED_LINKS; links inside the site reach a file and anchor that exist (.ci/offline.py);
  - in headless Chromium (.ci/browser.py), every page from `file://` with the network cut off: every formula typeset
    by KaTeX (no raw `$`, `\\(`, `\\[` left in the text), every mermaid diagram an SVG, no code block cut off, no line
    of code wrapped inside a run of non-space characters (WRAP_JS), no request leaving the site, no JavaScript error, and
    the search box finds pages (`--no-browser` skips this where there is no Chromium);
  - every relative link of README.md names a file of the repository (as GitHub resolves it);
  - every ```python block of README.md runs as shown: alone, in a fresh Python, in an empty folder, within
    README_TIMEOUT seconds, and prints the output the README shows under it;
  - with `--check-readme`, the regenerated README.md is the committed one.
Usage: python .ci/docs.py [--check-readme] [--no-browser] [--n_workers 2]"""
import argparse, ast, base64, html, json, os, posixpath, re, shutil, struct, subprocess, sys, tempfile, textwrap, threading, time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat, yaml
from nbconvert import MarkdownExporter
from nbdev.config import get_config
from nbdev.doclinks import _build_modidx, nbglob
from nbdev.quarto import nbdev_sidebar, refresh_quarto_yml
from nbdev.serve import proc_nbs
from smalldocs.site import build as smalldocs_build

import browser, offline  # .ci/, beside this file

IMAGE_TYPES = ('image/png', 'image/svg+xml', 'image/jpeg', 'image/gif')
# Known, harmless smalldocs warnings: nbdev's stock _quarto.yml asks Quarto for these, smalldocs makes html only.
BENIGN = ('format commonmark is not built', 'format.html.keep-md is ignored')

T0 = time.time()
def say(msg):
    "Print a line of progress, with the seconds since the start."
    print(f'docs [{time.time() - T0:4.0f}s] {msg}', flush=True)

def read_nb(p): return json.loads(Path(p).read_text(encoding='utf-8'))
def src(cell): return ''.join(cell['source']) if isinstance(cell['source'], list) else cell['source']

def cell_opts(code):
    "Quarto's `#| key: value` options at the top of a code cell, and the code without them."
    lines = code.split('\n'); opts = []
    while lines and lines[0].startswith('#|'): opts.append(lines.pop(0)[2:].strip())
    try: parsed = yaml.safe_load('\n'.join(opts)) or {}
    except yaml.YAMLError: parsed = {}
    return (parsed if isinstance(parsed, dict) else {}), '\n'.join(lines)

def frontmatter(nb):
    "The YAML front matter nbdev's processing puts in a raw first cell."
    c = nb['cells'][0] if nb['cells'] else None
    if c and c['cell_type'] == 'raw' and src(c).startswith('---'): return yaml.safe_load(src(c).strip().strip('-')) or {}
    return {}

def n_images(nb, shown_only=False):
    "Image outputs saved in `nb`; `shown_only` leaves out cells whose options hide their output."
    n = 0
    for c in nb['cells']:
        if c['cell_type'] != 'code': continue
        o = cell_opts(src(c))[0]
        if shown_only and (o.get('include') is False or o.get('output') is False): continue
        n += sum(any(t in out.get('data', {}) for t in IMAGE_TYPES) for out in c.get('outputs', []))
    return n

# ---- build ----
def rename_pages(proc):
    """Quarto names a page by its front matter's `output-file` (00_config.ipynb -> config.html), smalldocs by its file
    name: rename the processed notebooks. Returns each notebook's path (relative to nbs/) -> its renamed one."""
    pages, moves = {}, {}
    for p in sorted(proc.rglob('*.ipynb')):
        rel = p.relative_to(proc); pages[rel] = rel
        nb = read_nb(p); fm = frontmatter(nb); out = fm.pop('output-file', None)
        if not out: continue  # a notebook with no title keeps its name, in Quarto too
        nb['cells'][0]['source'] = '---\n' + yaml.safe_dump(fm, sort_keys=False) + '---\n'  # smalldocs warns on output-file
        p.unlink(); new = p.with_name(Path(out).stem + '.ipynb'); pages[rel] = new.relative_to(proc)
        new.write_text(json.dumps(nb, indent=1), encoding='utf-8')
        if new.name != p.name: moves[p.name] = new.name
    if not moves: return pages
    pat = re.compile(r'(?<![\w.-])(' + '|'.join(map(re.escape, moves)) + r')(?=$|[#?])')
    sub = lambda s: pat.sub(lambda m: moves[m.group(1)], s)
    for p in proc.rglob('*.yml'):  # sidebar entries
        p.write_text(re.sub(r'(?m)^(\s*-?\s*(?:href:|file:)?\s*)(\S+)$', lambda m: m.group(1) + sub(m.group(2)), p.read_text()))
    link = re.compile(r'(\]\(\s*<?|\bhref=["\'])([^)\s>"\']+)')  # link targets only: code that names a notebook keeps its name
    for p in proc.rglob('*.ipynb'):
        nb = read_nb(p)
        for c in nb['cells']:
            if c['cell_type'] in ('markdown', 'raw'): c['source'] = link.sub(lambda m: m.group(1) + sub(m.group(2)), src(c))
        p.write_text(json.dumps(nb, indent=1), encoding='utf-8')
    return pages

def fold_exported(proc):
    "Fold the source nbdev shows for `#| exports` cells (Quarto's `code-fold: show` opens it; `true` keeps it closed)."
    for p in proc.rglob('*.ipynb'):
        nb, n = read_nb(p), 0
        for c in nb['cells']:
            s = src(c)
            if c['cell_type'] == 'code' and s.startswith('#| code-fold: show\n#| code-summary: "Exported source"'):
                c['source'] = s.replace('#| code-fold: show', '#| code-fold: true', 1); n += 1
        if n: p.write_text(json.dumps(nb, indent=1), encoding='utf-8')

class Progress(threading.Thread):
    "Say each notebook `proc_nbs` has processed, as its file appears in `_proc/` (nbdev's workers write it when done)."
    def __init__(self, nbs, proc):
        super().__init__(daemon=True)
        self.todo, self.proc, self.done = [p.relative_to(nbs) for p in nbglob(nbs, as_path=True)], proc, threading.Event()
    def run(self):
        n, t0 = len(self.todo), time.time()
        while self.todo and not self.done.wait(0.5):
            for rel in [r for r in self.todo if (self.proc/r).exists()]:
                self.todo.remove(rel); say(f'  processed {n - len(self.todo):2d}/{n} {rel} ({time.time() - t0:.0f}s)')
        if not self.todo: say("  all processed; nbdev's worker processes are exiting")

def build_site(cfg, n_workers):
    "nbdev's `_pre_docs` without `_ensure_quarto`, then smalldocs instead of `quarto render`."
    say('nbdev: _quarto.yml, the module index, the sidebar')
    refresh_quarto_yml()
    _build_modidx()
    nbdev_sidebar.__wrapped__(path=cfg.nbs_path)
    shutil.rmtree(cfg.config_path/'_proc', ignore_errors=True)
    progress = Progress(cfg.nbs_path.resolve(), cfg.config_path/'_proc')
    say(f'nbdev: processing {len(progress.todo)} notebooks with {n_workers} workers (runs their import, export and show_doc cells)')
    progress.start()
    try: proc = proc_nbs(cfg.nbs_path, n_workers=n_workers, force=True)
    except Exception as e:  # a cell failed in a worker: say which, and the error under it, without the pool's traceback
        root = re.findall(r'(?m)^\w*(?:Error|Exception)\b.*$', str(e.__cause__ or ''))[:1]
        sys.exit(f'docs error: nbdev could not process a notebook (it runs the import, export and show_doc cells '
                 f'on their own, so keep imports in cells of their own):\n{e}\n{"".join(root)}')
    finally: progress.done.set(); progress.join()
    say('pages named as Quarto names them (output-file), exported source folded')
    readme_nb = nbformat.read(proc/cfg.readme_nb, as_version=4)  # before its links are renamed
    pages = rename_pages(proc)
    fold_exported(proc)
    say(f'smalldocs: rendering {len(pages)} pages')
    site = smalldocs_build(proc, quiet=True)
    for w in site.warnings:
        if not w.startswith(BENIGN): print(f'smalldocs warning: {w}')
    out = proc/cfg.doc_path.name  # nbdev.yml sets project.output-dir to doc_path
    shutil.rmtree(cfg.doc_path, ignore_errors=True)
    shutil.move(out, cfg.doc_path)
    say('offline: KaTeX, mermaid and the font into site_libs/, the pages rewritten (local assets, links, code lines)')
    offline.install_assets(cfg.doc_path)
    offline.rewrite_site(cfg.doc_path, cfg, pages)
    return proc, pages, readme_nb

LINK = re.compile(r'(\]\(\s*<?|\b(?:href|src)=["\'])([^)\s>"\']+)')  # a markdown link's or an HTML attribute's target

def is_relative(u): return not (u.startswith(('#', '/')) or re.match(r'^[a-z][a-z0-9+.-]*:', u, re.I))

def rebase_links(text, folder):
    """Markdown `text` written in `folder` (relative to the repository's root) with its relative links made relative to
    the root: a notebook links `tutorials/x.ipynb` beside it, which the site shows as `tutorials/x.html` and GitHub, from
    README.md, finds at `nbs/tutorials/x.ipynb`."""
    def fix(m):
        u = m.group(2)
        return m.group(1) + (posixpath.normpath(posixpath.join(folder, u)) if is_relative(u) and folder != '.' else u)
    return LINK.sub(fix, text)

def readme(nb, folder):
    """README.md (and its pictures in index_files/) from the processed readme notebook, as `nbdev_readme` makes it with
    Quarto, its markdown's relative links rebased from `folder` (the notebook's, relative to the root) to the root."""
    fm, cells = frontmatter(nb), []
    nb.metadata.setdefault('language_info', {'name': 'python'})
    for c in nb.cells[1 if fm else 0:]:
        if c.cell_type == 'code':
            o, c.source = cell_opts(c.source)
            if o.get('include') is False: continue
            if o.get('echo') is False: c.transient = {'remove_source': True}
            if o.get('output') is False: c.outputs = []
        elif c.cell_type == 'markdown': c.source = rebase_links(c.source, folder)
        cells.append(c)
    head = [f'# {fm["title"]}'] * ('title' in fm) + [f'> {fm["description"]}'] * ('description' in fm)
    nb.cells = [nbformat.v4.new_markdown_cell('\n\n'.join(head))] * bool(head) + cells
    body, res = MarkdownExporter().from_notebook_node(nb, resources={'output_files_dir': 'index_files'})
    body = re.sub(r'\n{3,}', '\n\n', '\n'.join(l.rstrip() for l in body.splitlines())).strip() + '\n'
    return {'README.md': body.encode(), **res['outputs']}

# ---- checks ----
def page_main(page):
    "The page's content: its `<main>`, without the navbar, sidebar and table of contents."
    s = page.read_text(encoding='utf-8')
    return re.search(r'(?s)<main\b.*</main>', s).group(0) if '<main' in s else s

def page_text(page):
    "The page's visible text (tags stripped) and its headings."
    s = re.sub(r'(?s)<(script|style)\b.*?</\1>', ' ', page_main(page))
    heads = {html.unescape(re.sub(r'<[^>]+>', '', h)).strip() for _, h in re.findall(r'(?s)<h([1-6])\b[^>]*>(.*?)</h\1>', s)}
    return html.unescape(re.sub(r'<[^>]+>', '', s)), heads

PLOT_ATTRS = {'imshow', 'matshow', 'plot', 'scatter', 'hist', 'bar', 'barh', 'pcolormesh'}
PLOT_NAMES = {'show_plot', 'show_image', 'show_images'}

def plot_calls(nb):
    "The plotting calls a notebook makes outside function bodies: `plt.*`, `.imshow(`/`.plot(`..., `plot_*`, `show_plot`, or its own functions that plot."
    trees = []
    for i, c in enumerate(nb['cells']):
        if c['cell_type'] != 'code': continue
        o, code = cell_opts(src(c))
        if o.get('eval') is False: continue
        code = '\n'.join('' if l.lstrip().startswith(('%', '!')) else l for l in code.split('\n'))
        try: trees.append((i, ast.parse(code)))
        except SyntaxError: pass
    own = set()
    def name(call):
        f = call.func
        if isinstance(f, ast.Attribute): return ('plt.' if isinstance(f.value, ast.Name) and f.value.id == 'plt' else '.') + f.attr
        return f.id if isinstance(f, ast.Name) else ''
    def plots(call):
        n = name(call); b = n.split('.')[-1]
        return n.startswith('plt.') or (n.startswith('.') and b in PLOT_ATTRS) or b.startswith('plot_') or b in PLOT_NAMES | own
    for _ in range(2):  # functions defined here that plot (and functions calling those) are plotting functions too
        for _, t in trees:
            for d in ast.walk(t):
                if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(isinstance(x, ast.Call) and plots(x) for x in ast.walk(d)):
                    own.add(d.name)
    def top_calls(node):  # calls not inside a def or class body
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)): continue
            if isinstance(ch, ast.Call): yield ch
            yield from top_calls(ch)
    return [(i, name(x).lstrip('.')) for i, t in trees for x in top_calls(t) if plots(x)]

def exported_names(mod_file):
    "Each name in the module's `__all__`, with the notebook its `# %%` marker names and whether it is a function or class."
    text = mod_file.read_text(encoding='utf-8'); tree = ast.parse(text)
    names = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  and any(getattr(t, 'id', '') == '__all__' for t in n.targets)), [])
    marks = [(i+1, m) for i, l in enumerate(text.splitlines()) if (m := re.match(r'# %% (\S+\.ipynb)', l))]
    where = {}
    for n in tree.body:
        nb = next((m.group(1) for ln, m in reversed(marks) if ln <= n.lineno), None)
        defs = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else [n]
        for d in defs:
            nm = getattr(d, 'name', None) or getattr(d, 'id', None)
            if nm: where[nm] = (nb, isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    return [(nm, *where.get(nm, (None, False))) for nm in names]

def check(cfg, proc, pages):
    "Check the site in doc_path against the notebooks: a list of problems, the number of pages and of images."
    errs, n_pages, n_imgs = [], 0, 0
    nbs, docs = cfg.nbs_path.resolve(), cfg.doc_path
    for p in nbglob(nbs, as_path=True):  # the notebooks proc_nbs gives pages (not _*, not in _*/ or .*/)
        rel = p.relative_to(nbs); nb = read_nb(p)
        page = docs/pages[rel].with_suffix('.html') if rel in pages else None
        if not (page and page.exists()): errs.append(f'nbs/{rel}: no page for it in {docs.name}/'); continue
        n_pages += 1
        s = page_main(page)
        on_page = len(re.findall(r'<img\b', s)) + len(re.findall(r'<svg\b', s))
        want = n_images(read_nb(proc/pages[rel]), shown_only=True)  # hidden cells are gone from it, as from the page
        n_imgs += on_page
        if on_page < want: errs.append(f'nbs/{rel}: {want} saved image output(s) but {on_page} image(s) on {page.name}')
        for i, w in wide_figures(nb):
            errs.append(f'nbs/{rel}: the figure of cell {i} is {w:.1f} in wide: shrunk to the page\'s column its text is too '
                        f'small to read; lay its panels out in rows (plt.subplots(2, 2)) or make it at most {MAX_FIGURE_INCHES} in wide, '
                        'with larger fonts where it needs them')
        calls = plot_calls(nb)
        if calls and not n_images(nb):
            i, f = calls[0]
            errs.append(f'nbs/{rel}: calls {f}() (cell {i}) but holds no saved image output: '
                        'run it top to bottom and save it with its outputs')
    for mod in sorted(cfg.lib_path.rglob('*.py')):
        for nm, src_nb, is_def in exported_names(mod):
            nbp = (mod.parent/src_nb).resolve() if src_nb else None
            if not (nbp and nbp.is_relative_to(nbs) and nbp.relative_to(nbs) in pages): continue  # no page: reported above
            page = docs/pages[nbp.relative_to(nbs)].with_suffix('.html')
            if not page.exists(): continue
            text, heads = page_text(page)
            where = f'{mod.relative_to(cfg.config_path)}: {nm} (exported by nbs/{nbp.relative_to(nbs)})'
            if is_def and not (nm in heads and re.search(rf'\b{re.escape(nm)}\s*\(', text)):
                errs.append(f'{where} has no show_doc heading and signature on {page.name}: do not hide its cell, or add show_doc({nm})')
            elif not re.search(rf'\b{re.escape(nm)}\b', text):
                errs.append(f'{where} is not mentioned on {page.name}: say what it is in a markdown cell')
    return errs, n_pages, n_imgs

README_TIMEOUT = 120  # seconds a README python block may take (the library snippet takes about 3)

def readme_links(root, text):
    "The relative links of README.md `text` that name no file of the repository at `root` (as GitHub resolves them)."
    bad = []
    for m in LINK.finditer(re.sub(r'(?ms)^```.*?^```', '', text)):  # not in code blocks
        u = m.group(2)
        if not is_relative(u): continue
        path = unquote(urlsplit(u).path)
        if path and not (root/path).exists(): bad.append(u)
    return bad

def readme_blocks(text):
    "Each ```python block of README.md `text`, and the output shown under it (the indented blocks that follow)."
    return [(m.group(1), textwrap.dedent(re.sub(r'(?m)^    ', '', m.group(2))).strip())
            for m in re.finditer(r'(?ms)^```python\n(.*?)^```\n((?:\n|    [^\n]*\n)*)', text)]

def run_readme(root, text, timeout=README_TIMEOUT):
    "The problems of README.md's python blocks: each run alone, as a reader would paste it, in an empty folder."
    errs, env = [], {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [str(root), os.environ.get('PYTHONPATH')]))}
    for i, (code, shown) in enumerate(readme_blocks(text), 1):
        where = f'README.md python block {i} (from {get_config().readme_nb})'
        t0 = time.time()
        with tempfile.TemporaryDirectory() as d:
            try: r = subprocess.run([sys.executable, '-c', code], cwd=d, env=env, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired: errs.append(f'{where} ran past {timeout}s: keep it tiny\n{textwrap.indent(code, "    ")}'); continue
        if r.returncode:
            errs.append(f'{where} fails when run as shown, alone in a fresh Python: make it complete (its imports '
                        f'included)\n{textwrap.indent(code, "    ")}\n  {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}')
        elif shown and r.stdout.split() != shown.split():   # the same words: blank lines between outputs aside
            errs.append(f'{where} prints other output than the README shows under it: run {get_config().readme_nb} and '
                        f'save it\n  shown:   {shown[:300]!r}\n  printed: {r.stdout.strip()[:300]!r}')
        else: say(f'  README python block {i} runs as shown ({time.time() - t0:.1f}s)')
    return errs

MAX_FIGURE_INCHES = 12  # at the site's column (~630 px in a 1280-px window) a wider figure's 10-pt text is under ~7 px

def png_inches(data):
    "The width in inches of a PNG that records its resolution (matplotlib's do, in a pHYs chunk), else None."
    i = 8
    while i + 8 <= len(data):
        n, kind = struct.unpack('>I', data[i:i+4])[0], data[i+4:i+8]
        if kind == b'pHYs':
            x, _, unit = struct.unpack('>IIB', data[i+8:i+17])
            return struct.unpack('>I', data[16:20])[0] / (x * 0.0254) if unit == 1 and x else None
        if kind in (b'IDAT', b'IEND'): return None
        i += 12 + n

def wide_figures(nb):
    "The (cell index, inches) of each saved PNG wider than MAX_FIGURE_INCHES."
    out = []
    for i, c in enumerate(nb['cells']):
        for o in c.get('outputs', []) if c['cell_type'] == 'code' else []:
            png = o.get('data', {}).get('image/png')
            w = png_inches(base64.b64decode(png if isinstance(png, str) else ''.join(png))) if png else None
            if w and w > MAX_FIGURE_INCHES: out.append((i, w))
    return out

DOLLARS = ("a `$...$` is maths only when the opening `$` has a non-space on its right and the closing `$` a non-space "
           "on its left, with no digit right after it (Pandoc's rule, which Quarto follows): fix the notebook's markdown")

# A line of code that the browser wrapped inside a run of non-space characters (a flag, a number, a path): two
# neighbouring characters of a block, neither a space, on two rendered lines. Folded code is unfolded first.
WRAP_JS = r"""(() => {
  document.querySelectorAll('main details').forEach((d) => { d.open = true; });
  const out = [], r = document.createRange();
  const box = (n, i) => { r.setStart(n, i); r.setEnd(n, i + 1); const b = r.getClientRects(); return b.length && b[0].height ? b[0] : null; };
  for (const pre of document.querySelectorAll('main pre:not(.mermaid)')) {
    const all = pre.textContent, walk = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let prev = null, at = 0, node;                                // prev: the last character seen on the page, and its box
    const look = (n, i) => {
      const c = n.data[i], b = box(n, i), space = /\s/.test(c);
      if (!b) { if (space) prev = null; return; }                 // a newline with no box: the next line starts afresh
      if (prev && !space && !prev.space && b.top >= prev.b.bottom - 1) {
        const k = at + i, s = all.slice(0, k).search(/\S+$/), e = k + all.slice(k).search(/\s|$/);
        out.push(`code wrapped inside a token: "${all.slice(s, k)}⏎${all.slice(k, e)}"`.slice(0, 120) + ` (in: ${all.slice(0, 40).trim()}...)`);
      }
      prev = {b, space};
    };
    while ((node = walk.nextNode())) {
      const n = node.data.length;
      r.selectNodeContents(node);
      const lines = n ? r.getClientRects().length : 0;            // a text node on one line breaks, if at all, before it
      for (let i = 0; i < n; i++) if (lines > 1 || i === 0 || i === n - 1) look(node, i);
      at += n;
    }
  }
  return out;
})()"""

class Browser(browser.Browser):
    "`browser.Browser` that also looks for code wrapped inside a token (WRAP_JS) on each page, and says each page it checked."
    n, total = 0, 0
    def eval(self, session, js):
        res = super().eval(session, js)
        if js == browser.PROBLEMS_JS:   # check_pages has loaded a page and looks at it
            res['problems'] += super().eval(session, WRAP_JS)
            page = super().eval(session, 'decodeURIComponent(location.pathname)')
            self.n += 1; say(f'  checked {self.n:2d}/{self.total} {page.rsplit("/_docs/", 1)[-1]}')
        return res

def check_in_browser(cfg, pages):
    "Every page of the site in headless Chromium (.ci/browser.py): the problems, and a line that sums it up."
    docs, t0 = cfg.doc_path, time.time()
    source = {Path(pg).with_suffix('.html').as_posix(): f'nbs/{nb}' for nb, pg in pages.items()}
    files = sorted(f.relative_to(docs).as_posix() for f in docs.rglob('*.html'))
    say(f'Chromium: {len(files)} pages from file://, the network cut off')
    try:
        with Browser() as b:
            b.total = len(files)
            res = browser.check_pages(docs, files, browser=b)
    except (RuntimeError, TimeoutError) as e: return [f'the browser check could not run: {e}'], 'no browser check'
    errs = [f'{p}{f" ({source[p]})" if p in source else ""}: {e}{f"; {DOLLARS}" if e.startswith("raw maths") and "$" in e else ""}'
            for p, r in res.items() for e in r['problems']]
    tot = {k: sum(r[k] for r in res.values()) for k in ('formulas', 'typeset', 'diagrams', 'drawn')}
    slowest = max(res.items(), key=lambda kv: kv[1]['seconds'], default=(None, {'seconds': 0}))
    return errs, (f"{len(res)} pages in Chromium: {tot['typeset']}/{tot['formulas']} formulas typeset, "
                  f"{tot['drawn']}/{tot['diagrams']} diagrams drawn ({time.time()-t0:.0f}s, slowest {slowest[0]} "
                  f"{slowest[1]['seconds']:.1f}s)")

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--check-readme', action='store_true', help='fail when README.md is not what index.ipynb makes')
    ap.add_argument('--no-browser', action='store_true', help='skip the checks in headless Chromium')
    ap.add_argument('--n_workers', type=int, default=2, help='processes that process notebooks')
    args = ap.parse_args()
    cfg = get_config()
    proc, pages, readme_nb = build_site(cfg, args.n_workers)
    say('checks: pages, images and API docs against the notebooks; assets and links of the site')
    errs, n_pages, n_imgs = check(cfg, proc, pages)
    errs += offline.check_site(cfg.doc_path, cfg)
    t_build, seen = time.time() - T0, 'browser check skipped (--no-browser)'
    if not args.no_browser:
        b_errs, seen = check_in_browser(cfg, pages); errs += b_errs
    say(f'README.md from {cfg.readme_nb}: its links, its python blocks')
    stale, folder = [], (cfg.nbs_path/cfg.readme_nb).parent.relative_to(cfg.config_path).as_posix()
    for name, data in readme(readme_nb, folder).items():
        f = cfg.config_path/name
        if not f.exists() or f.read_bytes() != data: stale.append(name)
        f.parent.mkdir(parents=True, exist_ok=True); f.write_bytes(data)
    text = (cfg.config_path/'README.md').read_text(encoding='utf-8')
    errs += [f'README.md links to {u}, which is not a file of the repository (links in {cfg.readme_nb} are relative to '
             f'{folder}/, where it is)' for u in readme_links(cfg.config_path, text)]
    errs += run_readme(cfg.config_path, text)
    if args.check_readme and stale:
        errs.append(f'{", ".join(stale)} differed from what {cfg.readme_nb} makes (now rewritten): '
                    'run `python .ci/docs.py` and commit the result')
    for e in errs: print(f'docs error: {e}', file=sys.stderr)
    print(f'docs: {n_pages} pages, {n_imgs} images, README {"stale" if stale else "up to date"}; {seen} '
          f'({time.time()-T0:.0f}s, the build {t_build:.0f}s)')
    if errs: sys.exit(f'docs: {len(errs)} problem(s), listed above')

if __name__ == '__main__': main()
