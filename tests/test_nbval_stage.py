"""fgclip.nbval_stage and fgclip.book_cache --adopt: a notebook nbval ran whole is staged with
its outputs and the fingerprint of its inputs, and the book adopts it only while code and
inputs are unchanged; a failing notebook is never staged."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_cache import get_cache

from fgclip import book_cache
from fgclip.nbval_stage import executed_notebook


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell("# a chapter")] + [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))
    return path


def _nbval(tmp_path: Path, *notebooks: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FGCLIP_BOOK_STAGE": str(tmp_path / "stage"), "FGCLIP_BOOK_INPUTS": "inputs"}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "fgclip.nbval_stage", "--nbval-lax",
                           "--nbval-current-env", "-p", "no:cacheprovider", *map(str, notebooks)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_fingerprint_reads_every_input_and_no_bytecode(tmp_path):
    (tmp_path / "src" / "__pycache__").mkdir(parents=True)
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    (tmp_path / "ckpt.pt").write_bytes(b"\x00\x01")
    first = book_cache.inputs_fingerprint(["src", "ckpt.pt"], tmp_path)
    (tmp_path / "src" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"junk")
    assert book_cache.inputs_fingerprint(["src", "ckpt.pt"], tmp_path) == first  # bytecode is no input
    (tmp_path / "ckpt.pt").write_bytes(b"\x00\x02")
    assert book_cache.inputs_fingerprint(["src", "ckpt.pt"], tmp_path) != first
    with pytest.raises(FileNotFoundError, match="nope"):
        book_cache.inputs_fingerprint(["src", "nope"], tmp_path)


def test_executed_notebook_fills_every_code_cell_or_refuses(tmp_path):
    nb = nbformat.read(str(_notebook(tmp_path / "a.ipynb", "print(1)", "2")), as_version=4)
    outs = {0: [nbformat.v4.new_output("stream", name="stdout", text="1\n")],
            1: [nbformat.v4.new_output("execute_result", data={"text/plain": "2"})]}
    done = executed_notebook(nb, outs, "f" * 64, 1.5)
    code = [c for c in done.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2] and code[1].outputs[0]["execution_count"] == 2
    assert code[0].outputs[0]["text"] == "1\n" and done.metadata[book_cache.STAGE_KEY]["inputs"] == "f" * 64
    assert book_cache.code_cells(done) == book_cache.code_cells(nb)  # what the cache hashes is unchanged
    with pytest.raises(ValueError, match="outputs for code cells"):
        executed_notebook(nb, {0: outs[0]}, "f" * 64, 1.0)


def test_a_value_hidden_by_a_semicolon_stays_hidden(tmp_path):
    """nbval runs cells without history, so the kernel shows what ';' hides in the book."""
    nb = nbformat.read(str(_notebook(tmp_path / "a.ipynb", "x = 1\nprint(x)\nx + 1;  # hidden", "x + 2")), as_version=4)
    shown = lambda v: nbformat.v4.new_output("execute_result", data={"text/plain": v})  # noqa: E731
    printed = nbformat.v4.new_output("stream", name="stdout", text="1\n")
    done = executed_notebook(nb, {0: [printed, shown("2")], 1: [shown("3")]}, "f" * 64, 1.0)
    code = [c for c in done.cells if c.cell_type == "code"]
    assert [o["output_type"] for o in code[0].outputs] == ["stream"]  # the print stays, the value goes
    assert code[1].outputs[0]["data"]["text/plain"] == "3"


def test_nbval_stages_a_passing_notebook_and_the_book_adopts_it_while_inputs_hold(tmp_path):
    (tmp_path / "inputs").write_text("v1")
    ok = _notebook(tmp_path / "ok.ipynb", "x = 6 * 7", "print(x)", "import os\nos.getcwd();")
    bad = _notebook(tmp_path / "bad.ipynb", "print('start')", "1 / 0")
    run = _nbval(tmp_path, ok, bad)
    assert run.returncode == 1, run.stdout[-2000:]  # bad.ipynb fails under nbval
    stage = tmp_path / "stage"
    assert sorted(p.name for p in stage.iterdir()) == ["ok.ipynb"], "a failing notebook must not be staged"
    staged = nbformat.read(str(stage / "ok.ipynb"), as_version=4)
    assert [c for c in staged.cells if c.cell_type == "code"][1].outputs[0]["text"].strip() == "42"
    assert [c for c in staged.cells if c.cell_type == "code"][2].outputs == []  # ';' hides it, as in the book

    logs: list[str] = []
    cwd = os.getcwd()
    os.chdir(tmp_path)  # inputs are relative to the project root, as in the Makefile
    try:
        took = book_cache.fill_cache([ok], tmp_path / "cache", jobs=1, timeout=60, log=logs.append,
                                     adopt=stage, inputs=["inputs"])
    finally:
        os.chdir(cwd)
    assert any("adopted" in line for line in logs), logs
    assert set(took) == {str(ok)}
    _, merged = get_cache(str(tmp_path / "cache")).merge_match_into_notebook(book_cache.read_notebook(ok))
    assert [c for c in merged.cells if c.cell_type == "code"][1].outputs[0]["text"].strip() == "42"

    (tmp_path / "inputs").write_text("v2")  # an input changed after nbval ran: no adoption
    assert book_cache.staged_copy(ok, stage, book_cache.inputs_fingerprint(["inputs"], tmp_path)) is None
    _notebook(ok, "x = 6 * 8", "print(x)")  # nor after the code changed
    assert book_cache.staged_copy(ok, stage, staged.metadata[book_cache.STAGE_KEY]["inputs"]) is None


def test_adopt_needs_inputs(tmp_path, capsys):
    nb = _notebook(tmp_path / "a.ipynb", "1")
    assert book_cache.main([str(nb), "--cache", str(tmp_path / "c"), "--adopt", str(tmp_path)]) == 2
    assert "--adopt needs --inputs" in capsys.readouterr().err
