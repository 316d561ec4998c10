"""Chapter 5's verdicts: each method against the frozen CLIP's own reading of every task, read
through two controls, and against the strongest cheap trained baseline.

For a filled cell (method m, task t) with scores A[s, u] and the frozen CLIP's reading B[s, u]
of the same units (CLIP dense similarity for pointing, leave-one-word-out for misalignment, and
for presence and retrieval the training-free reading chosen on validation among global cosine,
dense max and Cluster-CLIP), the transfer test is :func:`fgclip.verdicts.compare` (A, B) with
the task's margin m_t, its units clustered by image for pointing and misalignment. Its controls:

    P[s, u] = A[s, u] + (mean(B) + delta - mean(A))       positive: an effect delta = 2 m_t planted
    A/A:  A[2k, u]  vs  A[2k + 1, u],  k < S/2  (even seeds against odd)        (eq-ch5-controls)

The positive control is the test's own differences re-centred at delta (chapter 1's
:func:`fgclip.studies.maximage.evaluation.planted_effect_scores`): it fires when the comparison
resolves an effect of two margins. The negative control is an A/A: the method against itself,
trained on disjoint seeds, where nothing differs but the training seed; it passes only as
'equivalent' within +-m_t (the book's rule), and fails when the halves disagree by more than the
margin or when its interval, three seeds a side, is too wide to fit inside it. When either fails, the cell reads 'the test cannot decide here'
(:func:`fgclip.verdicts.falsify`).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ... import verdicts as V
from .adapters import EXTENSIONS, METHODS, TASKS
from .evaluate import OWN_TASK, UNITS

# the frozen CLIP's reading of each task; presence's and retrieval's are defaults that the chapter
# replaces by the reading chosen on validation (evaluate.choose_readings, Judge's ``readings``)
CLIP_READING = {"pointing": "CLIP dense similarity", "misalignment": "leave-one-word-out",
                "presence": "zero-shot", "retrieval": "CLIP global"}
BASELINE = {"pointing": "object pointer", "misalignment": "random content word",
            "presence": "linear probe", "retrieval": "linear probe"}
# cells whose method answers from a smaller candidate set than the task's reading: decoupling scores
# only the words that name a category, so it is judged against CLIP read over those same words
CELL_REFERENCES = {("decoupling", "misalignment"): ("CLIP dense max, category words", "random category word")}
PLANTED_MARGINS = 2.0  # delta = 2 m_t
# what each task asks of an alignment: presence and retrieval both rank the images per category by a
# score of the same trained head (AP over all of them, AP@50 at the top), so between them a gain is not
# a transfer to another kind of task, nor two independent pieces of evidence
KIND = {"pointing": "region", "misalignment": "word", "presence": "image", "retrieval": "image"}


def task_of(v: V.Verdict) -> str:
    """The task a verdict of this module is about: its claim ends with ' on <task>'."""
    return v.claim.rsplit(" on ", 1)[1]


def recentred(arm: np.ndarray, comparator: np.ndarray, effect: float) -> np.ndarray:
    """eq-ch5-controls: the arm's (S, U) scores moved by one constant so that their mean lies
    ``effect`` (>= 0) above the comparator's."""
    a, b = np.asarray(arm, float), np.asarray(comparator, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"recentred: arm and comparator must be (n_seeds, n_units) of one shape, got {a.shape}, {b.shape}")
    if not effect >= 0:
        raise ValueError(f"recentred: effect must be >= 0, got {effect}")
    return a + (np.nanmean(b) + effect - np.nanmean(a))


