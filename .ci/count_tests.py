"""Run the notebook tests exactly as `nbdev_test` does, and count the test cells.

Same notebooks (nbglob over nbs_path with nbdev_test's defaults: no `_*`/`.*` files or folders, none beside a
`.notest`), same skip flags (settings.ini `tst_flags` less `--flags`), same `nbdev.test.test_nb` in fastcore.parallel
workers: its execnb shell, its `#| eval: false` and `nbdev_export(` skipping, stopping at a notebook's first error.
The only addition is a look at the cells it runs (`CaptureShell.run_all`'s `preproc`, wrapped), to count them.

A test cell is a code cell that, outside function and class bodies, calls a `fastcore.test` check (`test_eq`,
`test_close`, `test_fail`, `test_ne`, `test_is`, ..., or `with ExceptionExpected`), calls an `assert_*` function
(`torch.testing.assert_close`, `np.testing.assert_allclose`), has an `assert` statement, or calls a function defined in
the notebook that does one of these. A cell skipped by a flag or `eval: false` is not run, so not counted.
A notebook that fails stops at its failing cell: that cell counts as failed (a test cell or not), the test cells
before it as passed, and the line says how many of its test cells did not run.
It prints each notebook's line as it finishes (passed/FAILED, seconds, notebook, test cells) and, as its last line,
`N passed, N failed` (test cells). Exits 1 when any notebook fails.
Usage: python .ci/count_tests.py [--path nbs/10_mask.ipynb] [--flags "dist"] [--n_workers 2]"""
import argparse, ast, inspect, re, sys, time
from pathlib import Path
import fastcore.test
from fastcore.xtras import working_directory
from fastcore.parallel import num_cpus, parallel
from execnb.shell import CaptureShell
from nbdev.config import get_config
from nbdev.doclinks import nbglob, nbglob_cli
from nbdev.frontmatter import FrontmatterProc
from nbdev.process import NBProcessor
from nbdev.test import _keep_file, test_nb

CHECKS = {n for n in fastcore.test.__all__ if n.startswith('test')} | {'ExceptionExpected'}

def _code(cell):
    "The cell's Python, its `%magic` and `!shell` lines blanked: an AST, or None."
    src = ''.join(cell.source) if isinstance(cell.source, list) else cell.source
    try: return ast.parse('\n'.join('' if l.lstrip().startswith(('%', '!')) else l for l in src.split('\n')))
    except SyntaxError: return None

def _called(node):
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ''

def _top(node):
    "The nodes of a cell outside function, lambda and class bodies."
    for ch in ast.iter_child_nodes(node):
        if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)): continue
        yield ch; yield from _top(ch)

def test_cells(cells):
    "The indices of the test cells among `cells` (see the module's doc)."
    trees = [(i, _code(c)) for i, c in enumerate(cells) if c.cell_type == 'code']
    trees = [(i, t) for i, t in trees if t is not None]
    checks = lambda nodes, own: any(isinstance(n, ast.Assert) or (isinstance(n, ast.Call) and (
        (name := _called(n)) in CHECKS or name.startswith('assert_') or name in own)) for n in nodes)
    own = set()
    for _ in range(3):  # functions that check, and functions calling those
        own |= {d.name for _, t in trees for d in ast.walk(t)
                if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and checks(ast.walk(d), own)}
    return [i for i, t in trees if checks(_top(t), own)]

# nbdev's test_nb, unchanged, runs the notebook; the shell's run_all is wrapped to note which cells it runs
RAN = []  # (index, cell) of each cell run in this process's current notebook, in order

def _note_cells_run():
    "Wrap `CaptureShell.run_all` (once per process) so that the cells its `preproc` lets run go into `RAN`."
    run_all = CaptureShell.run_all
    if getattr(run_all, 'notes_cells', False): return
    def noting_run_all(self, nb, *args, preproc=None, **kwargs):
        index = {id(c): i for i, c in enumerate(nb.cells)}
        def pre(cell):
            skip = preproc(cell) if preproc else False
            if not skip: RAN.append((index[id(cell)], cell))
            return skip
        return run_all(self, nb, *args, preproc=pre, **kwargs)
    noting_run_all.notes_cells = True
    CaptureShell.run_all = noting_run_all

