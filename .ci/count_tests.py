"""Run the notebook tests exactly as `nbdev_test` does, and count them.

Same notebooks (nbglob over nbs_path with nbdev_test's defaults: no `_*`/`.*` files or folders, none beside a
`.notest`), same skip flags (settings.ini `tst_flags` less `--flags`), same `nbdev.test.test_nb` in
fastcore.parallel workers. Unlike `nbdev_test` it prints each notebook's result and time as it finishes and,
as its last line, `N passed, N failed` (notebooks). Exits 1 when any notebook fails.
Usage: python .ci/count_tests.py [--flags "dist"] [--n_workers 2]"""
import argparse, inspect, sys, time
from pathlib import Path
from fastcore.xtras import working_directory
from fastcore.parallel import num_cpus, parallel
from nbdev.config import get_config
from nbdev.doclinks import nbglob, nbglob_cli
from nbdev.test import _keep_file, test_nb

def run_one(fn, **kwargs):
    "`test_nb`, then one line saying how it went (printed in the worker, so it shows as soon as it is done)."
    try: ok, secs = test_nb(fn, **kwargs)
    except Exception as e: ok, secs = False, 0.; print(f'{fn.name}: {e!r}', file=sys.stderr, flush=True)
    print(f"{'passed' if ok else 'FAILED'}  {secs:6.1f}s  {fn.relative_to(get_config().nbs_path)}", flush=True)
    return ok, secs

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--flags', default='', help='space-separated test flags to run that are normally skipped')
    ap.add_argument('--n_workers', type=int, default=None, help="processes (nbdev_test's default when not given)")
    args = ap.parse_args()
    cfg = get_config()
    # nbdev_test's file selection: its CLI passes nbglob_cli's defaults to nbglob
    glob_kw = {k: p.default for k, p in inspect.signature(nbglob_cli).parameters.items() if k != 'path'}
    files = [f.absolute() for f in sorted(nbglob(None, as_path=True, **glob_kw)) if _keep_file(f, '.notest')]
    n_workers = args.n_workers if args.n_workers is not None else (0 if len(files) == 1 else min(num_cpus(), 8))
    skip, force = cfg.tst_flags.split(), args.flags.split()
    print(f'testing {len(files)} notebooks with {n_workers} workers, running flags {force or "none"}, '
          f'skipping {sorted(set(skip) - set(force)) or "none"}', flush=True)
    t0, results = time.time(), []
    if files:
        with working_directory(cfg.nbs_path):
            results = parallel(run_one, files, skip_flags=skip, force_flags=force, n_workers=n_workers,
                               basepath=cfg.config_path, pause=0.01)
    failed = [f for (ok, _), f in zip(results, files) if not ok]
    if failed: print('failed:\n  ' + '\n  '.join(str(f.relative_to(cfg.nbs_path)) for f in failed), flush=True)
    print(f'tests took {time.time()-t0:.0f}s')
    print(f'{len(files)-len(failed)} passed, {len(failed)} failed', flush=True)
    sys.exit(1 if failed else 0)

if __name__ == '__main__':  # the IPython shell test_nb starts in a worker replaces __main__, so import run_one by module name
    sys.path.insert(0, str(Path(__file__).parent))
    import count_tests; count_tests.main()
