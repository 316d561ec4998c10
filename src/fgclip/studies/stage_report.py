"""Chapter 0's report on the stage: the targets of issue 29 with their intervals, the
headroom per chapter, the check of each checkpoint's record, and the closing box's sentences.

A target is *met* when the value on the held-out scenes reaches it, and the interval
(a percentile bootstrap over scenes, :func:`fgclip.evaluation.held_out_intervals`) says
whether that is decided: ``met`` when the whole interval is at or above the target,
``missed`` when it is below, ``too close to call`` when it straddles it.
"""
from __future__ import annotations

import numpy as np

from .stage import POOLED_READER, TASKS

# The stage issue 29 asks for, on STAGE_EVAL's held-out scenes: (metric, models it binds, target)
STAGE_TARGETS = (("zero_shot_shape_acc", ("toy-vit", "toy-rn"), 0.90), ("i2t_R@1", ("toy-vit", "toy-rn"), 0.90),
                 ("zero_shot_multilabel_mAP", ("toy-rn",), 0.70), ("zero_shot_retrieval_AP@50", ("toy-rn",), 0.60))
PROBE_GAIN = ("toy-rn", TASKS[1], 0.10)  # a linear probe with every label at least this far above zero-shot
# The readers the probe target is read for: the linear probe (on the global embedding),
# then the book's pooled probe, a deviation (its image score is not linear in the features)
PROBE_READERS = ("linear probe", POOLED_READER)
CHAPTER_OF_TASK = {TASKS[0]: ("ch0", ("toy-vit", "toy-rn")), TASKS[1]: ("ch4", ("toy-rn",)),
                   TASKS[2]: ("ch3", ("toy-rn",)), TASKS[3]: ("ch1", ("toy-vit",))}


def target_keys(model: str) -> tuple[str, ...]:
    """The held-out metrics :data:`STAGE_TARGETS` binds for ``model`` (those that need an interval)."""
    return tuple(key for key, models, _ in STAGE_TARGETS if model in models)