def run_one(fn, skip_flags=(), force_flags=(), **kwargs):
    "`test_nb` on one notebook, then its line (printed in the worker, so it shows as soon as it is done): (passed, failed)."
    _note_cells_run(); RAN.clear(); name = fn.relative_to(get_config().nbs_path)
    try: ok, secs = test_nb(fn, skip_flags=skip_flags, force_flags=force_flags, **kwargs)
    except Exception as e: ok, secs = False, 0.; print(f'{name}: {e!r}', file=sys.stderr, flush=True)
    cells = [c for _, c in RAN]
    tests = set(test_cells(cells))  # positions among the cells run (a skipped cell is not run)
    if ok:
        print(f"passed  {secs:6.1f}s  {name}  ({len(tests)} test cells)", flush=True)
        return len(tests), 0
    if not RAN:
        print(f"FAILED  {secs:6.1f}s  {name}  (before running a cell)", flush=True)
        return 0, 1
    # test_nb stops at the first error: the last cell run is the failing one; count the test cells after it that
    # would have run (not skipped as test_nb skips: a flag, `eval: false`, `nbdev_export(`)
    fail, last = RAN[-1]
    flags = set(skip_flags) - set(force_flags)
    rest = [c for c in NBProcessor(fn, procs=FrontmatterProc, process=True).nb.cells[fail+1:] if c.cell_type == 'code'
            and 'nbdev_export(' not in c.source and not flags & (c.get('directives_') or {}).keys()
            and (c.get('directives_') or {}).get('eval:', [''])[0].lower() != 'false']
    n_left = len(test_cells(rest))
    at = f"cell #{last.get('idx_', fail) + 1}" + (f" (id {last['id']})" if last.get('id') else '')  # numbered as nbdev's error says
    print(f"FAILED  {secs:6.1f}s  {name}  ({len(tests - {len(cells) - 1})} test cells passed, 1 failed: {at}, "
          f"{'a test cell' if len(cells) - 1 in tests else 'not a test cell'}; {n_left} test cells not run)", flush=True)
    return len(tests - {len(cells) - 1}), 1

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--path', default=None, help='a notebook or glob to test, as nbdev_test takes it (default: all)')
    ap.add_argument('--flags', default='', help='space-separated test flags to run that are normally skipped')
    ap.add_argument('--n_workers', type=int, default=None, help="processes (nbdev_test's default when not given)")
    args = ap.parse_args()
    cfg = get_config()
    # nbdev_test's file selection: its CLI passes nbglob_cli's defaults to nbglob
    glob_kw = {k: p.default for k, p in inspect.signature(nbglob_cli).parameters.items() if k != 'path'}
    files = [f.absolute() for f in sorted(nbglob(args.path, as_path=True, **glob_kw)) if _keep_file(f, '.notest')]
    n_workers = args.n_workers if args.n_workers is not None else (0 if len(files) == 1 else min(num_cpus(), 8))
    skip, force = cfg.tst_flags.split(), args.flags.split()
    print(f'testing {len(files)} notebooks with {n_workers} workers, running flags {force or "none"}, '
          f'skipping {sorted(set(skip) - set(force)) or "none"}', flush=True)
    t0, results = time.time(), []
    if files:
        with working_directory(cfg.nbs_path):
            results = parallel(run_one, files, skip_flags=skip, force_flags=force, n_workers=n_workers,
                               basepath=cfg.config_path, pause=0.01)
    failed = [f for (_, bad), f in zip(results, files) if bad]
    if failed: print('failed notebooks:\n  ' + '\n  '.join(str(f.relative_to(cfg.nbs_path)) for f in failed), flush=True)
    print(f'tests took {time.time()-t0:.0f}s: {len(files)} notebooks, {len(files)-len(failed)} passed')
    print(f'{sum(p for p, _ in results)} passed, {sum(f for _, f in results)} failed', flush=True)
    sys.exit(1 if failed else 0)

if __name__ == '__main__':  # the IPython shell test_nb starts in a worker replaces __main__, so import run_one by module name
    sys.path.insert(0, str(Path(__file__).parent))
    import count_tests; count_tests.main()
