"""Every chapter notebook follows the book's conventions (checked without executing it).

- its jupytext py:percent file and its committed .ipynb hold the same cells, the .ipynb
  with outputs stripped;
- one `parameters` cell whose defaults are the small CPU run, with the names every
  chapter shares; `cpu-small.yaml` repeats those defaults and `gpu-full.yaml` is a valid
  set for a GPU;
- the first code cell installs the project on Colab (and does nothing elsewhere), and the
  Colab badge opens this very notebook;
- the chapter is in _toc.yml.
"""
from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

from fgclip.runner import PARAMS_DIR, ParameterError, chapter_defaults, load_param_file, validate

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.stem for p in (REPO / "notebooks").glob("ch*_*.py"))
SHARED_PARAMS = {"seed": int, "device": str, "data_root": str, "results_path": str}


def _ipynb(name: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)


@pytest.mark.parametrize("name", CHAPTERS)
def test_paired_ipynb_has_the_same_cells_and_no_outputs(name):
    py = jupytext.read(REPO / "notebooks" / f"{name}.py")
    nb = _ipynb(name)
    assert [(c.cell_type, c.source) for c in py.cells] == [(c.cell_type, c.source) for c in nb.cells], \
        f"{name}.ipynb is out of sync with {name}.py: run `make sync`"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}.ipynb has outputs"


@pytest.mark.parametrize("name", CHAPTERS)
def test_parameters_cell_defaults_are_the_cpu_run(name):
    chapter = name.split("_")[0]
    defaults = chapter_defaults(REPO / "notebooks" / f"{name}.ipynb")
    for key, kind in SHARED_PARAMS.items():
        assert isinstance(defaults.get(key), kind), f"{name}: parameter {key!r} missing or not {kind.__name__}"
    assert defaults["device"] == "cpu" and defaults["results_path"] == ""
    small = load_param_file(PARAMS_DIR / chapter / "cpu-small.yaml")
    assert small, f"{chapter}/cpu-small.yaml is empty"
    for key, value in small.items():
        assert key in defaults and defaults[key] == value, \
            f"{chapter}/cpu-small.yaml sets {key}={value!r}, the notebook default is {defaults.get(key)!r}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_gpu_full_is_a_valid_parameter_set_for_cuda(name):
    chapter = name.split("_")[0]
    full = load_param_file(PARAMS_DIR / chapter / "gpu-full.yaml")
    assert full.get("device") == "cuda", f"{chapter}/gpu-full.yaml must set device: cuda"
    # real data roots, weight files and the GPU exist only on the GPU machine: check the
    # names, types, ranges and models here, not the paths or the device
    validate(chapter, full, on_this_machine=False)  # unknown names and wrong types raise


def test_validate_still_rejects_a_bad_name_in_every_chapter():
    for name in CHAPTERS:
        with pytest.raises(ParameterError, match="unknown parameter"):
            validate(name.split("_")[0], {"no_such_parameter": 1})


@pytest.mark.parametrize("name", CHAPTERS)
def test_colab_cell_and_badge(name):
    nb = _ipynb(name)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "google.colab" in code[0].source and "remove-cell" in code[0].metadata.get("tags", []), \
        f"{name}: the first code cell must be the Colab install cell, tagged remove-cell"
    badges = re.findall(r"colab\.research\.google\.com/github/[^)\s]+", nb.cells[0].source)
    assert badges and all(b.endswith(f"/notebooks/{name}.ipynb") for b in badges), \
        f"{name}: the first cell needs a Colab badge that opens notebooks/{name}.ipynb"


def test_every_chapter_is_in_the_table_of_contents():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = {c["file"] for part in toc["parts"] for c in part["chapters"]}
    missing = [n for n in CHAPTERS if f"notebooks/{n}" not in files]
    assert not missing, f"chapters missing from _toc.yml: {missing}"
