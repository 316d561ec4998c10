"""fgclip.book_cache: chapters executed side by side land in jupyter-book's cache under the
hash myst-nb looks up, so the build that follows executes nothing; a failing notebook is named."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

from fgclip import book_cache


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))
    return path


def test_executed_notebooks_match_as_myst_nb_reads_them(tmp_path):
    a = _notebook(tmp_path / "a.ipynb", "import os\nprint(os.getcwd())")
    b = _notebook(tmp_path / "b.ipynb", "print(6 * 7)")
    cache_dir = tmp_path / "cache"
    took = book_cache.fill_cache([a, b], cache_dir, jobs=2, timeout=60, log=lambda *_: None)
    assert set(took) == {str(a), str(b)}
    cache = get_cache(str(cache_dir))
    # myst-nb's cache client: match_cache_notebook on the source notebook, then merge outputs
    _, merged = cache.merge_match_into_notebook(book_cache.read_notebook(b))
    assert merged.cells[0].outputs[0]["text"].strip() == "42"
    _, merged = cache.merge_match_into_notebook(book_cache.read_notebook(a))
    assert merged.cells[0].outputs[0]["text"].strip() == str(tmp_path.resolve())  # run in its folder
    assert book_cache.pending_notebooks(cache_dir, [a, b]) == []
    # a changed code cell is a new hash: pending again, as myst-nb would execute it
    _notebook(b, "print(6 * 8)")
    assert book_cache.pending_notebooks(cache_dir, [a, b]) == [b]


def test_a_cached_notebook_is_not_run_again(tmp_path):
    a = _notebook(tmp_path / "a.ipynb", "print(1)")
    book_cache.fill_cache([a], tmp_path / "cache", jobs=1, timeout=60, log=lambda *_: None)
    assert book_cache.fill_cache([a], tmp_path / "cache", jobs=1, timeout=60, log=lambda *_: None) == {}


def test_a_failing_notebook_is_named_and_not_cached(tmp_path):
    good = _notebook(tmp_path / "good.ipynb", "x = 1")
    bad = _notebook(tmp_path / "bad.ipynb", "raise ValueError('planted failure')")
    lines = []
    with pytest.raises(RuntimeError, match="bad.ipynb"):
        book_cache.fill_cache([bad, good], tmp_path / "cache", jobs=2, timeout=60, log=lines.append)
    assert any("planted failure" in line for line in lines)
    assert book_cache.pending_notebooks(tmp_path / "cache", [bad, good]) == [bad]


def test_jobs_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="jobs"):
        book_cache.fill_cache([], tmp_path / "cache", jobs=0)


def test_cli_names_a_missing_notebook(tmp_path, capsys):
    assert book_cache.main([str(tmp_path / "nope.ipynb"), "--cache", str(tmp_path / "c")]) == 2
    assert "nope.ipynb" in capsys.readouterr().err
