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
import hashlib
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import nbformat

DEFAULT_CACHE = "_build/.jupyter_cache"  # jupyter-book's cache for a book at the project root
DEFAULT_TIMEOUT = 1200  # seconds per cell, as _config.yml's execute.timeout
STAGE_KEY = "fgclip_staged"  # notebook metadata of a staged execution: {"inputs": fingerprint, "seconds", "by"}
# what the Makefile's freshness check leaves out of its inputs (BOOK_INPUTS): bytecode and build records
_NOT_INPUTS = ("__pycache__", ".egg-info")


def inputs_fingerprint(inputs: Sequence[str | Path], root: str | Path = ".") -> str:
    """sha256 over every file under ``inputs`` (folders walked, paths relative to ``root``,
    sorted), each as its path and its bytes; bytecode and egg-info left out. A missing input
    is an error naming it (a fingerprint of nothing would match anything)."""
    root = Path(root)
    files = []
    for name in inputs:
        path = root / name
        if not path.exists():
            raise FileNotFoundError(f"inputs_fingerprint: no such input {path}")
        files += [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    digest = hashlib.sha256()
    for f in sorted(set(files)):
        rel = f.relative_to(root)
        if f.suffix == ".pyc" or any(part.endswith(_NOT_INPUTS) for part in rel.parts):
            continue
        digest.update(rel.as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


def code_cells(notebook: nbformat.NotebookNode) -> list[tuple[str, dict]]:
    """(source, metadata) of every code cell: what jupyter-cache hashes besides the kernelspec."""
    return [(c.source, dict(c.metadata)) for c in notebook.cells if c.cell_type == "code"]


def staged_copy(path: Path, stage: str | Path, fingerprint: str) -> nbformat.NotebookNode | None:
    """The executed copy of ``path`` staged in ``stage`` (same file name) when it holds the
    notebook's code cells and kernelspec and was executed with inputs of this ``fingerprint``;
    None otherwise (the chapter is then executed afresh)."""
    staged = Path(stage) / path.name
    if not staged.is_file():
        return None
    copy, source = read_notebook(staged), read_notebook(path)
    meta = copy.metadata.get(STAGE_KEY, {})
    same = (meta.get("inputs") == fingerprint and code_cells(copy) == code_cells(source)
            and copy.metadata.get("kernelspec") == source.metadata.get("kernelspec"))
    return copy if same else None


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
               timeout: int = DEFAULT_TIMEOUT, log=_log, adopt: str | Path | None = None,
               inputs: Sequence[str | Path] = ()) -> dict[str, float]:
    """Execute every notebook the cache lacks, ``jobs`` at a time in the order given, and
    store each in the cache as myst-nb does; returns {notebook: seconds} of those run (or, for
    a notebook adopted from ``adopt``, of its staged execution). ``adopt``: a folder of staged
    executions (:func:`staged_copy`, checked against :func:`inputs_fingerprint` of ``inputs``).
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

    def store(path: Path, notebook: nbformat.NotebookNode, took: float) -> None:
        record = cache.add_nb_to_project(str(path.resolve()))
        cache.cache_notebook_bundle(CacheBundleIn(notebook, record.uri, data={"execution_seconds": took}),
                                    check_validity=False, overwrite=True)
        seconds[str(path)] = took

    if adopt is not None and todo:
        fingerprint = inputs_fingerprint(inputs)
        for path in list(todo):
            copy = staged_copy(path, adopt, fingerprint)
            if copy is None:
                log(f"book_cache: no staged execution of {path} with this code and these inputs in {adopt}")
                continue
            store(path, copy, float(copy.metadata[STAGE_KEY].get("seconds", 0.0)))
            todo.remove(path)
            log(f"book_cache: {path} adopted from {adopt} ({copy.metadata[STAGE_KEY].get('by', '?')}'s execution)")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        running = [pool.submit(execute_one, path, timeout) for path in todo]
        for done in as_completed(running):
            path, notebook, took, error = done.result()
            if error is not None:
                log(f"book_cache: {path} FAILED after {took:.0f} s\n{error}")
                failures.append(path)
                continue
            store(path, notebook, took)
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
    p.add_argument("--adopt", default=None, help="a folder of staged executions (fgclip.nbval_stage) to adopt "
                   "where code and inputs match, instead of executing those chapters again")
    p.add_argument("--inputs", nargs="*", default=[], help="the files and folders besides the code that change "
                   "results (the Makefile's BOOK_INPUTS); needed with --adopt")
    a = p.parse_args(argv)
    if a.adopt is not None and not a.inputs:
        print("error: --adopt needs --inputs (the files a staged execution must have run with)", file=sys.stderr)
        return 2
    missing = [str(n) for n in a.notebooks if not n.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(missing)}", file=sys.stderr)
        return 2
    start = time.time()
    try:
        fill_cache(a.notebooks, a.cache, a.jobs, a.timeout, adopt=a.adopt, inputs=a.inputs)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"book_cache: {len(a.notebooks)} chapters ready in {time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
