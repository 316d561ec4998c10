"""Chapter 5's closing section and record: every sentence built from a verdict or a selection record."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ... import verdicts as V
from .adapters import EXTENSIONS, METHODS, TASKS
from .evaluate import OWN_TASK, cell_reason
from .judge import (BASELINE, KIND, Judge, a_a_vacuous, conclusion_word, findings as group_findings, kind,
                    task_of)
from .extension import IMAGE_RULES
from .train import MethodRun

LABEL = {"maximage": "MaxImage (ch1)", "clip4dm": "CLIP4DM (ch2)", "sumclip": "SUM-CLIP / FOR (ch3)",
         "decoupling": "decoupling (ch4)"}
NEAR_WHY = {"retrieval": "retrieval ranks the images per category by a score of the same head, as presence does",
            "presence": "presence ranks the images per category by a score of the same head, as retrieval does",
            "misalignment": "on the kept foils the wrong word is always a category's name, and it picks among those "
                            "words only: which named category is absent, presence asked word by word"}
# what each paper claims about its alignment, in the book's words (the chapters' own summaries)
CLAIM = {"maximage": "retrieval training alone ties each word to the regions it names",
         "clip4dm": "the negative gradients of a frozen CLIP say which words of a caption the image does not support",
         "sumclip": "one embedding per object lets an object's name find the images that hold it",
         "decoupling": "one attention map and one prompt per category keep each category's evidence apart"}


def cell_table(judge: Judge, arms: Sequence[str]) -> pd.DataFrame:
    """arm x task: 'mean [lo, hi]' (the arm's own interval over seeds and clustered units), '(ext.)' after
    a cell the book's extension fills, '-' where empty."""
    rows = {}
    for arm in arms:
        rows[arm] = {}
        for task in TASKS:
            if task in judge.scores.get(arm, {}):
                v = judge.cell_interval(arm, task)
                ext = " (ext.)" if (arm, task) in EXTENSIONS else ""
                rows[arm][task] = f"{v.difference:.3f} [{v.ci_low:.3f}, {v.ci_high:.3f}]{ext}"
            else:
                rows[arm][task] = "-"
    return pd.DataFrame(rows).T[list(TASKS)]


def _interval(v: V.Verdict) -> str:
    return f"{v.difference:+.3f} [{v.ci_low:+.3f}, {v.ci_high:+.3f}]"


def _said(f: V.Falsification) -> str:
    """One transfer test in words: its conclusion, and the interval it rests on."""
    word = conclusion_word(f)
    if word == "cannot decide":
        why = (f"its A/A (the method against itself on other seeds) {f._negative_words()}" if not f.negative_passed
               else "the planted effect did not fire")
        return f"the test cannot decide here ({why}; {_interval(f.test)})"
    t = f.test
    small = ((t.verdict == V.A_BETTER and t.ci_low < t.margin) or (t.verdict == V.B_BETTER and t.ci_high > -t.margin))
    return (f"**{t.outcome}** ({_interval(t)}, margin ±{t.margin:g}"
            + (", its interval reaching a difference smaller than the margin" if small else "")
            + ("; its A/A cannot fail, nothing being trained" if a_a_vacuous(f) else "") + ")")


def extension_note(method: str, task: str, runs: Mapping[str, MethodRun] | None = None) -> str:
    """A cell the book's extension fills, in words: what it is and, for CLIP4DM's image side, the
    rule its validation chose with both rules' validation pointing."""
    note = EXTENSIONS[method, task]
    extra = runs[method].record.extra if runs and method in runs else {}
    if "image-side rule" in extra:
        acc = extra["validation pointing by image-side rule"]
        note += (f"; rule {extra['image-side rule']}, chosen on validation pointing ("
                 + ", ".join(f"{rule} {acc[rule]:.3f}" for rule in IMAGE_RULES.values()) + ")")
    return note


def method_sentence(method: str, transfer: Sequence[V.Falsification], record: Mapping,
                    runs: Mapping[str, MethodRun] | None = None) -> str:
    """MaxImage on its own task and on the others, against the frozen CLIP's reading."""
    own = OWN_TASK[method]
    by_task = {task_of(f.test): f for f in transfer if f.test.arms[0] == method}
    ref = {t: f.test.arms[1] for t, f in by_task.items()}
    parts = [f"**{LABEL[method]}**, on its own paper's task ({own}, against {ref.get(own, '-')}): "
             f"{_said(by_task[own]) if own in by_task else '-'}."]
    others = [t for t in TASKS if t != own]
    said = [f"{t} ({extension_note(method, t, runs) + '; ' if (method, t) in EXTENSIONS else ''}against {ref[t]}): "
            f"{_said(by_task[t])}" for t in others if t in by_task]
    empty = [f"{t}: '-' ({cell_reason(method, t)})" for t in others if t not in by_task]
    parts.append("On the other tasks, " + "; ".join(said + empty) + ".")
    rec = record[method]
    far = [t for t in rec["better"] if kind(method, t) != KIND[own]]
    near = [t for t in rec["better"] if kind(method, t) == KIND[own]]
    unconverged = bool(runs and method in runs and runs[method].record.converged is False)
    if far:
        parts.append(f"Its alignment transfers to a task of another kind ({', '.join(far)}): the claim that "
                     f"{CLAIM[method]} reaches beyond its own metric here.")
    elif near:
        parts.append(f"It also beats the frozen CLIP on {', '.join(near)}, but there it answers an {KIND[own]}-level "
                     f"question again (" + "; ".join(NEAR_WHY[t] for t in near) + "), so this is no transfer to a "
                     f"different kind of task: the claim that {CLAIM[method]} is shown here at the {KIND[own]} "
                     f"level only.")
    elif rec["own"] in ("cannot decide", "cannot tell", None) and not (rec["worse"] or rec["equivalent"]):
        parts.append(f"None of its comparisons could be decided at this size, so this run neither supports nor "
                     f"refutes the claim that {CLAIM[method]}.")
    elif not rec["others tested"]:
        ext = (f" (the {', '.join(rec['extensions'])} cell reads the book's extension, not the paper's method, and "
               f"counts neither way)" if rec["extensions"] else "")
        parts.append(f"No other task can be asked of the paper's own method{ext}, so whether its "
                     f"alignment transfers is untested here" + (f"; on its own task it beats {ref[own]}."
                                                                if rec["own"] == "better" else "."))
    elif rec["specific"]:
        parts.append(f"Its gain is specific to its own task: it beats {ref[own]} there and the frozen CLIP's "
                     f"reading nowhere else, so the claim that {CLAIM[method]} is shown here for its own metric only.")
    elif unconverged:
        parts.append(f"It beats the frozen CLIP's own reading on no task here, but its training had not converged "
                     f"(see the caveat), so this run cannot test the claim that {CLAIM[method]}.")
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
                   f"{r.unit.split(' ')[0]}s), so its numbers may understate what it reaches")
    if r.selection is not None and getattr(r.selection, "lr_edge", ""):
        out.append(f"its lr ({r.lr:g}) is at an end of its chapter's grid")
    return "; ".join(out) + ("." if out else "")