def record_against_targets(model: str, test: dict) -> str:
    """Where a checkpoint's held-out record (``test``: the ``test`` block of
    ``checkpoints/<model>.metrics.json``) stands against the targets bound to ``model``, by the
    value, in the words the critique pages use: "meets both of its targets, ...", "still below
    both of its targets, ..." or "meets k of its n targets, ..."."""
    bound = [(key, target) for key, models, target in STAGE_TARGETS if model in models]
    met = sum(float(test[key]) >= target for key, target in bound)
    count = "both" if len(bound) == 2 else f"all {len(bound)}"
    head = (f"meets {count} of its targets" if met == len(bound) else f"still below {count} of its targets"
            if met == 0 else f"meets {met} of its {len(bound)} targets")
    names = {"zero_shot_shape_acc": "zero-shot shape accuracy", "i2t_R@1": "image-to-text R@1",
             "zero_shot_multilabel_mAP": "zero-shot multi-label mAP",
             "zero_shot_retrieval_AP@50": "zero-shot retrieval AP@50"}
    words = [names[key] for key, _ in bound]
    return head + ", " + (", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0])


def check_recorded(model: str, recorded: dict, recomputed: dict, tolerance: float = 0.02) -> dict[str, float]:
    """Fail loudly when a checkpoint's recorded held-out metrics (``test_metrics``, written by
    the pretraining run) and the ones this build recomputes on the same scenes differ by more
    than ``tolerance``; returns the differences."""
    if not recorded:
        raise ValueError(f"checkpoint of {model} records no test_metrics: it was not made by the current "
                         f"pretraining script (data_scripts/pretrain_toy_clip.py)")
    diffs = {k: float(recomputed[k]) - float(v) for k, v in recorded.items()
             if isinstance(v, (int, float)) and k in recomputed and k not in ("n",)}
    bad = {k: d for k, d in diffs.items() if abs(d) > tolerance}
    if bad:
        raise ValueError(f"{model}: recomputed held-out metrics differ from the checkpoint's record by more than "
                         f"{tolerance}: " + ", ".join(f"{k} {recorded[k]:.3f} -> {recomputed[k]:.3f}" for k in bad))
    return diffs


def target_status(value: float, target: float, interval: tuple[float, float] | None) -> str:
    """``met`` / ``missed`` by the interval when it lies on one side of the target; ``too close
    to call`` when it straddles it; by the value alone (``met (no interval)``) without one."""
    if interval is None:
        return "met (no interval)" if value >= target else "missed (no interval)"
    low, high = interval
    return "met" if low >= target else "missed" if high < target else "too close to call"


def target_rows(metrics: dict[str, dict], ceiling_rows: list[dict],
                intervals: dict[str, dict[str, tuple[float, float]]] | None = None,
                gain_intervals: dict[tuple[str, str], tuple[float, float]] | None = None) -> list[dict]:
    """One row per target of :data:`STAGE_TARGETS` and, per reader of :data:`PROBE_READERS`
    the ceiling has, :data:`PROBE_GAIN` for the models measured: the value, its bootstrap
    interval over scenes (``intervals[model][metric]``, or for a probe's gain
    ``gain_intervals[(reader, model)]`` from :func:`fgclip.evaluation.map_gain_interval`, where
    given) and :func:`target_status`."""
    rows = []
    for key, models, target in STAGE_TARGETS:
        for m in models:
            if m in metrics:
                ci = (intervals or {}).get(m, {}).get(key)
                rows.append({"model": m, "what": key, "target": f">= {target:.2f}", "value": metrics[m][key],
                             "met": metrics[m][key] >= target, "low": ci[0] if ci else np.nan,
                             "high": ci[1] if ci else np.nan, "status": target_status(metrics[m][key], target, ci)})
    model, task, gain = PROBE_GAIN
    zero = [r for r in ceiling_rows if r["reader"] == "zero-shot" and r["model"] == model]
    for reader in PROBE_READERS:
        probe = [r for r in ceiling_rows if r["reader"] == reader and r["model"] == model]
        if probe and zero:  # a trained reader minus zero-shot on the same scenes, paired over them
            value, ci = probe[0][task] - zero[0][task], (gain_intervals or {}).get((reader, model))
            rows.append({"model": model, "what": f"{reader} minus zero-shot, {task}", "target": f">= {gain:.2f}",
                         "value": value, "met": value >= gain, "low": ci[0] if ci else np.nan,
                         "high": ci[1] if ci else np.nan, "status": target_status(value, gain, ci)})
    return rows


def headroom_rows(ceiling_rows: list[dict]) -> list[dict]:
    """Per task, for the chapter's model: chance, oracle, probe and zero-shot, and the headroom
    between zero-shot and the oracle."""
    oracle = next(r for r in ceiling_rows if r["reader"] == "oracle")
    chance = next((r for r in ceiling_rows if r["reader"] == "chance"), {})
    rows = []
    for task, (chapter, models) in CHAPTER_OF_TASK.items():
        for m in models:
            get = lambda reader: next((r[task] for r in ceiling_rows if r["reader"] == reader and r["model"] == m), np.nan)
            rows.append({"chapter": chapter, "task": task, "model": m, "chance": chance.get(task, np.nan),
                         "oracle": oracle[task],
                         "linear probe": get("linear probe"), POOLED_READER: get(POOLED_READER),
                         "zero-shot": get("zero-shot"),
                         "headroom (oracle - zero-shot)": oracle[task] - get("zero-shot")})
    return rows


def target_sentence(targets) -> str:
    """The closing box's line on the targets: how many the value meets (and how many the
    interval decides as met), and each one not decided as met, with its interval and status."""
    head = (f"The stage meets {int(targets['met'].sum())} of its {len(targets)} targets "
            f"({int((targets['status'] == 'met').sum())} with the whole 95% interval over scenes at or above the target)")
    rest = targets[targets["status"] != "met"]
    if rest.empty:
        return head + "."
    ci = lambda r: "" if np.isnan(r.low) else f" [{r.low:.3f}, {r.high:.3f}]"
    return head + "; not decided as met: " + "; ".join(
        f"{r.model} {r.what} {r.value:.3f}{ci(r)} (target {r.target}: {r.status})" for r in rest.itertuples()) + "."


def headroom_sentence(headroom) -> str:
    """The closing box's line on the ceiling: per chapter, oracle and zero-shot."""
    pooled = lambda r: "" if np.isnan(r.get(POOLED_READER, np.nan)) else f", pooled probe {r[POOLED_READER]:.3f}"
    parts = [f"{r['chapter']} ({r['task']}, {r['model']}): oracle {r['oracle']:.3f}, probe {r['linear probe']:.3f}"
             f"{pooled(r)}, zero-shot {r['zero-shot']:.3f}, chance {r['chance']:.3f}" for _, r in headroom.iterrows()]
    return "What the stage can show, per chapter: " + "; ".join(parts) + "."


def reader_caveats(selections: list, headroom) -> str:
    """The closing box's warning: readers that did not converge (an oracle whose validation
    loss was still falling at the last epoch of the budget, a probe whose L-BFGS hit its
    iteration cap), tasks where the oracle scores below zero-shot (there the
    oracle, not the world, limits the ceiling, so the headroom is not measured), and tasks
    where a probe scores above the oracle (the headroom is then larger than oracle minus
    zero-shot says)."""
    open_ended = [s.arm for s in selections if not s.converged]
    edge = [s.arm for s in selections if getattr(s, "at_edge", False)]  # a probe's L2 weight
    lr_edge = [f"{s.arm} ({s.lr_edge})" for s in selections if getattr(s, "lr_edge", "")]  # a trained reader's lr
    below = [f"{r['task']} ({r['model']})" for _, r in headroom.iterrows() if r["oracle"] < r["zero-shot"]]
    probes = [c for c in PROBE_READERS if c in headroom]
    above = [f"{r['task']} ({r['model']}, {c} {r[c]:.3f} against {r['oracle']:.3f})" for _, r in headroom.iterrows()
             for c in probes if r[c] > r["oracle"]]  # NaN compares False: a reader the model lacks
    parts = []
    if open_ended:
        parts.append("not converged within the budget: " + ", ".join(open_ended))
    if edge:
        parts.append("L2 weight chosen at the edge of its grid: " + ", ".join(edge))
    if lr_edge:
        parts.append("learning rate chosen at the edge of its grid: " + ", ".join(lr_edge))
    if below:
        parts.append("oracle below zero-shot, so the ceiling is not measured for: " + "; ".join(below))
    if above:
        parts.append("a probe above the oracle, so the oracle is not the ceiling for: " + "; ".join(above))
    return ("Caveats on the ceiling: " + "; ".join(parts) + ".") if parts else "Every reader converged within its budget."
