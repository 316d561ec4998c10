"""A pytest plugin for nbval runs: every notebook whose cells all pass is written, executed,
to a staging folder, so that ``make book`` can adopt it (:mod:`fgclip.book_cache`) instead of
executing the same chapter a second time.

``.ci/run`` executes every chapter twice otherwise: once to build the book and once under
nbval (``make test``), with the same code, inputs and parameters (the chapters compute in fp32
with one thread, so both runs give the same numbers). With ``FGCLIP_BOOK_STAGE=<folder>`` in
the environment of ``pytest -p fgclip.nbval_stage --nbval-lax ...`` each notebook nbval ran
without a failing or skipped cell lands in ``<folder>/<name>.ipynb`` (written to a temporary
file, then renamed): the notebook as nbval read it, each code cell with the outputs nbval
collected from the kernel and an execution count, and in its metadata the fingerprint of the
inputs it ran with (``FGCLIP_BOOK_INPUTS``, the Makefile's BOOK_INPUTS,
:func:`fgclip.book_cache.inputs_fingerprint`) and the seconds its cells took. Without the
variable the plugin does nothing. Under pytest-xdist each worker stages the notebooks it ran.
"""
from __future__ import annotations

import copy
import os
import time
from pathlib import Path

import nbformat
import pytest
from IPython.core.displayhook import DisplayHook

from .book_cache import STAGE_KEY, inputs_fingerprint
from .fileio import atomic_write_text

STAGE_ENV, INPUTS_ENV = "FGCLIP_BOOK_STAGE", "FGCLIP_BOOK_INPUTS"


def executed_notebook(nb: nbformat.NotebookNode, outputs: dict[int, list], fingerprint: str,
                      seconds: float) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose i-th code cell holds ``outputs[i]`` (nbformat output nodes) and
    execution count i + 1; cell sources and metadata unchanged (jupyter-cache hashes them).
    Every code cell must have its outputs: a notebook nbval did not run whole is not staged.

    nbval executes with ``store_history=False``, so IPython's display hook cannot see the cell
    and shows the value of a last expression ending in ';' that the notebook hides: such a
    cell's ``execute_result`` is dropped here, by IPython's own test of the source."""
    out = copy.deepcopy(nb)
    code = [c for c in out.cells if c.cell_type == "code"]
    if sorted(outputs) != list(range(len(code))):
        raise ValueError(f"executed_notebook: outputs for code cells {sorted(outputs)}, the notebook has {len(code)}")
    for i, cell in enumerate(code):
        quiet = DisplayHook.semicolon_at_end_of_expression(cell.source)
        cell.outputs = [nbformat.from_dict(dict(o)) for o in outputs[i]
                        if not (quiet and o.get("output_type") == "execute_result")]
        cell.execution_count = i + 1
        for o in cell.outputs:
            if o.get("output_type") == "execute_result":
                o["execution_count"] = i + 1
    out.metadata[STAGE_KEY] = {"inputs": fingerprint, "seconds": round(seconds, 1), "by": "nbval"}
    nbformat.validate(out)
    return out


class _Stager:
    """Collects each nbval cell's outputs and outcome; stages a notebook after its last cell."""

    def __init__(self, stage: Path, inputs: list[str]) -> None:
        self.stage, self.fingerprint = stage, inputs_fingerprint(inputs)
        self.runs: dict[str, dict] = {}  # notebook path -> {"outputs", "failed", "start"}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = (yield).get_result()
        if not hasattr(item, "cell_num") or not hasattr(item.parent, "nb"):
            return  # not an nbval cell
        run = self.runs.setdefault(str(item.parent.fspath), {"outputs": {}, "failed": False, "start": time.time()})
        if report.failed or report.skipped:
            run["failed"] = True
        elif call.when == "call":
            run["outputs"][item.cell_num] = list(item.test_outputs or [])

    def pytest_runtest_teardown(self, item, nextitem):
        if not hasattr(item, "cell_num") or (nextitem is not None and nextitem.parent is item.parent):
            return
        run = self.runs.pop(str(item.parent.fspath), None)
        if run is None or run["failed"]:
            return
        nb = executed_notebook(item.parent.nb, run["outputs"], self.fingerprint, time.time() - run["start"])
        atomic_write_text(self.stage / Path(str(item.parent.fspath)).name, nbformat.writes(nb))


def pytest_configure(config) -> None:
    stage = os.environ.get(STAGE_ENV)
    if not stage:
        return
    inputs = os.environ.get(INPUTS_ENV, "").split()
    if not inputs:
        raise pytest.UsageError(f"{STAGE_ENV} is set but {INPUTS_ENV} (the inputs besides the code) is empty")
    Path(stage).mkdir(parents=True, exist_ok=True)
    config.pluginmanager.register(_Stager(Path(stage), inputs), "fgclip-nbval-stage")
