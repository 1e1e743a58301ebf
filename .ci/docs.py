"""Build the docs site offline into `_docs/` and `README.md` from `nbs/index.ipynb`, then check both.

`nbdev_docs` needs Quarto, which CI cannot install, so this runs nbdev's own steps (`refresh_quarto_yml`,
`_build_modidx`, `nbdev_sidebar`, `proc_nbs` -> `_proc/`) and renders `_proc/` with smalldocs, which reads
`_proc/_quarto.yml` and shows the outputs saved in the notebooks (it runs no code). The source nbdev shows for
`#| exports` cells is folded. Then .ci/offline.py makes the site work with no network and from any folder: KaTeX,
mermaid and the theme's font bundled (npm packages pinned in .ci/package.json), links to the project's own pages
relative, notebook names in inline code linked to their pages, long code lines wrapped under their indent, search that
works from `file://`.
The checks, each failing with a message that says what to do:
  - every notebook has its page, named as Quarto names it (`output-file`: 00_config.ipynb -> config.html);
  - every image saved in a notebook is on its page;
  - a notebook that calls a plotting function holds at least one saved image (it was committed without running);
  - every name in a module's `__all__` is on the page of the notebook that exports it, functions and classes with
    a `show_doc` heading and signature;
  - no page loads anything from outside the site, and no link leaves it except to the projects in
    .ci/offline.py ALLOWED_LINKS; links inside the site reach a file and anchor that exist (.ci/offline.py);
  - in headless Chromium (.ci/browser.py), every page from `file://` with the network cut off: every formula typeset
    by KaTeX (no raw `$`, `\\(`, `\\[` left in the text), every mermaid diagram an SVG, no code block cut off, no request
    leaving the site, no JavaScript error, and the search box finds pages (`--no-browser` skips this where there is
    no Chromium);
  - with `--check-readme`, the regenerated README.md is the committed one.
Usage: python .ci/docs.py [--check-readme] [--no-browser] [--n_workers 2]"""
import argparse, ast, html, json, re, shutil, sys, time
from pathlib import Path

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

def build_site(cfg, n_workers):
    "nbdev's `_pre_docs` without `_ensure_quarto`, then smalldocs instead of `quarto render`."
    refresh_quarto_yml()
    _build_modidx()
    nbdev_sidebar.__wrapped__(path=cfg.nbs_path)
    shutil.rmtree(cfg.config_path/'_proc', ignore_errors=True)
    try: proc = proc_nbs(cfg.nbs_path, n_workers=n_workers, force=True)
    except Exception as e:  # a cell failed in a worker: say which, and the error under it, without the pool's traceback
        root = re.findall(r'(?m)^\w*(?:Error|Exception)\b.*$', str(e.__cause__ or ''))[:1]
        sys.exit(f'docs error: nbdev could not process a notebook (it runs the import, export and show_doc cells '
                 f'on their own, so keep imports in cells of their own):\n{e}\n{"".join(root)}')
    readme_nb = nbformat.read(proc/cfg.readme_nb, as_version=4)  # before its links are renamed
    pages = rename_pages(proc)
    fold_exported(proc)
    site = smalldocs_build(proc, quiet=True)
    for w in site.warnings:
        if not w.startswith(BENIGN): print(f'smalldocs warning: {w}')
    out = proc/cfg.doc_path.name  # nbdev.yml sets project.output-dir to doc_path
    shutil.rmtree(cfg.doc_path, ignore_errors=True)
    shutil.move(out, cfg.doc_path)
    offline.install_assets(cfg.doc_path)
    offline.rewrite_site(cfg.doc_path, cfg, pages)
    return proc, pages, readme_nb

def readme(nb):
    "README.md (and its pictures in index_files/) from the processed readme notebook, as `nbdev_readme` makes it with Quarto."
    fm, cells = frontmatter(nb), []
    nb.metadata.setdefault('language_info', {'name': 'python'})
    for c in nb.cells[1 if fm else 0:]:
        if c.cell_type == 'code':
            o, c.source = cell_opts(c.source)
            if o.get('include') is False: continue
            if o.get('echo') is False: c.transient = {'remove_source': True}
            if o.get('output') is False: c.outputs = []
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

DOLLARS = ("a `$...$` is maths only when the opening `$` has a non-space on its right and the closing `$` a non-space "
           "on its left, with no digit right after it (Pandoc's rule, which Quarto follows): fix the notebook's markdown")

def check_in_browser(cfg, pages):
    "Every page of the site in headless Chromium (.ci/browser.py): the problems, and a line that sums it up."
    docs, t0 = cfg.doc_path, time.time()
    source = {Path(pg).with_suffix('.html').as_posix(): f'nbs/{nb}' for nb, pg in pages.items()}
    try: res = browser.check_pages(docs, sorted(f.relative_to(docs).as_posix() for f in docs.rglob('*.html')))
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
    cfg, t0 = get_config(), time.time()
    proc, pages, readme_nb = build_site(cfg, args.n_workers)
    errs, n_pages, n_imgs = check(cfg, proc, pages)
    errs += offline.check_site(cfg.doc_path, cfg)
    t_build, seen = time.time() - t0, 'browser check skipped (--no-browser)'
    if not args.no_browser:
        b_errs, seen = check_in_browser(cfg, pages); errs += b_errs
    stale = []
    for name, data in readme(readme_nb).items():
        f = cfg.config_path/name
        if not f.exists() or f.read_bytes() != data: stale.append(name)
        f.parent.mkdir(parents=True, exist_ok=True); f.write_bytes(data)
    if args.check_readme and stale:
        errs.append(f'{", ".join(stale)} differed from what {cfg.readme_nb} makes (now rewritten): '
                    'run `python .ci/docs.py` and commit the result')
    for e in errs: print(f'docs error: {e}', file=sys.stderr)
    print(f'docs: {n_pages} pages, {n_imgs} images, README {"stale" if stale else "up to date"}; {seen} '
          f'({time.time()-t0:.0f}s, the build {t_build:.0f}s)')
    if errs: sys.exit(f'docs: {len(errs)} problem(s), listed above')

if __name__ == '__main__': main()
