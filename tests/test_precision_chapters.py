"""One precision for science (issue 30): every chapter's verdict path is fp32 by default, whatever
the CPU's flags, and a report of which of chapter 4's verdicts bf16 would move.

- Each chapter that declares a ``precision`` parameter defaults to ``"fp32"`` in its parameters
  cell and in ``cpu-small.yaml`` and ``gpu-full.yaml``; with the CPU's flags faked to include ``avx512_bf16`` (where
  ``auto`` would pick bf16), that default still resolves to fp32 and the one head-training loop
  runs its batches without autocast.
- Chapter 4's verdicts, built at a small size on a synthetic world through the chapter's own
  sweep (selection grid, stacked training, comparisons), once under fp32 and once under bf16
  autocast on the same CPU: the table of both outcomes is printed, recorded and raised as a
  warning, so it stands in the summary of `make test` (report, not hide). The test asserts only that the report is produced, never which verdicts move.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fgclip import precision as P
from fgclip.runner import PARAMS_DIR, chapter_defaults, load_param_file
from fgclip.train.loop import HeadTraining, train_loop

REPO = Path(__file__).resolve().parents[1]
VERDICT_CHAPTERS = [p.stem for p in sorted((REPO / "notebooks").glob("ch[1-9]_*.py"))]


def _declares_precision(name: str) -> bool:
    return "precision" in chapter_defaults(REPO / "notebooks" / f"{name}.ipynb")


@pytest.fixture
def bf16_cpu(monkeypatch):
    """Pretend the CPU multiplies bf16 natively, so that 'auto' would choose bf16 here."""
    monkeypatch.setattr(P, "_ANNOUNCED", set())
    monkeypatch.setattr(P, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "avx512_bf16"}))


def _autocast_seen(precision: str) -> list[bool]:
    """Whether each batch of the one head loop ran under CPU autocast at this precision."""
    w = torch.nn.Parameter(torch.ones(2))
    seen: list[bool] = []

    def batch_loss(_):
        seen.append(torch.is_autocast_enabled("cpu"))
        return {"loss": (w ** 2).sum()}

    train_loop([w], lambda: [0, 1], batch_loss, HeadTraining(epochs=1, precision=precision))
    return seen


@pytest.mark.parametrize("name", [n for n in VERDICT_CHAPTERS if _declares_precision(n)])
def test_the_verdict_path_is_fp32_whatever_the_cpu(name, bf16_cpu):
    chapter = name.split("_")[0]
    default = chapter_defaults(REPO / "notebooks" / f"{name}.ipynb")["precision"]
    small = load_param_file(PARAMS_DIR / chapter / "cpu-small.yaml")
    assert default == "fp32", f"{name}: the parameters cell says precision={default!r}, not 'fp32'"
    assert small.get("precision", default) == "fp32", f"{chapter}/cpu-small.yaml says {small['precision']!r}"
    full = load_param_file(PARAMS_DIR / chapter / "gpu-full.yaml")  # the GPU's verdicts are fp32 too
    assert full.get("precision", default) == "fp32", f"{chapter}/gpu-full.yaml says {full['precision']!r}"
    assert P.resolve_precision("auto", "cpu")[0] == "bf16"  # the fake works: auto would pick bf16 here
    assert P.resolve_precision(default, "cpu")[0] == "fp32"
    assert _autocast_seen(default) == [False, False]
    assert _autocast_seen("auto") == [True, True]  # what a chapter left on 'auto' would do


def _chapter4_verdicts(precision: str) -> dict[str, dict]:
    """Chapter 4's verdicts at a small size on a synthetic world, through the chapter's sweep."""
    from fgclip.studies.decoupling import arms as darms, comparisons as dcmp, sweep as dsweep
    from fgclip.studies.decoupling.features import Features
    from fgclip.studies.decoupling.heads import FitConfig
    from fgclip.train.selection import SelectionGrid
    from test_ch4_selection import _make, _targets, _world

    feats, y = _world(260, seed=5)
    fit_idx, val_idx = np.arange(0, 120), np.arange(120, 160)
    test = Features(feats.dense[160:], feats.pooled[160:])
    proportions, seeds = [0.3, 0.7], [0, 1, 2, 3]
    targets = {(sd, rho): _targets(y[:160], rho, sd) for sd in seeds for rho in proportions}
    cfg = FitConfig(batch_size=40, precision=precision)
    trainer = darms.Trainer(_make, Features(feats.dense[fit_idx], feats.pooled[fit_idx]),
                            Features(feats.dense[val_idx], feats.pooled[val_idx]), test, cfg)
    grid = SelectionGrid(lrs=(0.003, 0.03, 0.3), seeds=(0, 1), epochs=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # bf16 where the CPU emulates it: slow, named
        sweep = dsweep.run_protocol(trainer, targets, fit_idx, val_idx, proportions, seeds, grid, y[160:],
                                    _make("zero-shot", "softmax", 0))
    found = [*dcmp.summary_verdicts(sweep.ap, proportions, 0, 0.02),
             *dcmp.scoring_verdicts(sweep.ap, proportions, 0, 0.02).values(),
             dcmp.a_a_verdict(sweep.ap, 0.7, 0, 0.02)]
    return {f"{v.claim} | {v.arms[0]} vs {v.arms[1]}": v.to_dict() for v in found}


class PrecisionReport(UserWarning):
    """Not a fault: the bf16-vs-fp32 table, carried to pytest's warnings summary."""


def test_report_which_chapter4_verdicts_bf16_would_move(record_property, capsys):
    runs = {prec: _chapter4_verdicts(prec) for prec in ("fp32", "bf16")}
    assert runs["fp32"].keys() == runs["bf16"].keys()
    rows = [{"verdict": k, "fp32": a["verdict"], "bf16": runs["bf16"][k]["verdict"],
             "fp32 A-B": round(a["difference"], 4), "bf16 A-B": round(runs["bf16"][k]["difference"], 4),
             "moved": a["verdict"] != runs["bf16"][k]["verdict"]} for k, a in runs["fp32"].items()]
    record_property("ch4_bf16_vs_fp32", json.dumps(rows))
    report = "\n".join([f"chapter 4 at a small size, bf16 against fp32 autocast on this CPU "
                        f"({sum(r['moved'] for r in rows)} of {len(rows)} verdicts move):"] +
                       [f"  {'MOVED' if r['moved'] else 'same '}  {r['fp32']:>11} -> {r['bf16']:<11} "
                        f"({r['fp32 A-B']:+.4f} -> {r['bf16 A-B']:+.4f})  {r['verdict']}" for r in rows])
    with capsys.disabled():
        print("\n" + report)  # seen in a one-process run (pytest -s or without -n)
    # pytest-xdist swallows a worker's prints but carries its warnings to the summary: the report is
    # shown there, under every way the suite is run (`make test` runs it with -n 2)
    warnings.warn(PrecisionReport(report))
    assert len(rows) >= 9 and all(r["fp32"] and r["bf16"] for r in rows)
