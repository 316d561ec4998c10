"""Execute the book's chapters side by side into jupyter-book's execution cache.

``jupyter-book build`` (myst-nb with ``execute_notebooks: cache``) runs each notebook one
after the other, and on the 2-core build machine a chapter with two torch threads gains
little over one (small ops, little to share). ``make book`` therefore runs this module
first: ``jobs`` chapters at once, one kernel each (the Makefile gives every kernel one
thread), each executed exactly as myst-nb would (same notebook, same working folder, same
timeout) and stored in the same jupyter-cache under the same hash, so that the build that
follows finds every chapter cached and only renders. A chapter already in the cache is not
run again; a chapter that fails stops the build with its traceback, naming the notebook.

Why not jupyter-cache's own ``local-parallel`` executor: it executes every notebook of the
cache's project, in any order, with no way to put the longest chapters first, and writes
the cache from several processes at once. Here the workers only execute; the parent
process alone writes the cache.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat

DEFAULT_CACHE = "_build/.jupyter_cache"  # jupyter-book's cache for a book at the project root
DEFAULT_TIMEOUT = 1200  # seconds per cell, as _config.yml's execute.timeout


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook as myst-nb reads an .ipynb source (nbformat 4)."""
    return nbformat.read(str(path), as_version=4)


def pending_notebooks(cache_path: str | Path, notebooks: list[Path]) -> list[Path]:
    """The notebooks whose code has no executed copy in the cache yet."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    pending = []
    for path in notebooks:
        try:
            cache.match_cache_notebook(read_notebook(path))
        except KeyError:
            pending.append(path)
    return pending


def execute_one(path: Path, timeout: int) -> tuple[Path, nbformat.NotebookNode, float, str | None]:
    """Execute one notebook in its own folder (myst-nb's working folder when not in a
    temporary one); returns (path, executed notebook, seconds, traceback or None)."""
    from jupyter_cache.executors.utils import single_nb_execution

    notebook = read_notebook(path)
    result = single_nb_execution(notebook, cwd=str(path.parent.resolve()), timeout=timeout,
                                 allow_errors=False, meta_override=True)
    return path, notebook, result.time, (result.exc_string if result.err is not None else None)


def _log(line: str) -> None:
    print(line, flush=True)  # at once, also when make's output goes to a file


def fill_cache(notebooks: list[Path], cache_path: str | Path = DEFAULT_CACHE, jobs: int = 2,
               timeout: int = DEFAULT_TIMEOUT, log=_log) -> dict[str, float]:
    """Execute every notebook the cache lacks, ``jobs`` at a time in the order given, and
    store each in the cache as myst-nb does; returns {notebook: seconds} of those run.
    Raises RuntimeError naming the first notebook that failed (after the others finish)."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    cache = get_cache(str(cache_path))
    todo = pending_notebooks(cache_path, notebooks)
    for path in notebooks:
        if path not in todo:
            log(f"book_cache: {path} is cached already")
    seconds, failures = {}, []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        running = [pool.submit(execute_one, path, timeout) for path in todo]
        for done in as_completed(running):
            path, notebook, took, error = done.result()
            if error is not None:
                log(f"book_cache: {path} FAILED after {took:.0f} s\n{error}")
                failures.append(path)
                continue
            record = cache.add_nb_to_project(str(path.resolve()))
            cache.cache_notebook_bundle(CacheBundleIn(notebook, record.uri, data={"execution_seconds": took}),
                                        check_validity=False, overwrite=True)
            seconds[str(path)] = took
            log(f"book_cache: {path} executed in {took:.0f} s")
    if failures:
        raise RuntimeError(f"book_cache: executing {', '.join(map(str, failures))} failed (traceback above)")
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fgclip.book_cache", description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="+", type=Path, help="the .ipynb files, the longest first")
    p.add_argument("--cache", default=DEFAULT_CACHE)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT)
    a = p.parse_args(argv)
    missing = [str(n) for n in a.notebooks if not n.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    start = time.time()
    try:
        fill_cache(a.notebooks, a.cache, a.jobs, a.timeout)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"book_cache: {len(a.notebooks)} chapters ready in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
