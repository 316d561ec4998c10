"""Chapter 5's closing section and record: every sentence built from a verdict or a selection record."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ... import verdicts as V
from .adapters import METHODS, TASKS
from .evaluate import OWN_TASK, cell_reason
from .judge import BASELINE, Judge, conclusion_word, findings as group_findings
from .train import MethodRun

LABEL = {"maximage": "MaxImage (ch1)", "clip4dm": "CLIP4DM (ch2)", "sumclip": "SUM-CLIP / FOR (ch3)",
         "decoupling": "decoupling (ch4)"}
# what each task asks of an alignment: presence and retrieval both rank the images per category by a
# score of the same trained head (AP over all of them, AP@50 at the top), so between them a gain is not
# a transfer to another kind of task, nor two independent pieces of evidence
KIND = {"pointing": "region", "misalignment": "word", "presence": "image", "retrieval": "image"}
# what each paper claims about its alignment, in the book's words (the chapters' own summaries)
CLAIM = {"maximage": "retrieval training alone ties each word to the regions it names",
         "clip4dm": "the negative gradients of a frozen CLIP say which words of a caption the image does not support",
         "sumclip": "one embedding per object lets an object's name find the images that hold it",
         "decoupling": "one attention map and one prompt per category keep each category's evidence apart"}


def cell_table(judge: Judge, arms: Sequence[str]) -> pd.DataFrame:
    """arm x task: 'mean [lo, hi]' (the arm's own interval over seeds and clustered units), '-' where empty."""
    rows = {}
    for arm in arms:
        rows[arm] = {}
        for task in TASKS:
            if task in judge.scores.get(arm, {}):
                v = judge.cell_interval(arm, task)
                rows[arm][task] = f"{v.difference:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}]"
            else:
                rows[arm][task] = "-"
    return pd.DataFrame(rows).T[list(TASKS)]


def _interval(v: V.Verdict) -> str:
    return f"{v.difference:+.3f} [{v.ci_low:+.3f}, {v.ci_high:+.3f}]"


def _said(f: V.Falsification) -> str:
    """One transfer test in words: its conclusion, and the interval it rests on."""
    word = conclusion_word(f)
    if word == "cannot decide":
        why = ("its A/A (the method against itself on other seeds) was not equivalent" if not f.negative_passed
               else "the planted effect did not fire")
        return f"the test cannot decide here ({why}; {_interval(f.test)})"
    small = f.test.verdict in (V.A_BETTER, V.B_BETTER) and abs(f.test.difference) < f.test.margin
    return (f"**{f.test.outcome}** ({_interval(f.test)}, margin ±{f.test.margin:g}"
            + (", a difference smaller than the margin)" if small else ")"))


def method_sentence(method: str, transfer: Sequence[V.Falsification], record: Mapping,
                    runs: Mapping[str, MethodRun] | None = None) -> str:
    """MaxImage on its own task and on the others, against the frozen CLIP's reading."""
    own = OWN_TASK[method]
    by_task = {f.test.claim.rsplit(" on ", 1)[1]: f for f in transfer if f.test.arms[0] == method}
    ref = {t: f.test.arms[1] for t, f in by_task.items()}
    parts = [f"**{LABEL[method]}**, on its own paper's task ({own}, against {ref.get(own, '-')}): "
             f"{_said(by_task[own]) if own in by_task else '-'}."]
    others = [t for t in TASKS if t != own]
    said = [f"{t} (against {ref[t]}): {_said(by_task[t])}" for t in others if t in by_task]
    empty = [f"{t}: '-' ({cell_reason(method, t)})" for t in others if t not in by_task]
    parts.append("On the other tasks, " + "; ".join(said + empty) + ".")
    rec = record[method]
    far = [t for t in rec["better"] if KIND[t] != KIND[own]]
    near = [t for t in rec["better"] if KIND[t] == KIND[own]]
    if far:
        parts.append(f"Its alignment transfers to a task of another kind ({', '.join(far)}): the claim that "
                     f"{CLAIM[method]} reaches beyond its own metric here.")
        if "misalignment" in far and KIND[own] == "image":
            parts.append("On the kept foils the wrong word is always a category's name, so finding it asks which "
                         "named category is absent from the image: presence, asked word by word.")
    elif near:
        parts.append(f"It also beats the frozen CLIP on {', '.join(near)}, but that task ranks the images per category "
                     f"by a score of the same head, as its own does ({KIND[own]}-level), so this is no transfer to a "
                     f"different kind of task: "
                     f"the claim that {CLAIM[method]} is shown here at the {KIND[own]} level only.")
    elif rec["specific"]:
        parts.append(f"Its gain is specific to its own task: it beats the frozen CLIP there and nowhere else, so "
                     f"the claim that {CLAIM[method]} is shown here for its own metric only.")
    else:
        parts.append(f"It beats the frozen CLIP's own reading on no task here, its own included: on this stage "
                     f"nothing supports the claim that {CLAIM[method]} beyond what the frozen CLIP already does.")
    caveat = run_caveat(runs[method]) if runs and method in runs else ""
    return " ".join(parts) + (f" Caveat: {caveat}" if caveat else "")


def run_caveat(run: MethodRun) -> str:
    """What to doubt in a method's training: a stop in the budget's last quarter (its numbers are then
    lower bounds of what the method reaches), an lr at the grid's edge."""
    r, out = run.record, []
    if r.epochs is not None and not r.converged:
        out.append(f"its validation curve was still rising at the end of its budget ({r.epochs} of {r.budget} "
                   f"{r.unit.split(' ')[0]}s), so its numbers are lower bounds of what it reaches")
    if r.selection is not None and getattr(r.selection, "lr_edge", ""):
        out.append(f"its lr ({r.lr:g}) is at an end of its chapter's grid")
    return "; ".join(out) + ("." if out else "")


def stage_sentence(stage: Sequence[V.Verdict]) -> str:
    """The frozen CLIP's reading of each task against the task's cheap baseline."""
    return "; ".join(f"{v.arms[0]} vs {v.arms[1]} on {v.claim.rsplit(' on ', 1)[1]}: **{v.outcome}** "
                     f"({_interval(v)})" for v in stage) + "."


def baseline_sentence(baseline: Sequence[V.Verdict]) -> str:
    """Per method, the tasks where it beats / loses to the task's strongest cheap baseline."""
    out = []
    for method in METHODS:
        mine = [v for v in baseline if v.arms[0] == method]
        if not mine:
            continue
        won = [v.claim.rsplit(" on ", 1)[1] for v in mine if v.verdict == V.A_BETTER]
        lost = [v.claim.rsplit(" on ", 1)[1] for v in mine if v.verdict == V.B_BETTER]
        out.append(f"{LABEL[method]} better on {', '.join(won) or 'no task'}, worse on {', '.join(lost) or 'no task'}")
    return (f"against each task's cheap baseline ({', '.join(f'{t}: {b}' for t, b in BASELINE.items())}): "
            + "; ".join(out) + ".")


def controls_sentence(transfer: Sequence[V.Falsification]) -> str:
    """How many transfer tests their controls (planted effect, A/A) let decide, and which could not."""
    bad = [f.test.claim for f in transfer if not f.controls_pass]
    return (f"{len(transfer) - len(bad)} of {len(transfer)} transfer tests passed both controls (the planted effect fired, the A/A was equivalent)"
            + (f"; these cannot decide here: {'; '.join(bad)}." if bad else "."))


def convergence_sentence(runs: Mapping[str, MethodRun]) -> str:
    """Each trained method's choice: lr, stop, budget, and whether it converged within it."""
    out = []
    for method, run in runs.items():
        r = run.record
        if r.epochs is None:
            out.append(f"{LABEL[method]}: nothing trained ({r.extra.get('layers', '')} chosen by {r.criterion})")
            continue
        flag = "converged" if r.converged else "**not converged** (its best stop lies in the budget's last quarter)"
        flag += ", lr at the grid's edge" if r.selection is not None and getattr(r.selection, "lr_edge", "") else ""
        out.append(f"{LABEL[method]}: lr {r.lr:g}, stop at {r.epochs} of {r.budget} ({r.unit}), {flag}")
    return "; ".join(out) + "."


def closing_findings(transfer: Sequence[V.Falsification], baseline: Sequence[V.Verdict], stage: Sequence[V.Verdict],
                     runs: Mapping[str, MethodRun], run_line: str) -> dict[str, str]:
    """The findings the closing section glues, key -> Markdown: the run, each method, the stage,
    the cheap baselines, the controls, the selection."""
    record = group_findings(list(transfer))
    out = {"run": run_line}
    out.update({m: method_sentence(m, transfer, record, runs) for m in METHODS})
    out.update({"stage": stage_sentence(stage), "baselines": baseline_sentence(baseline),
                "controls": controls_sentence(transfer), "selection": convergence_sentence(runs)})
    return out


def seed_values(scores: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, list[float]]]:
    """arm -> task -> the per-seed means (the record's 'method x task x seed' table)."""
    return {arm: {t: [float(x) for x in np.nanmean(v, axis=1)] for t, v in d.items()} for arm, d in scores.items()}