def stage_sentence(stage: Sequence[V.Verdict]) -> str:
    """The frozen CLIP's reading of each task against the task's cheap baseline."""
    return "; ".join(f"{v.arms[0]} vs {v.arms[1]} on {task_of(v)}: **{v.outcome}** "
                     f"({_interval(v)})" for v in stage) + "."


def baseline_sentence(baseline: Sequence[V.Verdict]) -> str:
    """Per method, the tasks where it beats / loses to the task's strongest cheap baseline."""
    out = []
    for method in METHODS:
        mine = [v for v in baseline if v.arms[0] == method]
        if not mine:
            continue
        def named(v: V.Verdict) -> str:  # a cell of the book's extension says so
            return task_of(v) + (" (the book's extension)" if (method, task_of(v)) in EXTENSIONS else "")
        won = [named(v) for v in mine if v.verdict == V.A_BETTER]
        lost = [named(v) for v in mine if v.verdict == V.B_BETTER]
        out.append(f"{LABEL[method]} better on {', '.join(won) or 'no task'}, worse on {', '.join(lost) or 'no task'}")
    return (f"against each task's cheap baseline ({', '.join(f'{t}: {b}' for t, b in BASELINE.items())}): "
            + "; ".join(out) + ".")


def controls_sentence(transfer: Sequence[V.Falsification]) -> str:
    """How many transfer tests their controls (planted effect, A/A) let decide, and which could not;
    an A/A of a method that trains nothing (every seed the same run) is vacuous and counted apart."""
    vacuous = [f for f in transfer if a_a_vacuous(f)]
    real = [f for f in transfer if f not in vacuous]
    bad = [f.test.claim for f in real if not f.controls_pass]
    fired = sum(f.positive_passed for f in vacuous)
    return (f"{len(real) - len(bad)} of {len(real)} transfer tests of trained methods passed both controls (the "
            f"planted effect fired, the A/A was equivalent)"
            + (f"; {len(vacuous)} more are of a method that trains nothing, whose A/A cannot fail (every seed is the "
               f"same run): they rest on the planted effect alone, which fired in {fired} of them" if vacuous else "")
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


def selection_record(runs: Mapping[str, MethodRun]) -> dict[str, dict]:
    """method -> what was chosen (lr, stop, budget, unit, converged, criterion, split), the curves it
    was chosen from ('<lr>/seed<s>' -> validation curve), its extras and its training seconds."""
    return {m: {"lr": r.record.lr, "stop": r.record.epochs, "budget": r.record.budget, "unit": r.record.unit,
                "converged": r.record.converged, "criterion": r.record.criterion, "split": r.record.split,
                "curves": {f"{lr:g}/seed{s}": c for (lr, s), c in r.record.curves.items()},
                "extra": r.record.extra, "seconds": r.seconds} for m, r in runs.items()}


def seed_values(scores: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, list[float]]]:
    """arm -> task -> the per-seed means (the record's 'method x task x seed' table)."""
    return {arm: {t: [float(x) for x in np.nanmean(v, axis=1)] for t, v in d.items()} for arm, d in scores.items()}