def a_a_halves(arm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """eq-ch5-controls' A/A: the (S, U) scores of the even-numbered seeds against the odd ones,
    paired seed by seed (seed 2k against seed 2k + 1, an odd last seed left out), so that each
    half holds one of the two seeds the selection was made on; S >= 2."""
    a = np.asarray(arm, float)
    if a.ndim != 2 or len(a) < 2:
        raise ValueError(f"a_a_halves: need (n_seeds >= 2, n_units) scores, got shape {a.shape}")
    h = len(a) // 2
    return a[0:2 * h:2], a[1:2 * h:2]


TRAINING_FREE = frozenset({"clip4dm"})  # methods that train nothing: every seed is the same run


def a_a_vacuous(f: V.Falsification) -> bool:
    """An A/A that cannot fail: the method trains nothing, so its halves are the same run (up to a
    seeded tie-break at most) and the control does not measure training noise."""
    return f.test.arms[0] in TRAINING_FREE


def subject(method: str, task: str) -> str:
    """The method as a claim names it: the cells the book's extension fills say so."""
    return f"{method}'s image-side extension" if (method, task) in EXTENSIONS else method


class Judge:
    """Compares arms on one task's units with the task's margin, clusters and seeds."""

    def __init__(self, scores: Mapping[str, Mapping[str, np.ndarray]], clusters: Mapping[str, np.ndarray | None],
                 margins: Mapping[str, float], seed: int = 0, readings: Mapping[str, str] | None = None) -> None:
        missing = [t for t in TASKS if t not in margins or not margins[t] > 0]
        if missing:
            raise ValueError(f"parameter 'margins' needs a margin > 0 for tasks {missing}, got {dict(margins)}")
        self.scores, self.clusters, self.margins, self.seed = scores, clusters, dict(margins), seed
        self.readings = {**CLIP_READING, **(readings or {})}  # task -> the frozen CLIP's reading it is judged against
        self.chosen = dict(readings or {})  # the readings chosen on this run's validation images

    def compare(self, a: str, b: str, task: str, claim: str, x=None, y=None) -> V.Verdict:
        x = self.scores[a][task] if x is None else x
        y = self.scores[b][task] if y is None else y
        unit, cluster_unit = UNITS[task]
        return V.compare(x, y, claim=claim, arms=(a, b), unit=unit, clusters=self.clusters[task],
                         cluster_unit=cluster_unit, seed=self.seed, margin=self.margins[task])

    def transfer(self, method: str, task: str) -> V.Falsification:
        """The method against the frozen CLIP's reading of ``task``, through eq-ch5-controls."""
        ref = self.reading(method, task)
        a, b, m = self.scores[method][task], self.scores[ref][task], self.margins[task]
        test = self.compare(method, ref, task, f"{subject(method, task)} vs {ref} on {task}")
        pos = self.compare(f"{method} + planted {PLANTED_MARGINS:g} margins", ref, task,
                           f"planted effect on {task}", recentred(a, b, PLANTED_MARGINS * m), b)
        first, second = a_a_halves(a)
        neg = self.compare(f"{method}, even seeds", f"{method}, odd seeds", task,
                           f"A/A of {method} on {task}", first, second)
        return V.falsify(test, pos, neg)

    def reading(self, method: str, task: str) -> str:
        """The CLIP reading a cell is judged against: the cell's own (CELL_REFERENCES) or the task's."""
        return CELL_REFERENCES[method, task][0] if (method, task) in CELL_REFERENCES else self.readings[task]

    @staticmethod
    def baseline(method: str, task: str) -> str:
        """The cheap baseline a cell is compared with: the cell's own (CELL_REFERENCES) or the task's."""
        return CELL_REFERENCES[method, task][1] if (method, task) in CELL_REFERENCES else BASELINE[task]

    def cell_interval(self, arm: str, task: str) -> V.Verdict:
        """The arm's own mean and interval (seeds and clustered units, eq-verdict-se), as its
        comparison with a zero arm."""
        x = self.scores[arm][task]
        return self.compare(arm, "zero", task, f"{arm} on {task}", x, np.where(np.isnan(x), np.nan, 0.0))


def judge_all(judge: Judge, methods: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, list]:
    """Every filled cell's transfer test (with controls), its comparison with the task's
    cheap baseline, and the stage's own comparison (the CLIP reading vs the baseline)."""
    transfer, baseline = [], []
    for method in METHODS:
        for task in TASKS:
            if task in methods.get(method, {}):
                transfer.append(judge.transfer(method, task))
                base = judge.baseline(method, task)
                baseline.append(judge.compare(method, base, task, f"{subject(method, task)} vs {base} on {task}"))
    r = judge.readings
    stage = [judge.compare(r[t], BASELINE[t], t, f"{r[t]} vs {BASELINE[t]} on {t}") for t in TASKS]
    return {"transfer": transfer, "baseline": baseline, "stage": stage}


CHOSEN_READING = "CLIP's reading chosen on validation"


def claim_roles(judge: Judge, judged: Mapping[str, list]) -> dict[str, dict]:
    """For `make replicate` (:func:`fgclip.replication.load_verdicts`): every verdict that names a
    reading chosen on this run's validation images (a transfer test, its planted control, a stage
    verdict), keyed 'claim<TAB>arm A<TAB>arm B', with the claim and arms under the role instead of
    the name, so that a replicate whose validation picks another reading still pairs with it."""
    out = {}
    tests = [v for f in judged["transfer"] for v in (f.test, f.positive)] + list(judged["stage"])
    for v in tests:
        reading = judge.chosen.get(task_of(v))
        if reading is None or reading not in v.arms or (v.arms[0], task_of(v)) in CELL_REFERENCES:
            continue
        out["\t".join((v.claim, *v.arms))] = {"claim": v.claim.replace(reading, CHOSEN_READING),
                                              "arms": [CHOSEN_READING if a == reading else a for a in v.arms]}
    return out


def kind(method: str, task: str) -> str:
    """The kind of alignment a cell asks for: the task's, except misalignment for decoupling, which
    answers only among the words that name a category, i.e. asks which named category is absent."""
    return "image" if (method, task) == ("decoupling", "misalignment") else KIND[task]


def conclusion_word(f: V.Falsification) -> str:
    """'better', 'worse', 'equivalent', 'cannot tell' or 'cannot decide' for a transfer test."""
    if not f.controls_pass:
        return "cannot decide"
    return {V.A_BETTER: "better", V.B_BETTER: "worse", V.EQUIVALENT: "equivalent",
            V.CANNOT_TELL: "cannot tell"}[f.test.verdict]


def transfer_table(transfer: list[V.Falsification]) -> pd.DataFrame:
    """method x task: the transfer test's conclusion against the CLIP reading ('own' marks the
    method's own paper's task, 'ext.' a cell the book's extension fills), '-' where the cell is empty."""
    rows = {m: {t: "-" for t in TASKS} for m in METHODS}
    for f in transfer:
        method, task = f.test.arms[0], task_of(f.test)
        word = conclusion_word(f)
        rows[method][task] = f"{word} (own)" if OWN_TASK[method] == task else \
            f"{word} (ext.)" if (method, task) in EXTENSIONS else word
    return pd.DataFrame(rows).T[list(TASKS)]


def findings(transfer: list[V.Falsification]) -> dict[str, dict]:
    """Per method: its own task's conclusion, and the other tasks grouped by conclusion (the
    closing section's sentences are built from this record, nothing else)."""
    out = {m: {"own task": OWN_TASK[m], "own": None, "better": [], "worse": [], "equivalent": [],
               "cannot tell": [], "cannot decide": [], "extensions": {}} for m in METHODS}
    for f in transfer:
        method, task = f.test.arms[0], task_of(f.test)
        word = conclusion_word(f)
        if task == OWN_TASK[method]:
            out[method]["own"] = word
        elif (method, task) in EXTENSIONS:  # the book's construction: reported apart, counted for nothing
            out[method]["extensions"][task] = word
        else:
            out[method][word].append(task)
    for m, rec in out.items():
        rec["others tested"] = any(rec[k] for k in ("better", "worse", "equivalent", "cannot tell", "cannot decide"))
        rec["transfers"] = any(kind(m, t) != KIND[rec["own task"]] for t in rec["better"])  # to another kind
        rec["specific"] = rec["own"] == "better" and not rec["better"] and rec["others tested"]
    return out
