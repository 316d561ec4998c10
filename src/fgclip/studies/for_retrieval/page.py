"""Chapter 3's verdicts and the sentences built from them.

:func:`chapter_verdicts` makes every comparison the chapter states in words, each through
:func:`fgclip.studies.for_retrieval.protocol.fold_verdict` (paired per (fold, category) and
seed, whole folds resampled). :func:`global_slot_sentence` says from the record whether
"FOR + global slot" can differ from CLIP global at all, and the arm leaves the verdicts when
it cannot (no query's AP changed in any run). :func:`forgetting_sentence` says whether
supervised-only training forgot the novel categories here, against both references, and what
the falsification can then ask. :func:`underpowered_sentence` names every verdict that fails
the power check and what the central one would cost.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...train.selection import Selection
from ...verdicts import A_BETTER, B_BETTER, EQUIVALENT, Verdict, compare
from .folds import (A_A, A_A_B, CLUSTER, FIXED_TAU, FOR, GLOBAL, GLOBAL_SLOT, NAMES_REMOVED, ORACLE, PAPER, PLANTED,
                    SCALED_TAU, SUPERVISED, UNTRAINED)
from .protocol import AASeeds, converged_sentence, fold_verdict, power_sentence

PAIRS = [(CLUSTER, GLOBAL, "clustering vs the global embedding"), (FOR, UNTRAINED, "FOR vs the head's own start"),
         (GLOBAL_SLOT, FOR, "adding CLIP's global embedding as one more slot"),
         (GLOBAL_SLOT, GLOBAL, "FOR + global slot vs global"), (FIXED_TAU, FOR, "paper's fixed τ vs held-out τ"),
         (PAPER, FOR, "the paper's head (frozen pooling) vs FOR with a trainable W_c"),
         (PAPER, CLUSTER, "the paper's head (frozen pooling) vs Cluster-CLIP"),
         (PAPER, GLOBAL, "the paper's head (frozen pooling) vs CLIP global"),
         (SCALED_TAU, FOR, "vocabulary-scaled τ vs held-out τ"), (ORACLE, FOR, "oracle: wrong pseudo-labels removed"),
         (NAMES_REMOVED, FOR, "novel names removed from the teacher vocabulary")]


@dataclass
class ChapterVerdicts:
    headline: list[Verdict]  # FOR vs Cluster-CLIP and vs CLIP global, under each metric
    forget: Verdict  # supervised only vs CLIP global, novel
    forget_base: Verdict  # the same on the base categories
    forget_start: Verdict  # supervised only vs the untrained head, novel
    forget_start_base: Verdict  # the same on the base categories
    specific: Verdict | None  # supervised only's gain over its start, base against novel, paired per (fold, seed);
    # None with one fixed split (one head per seed: too few units to pair)
    repair: Verdict  # FOR vs supervised only: the falsification's test
    others: list[Verdict]
    positive: Verdict  # planted teacher vs supervised only
    negative: Verdict  # A/A: supervised only's protocol, side B's seeds vs side A's
    primary: str = ""  # the metric every verdict but the headline's others is on

    @property
    def central(self) -> list[Verdict]:
        return [v for v in (self.forget, self.forget_base, self.forget_start, self.forget_start_base, self.specific,
                            self.repair) if v is not None]

    @property
    def forgetting(self) -> tuple[Verdict, ...]:
        """The verdicts :func:`forgetting_sentence` reads, in its order."""
        return self.forget, self.forget_base, self.forget_start, self.forget_start_base, self.specific

    @property
    def all(self) -> list[Verdict]:
        """Every verdict, in the order results.json lists them."""
        return self.headline + self.central + self.others + [self.positive, self.negative]

    def by_arms(self, a: str, b: str) -> Verdict:
        """The first verdict of arm a against arm b (the headline's on its primary metric)."""
        return next(v for v in self.headline if v.arms == (a, b) and v.claim.endswith(f" {self.primary})")) \
            if a == FOR and b in (CLUSTER, GLOBAL) else next(v for v in self.all if v.arms == (a, b))


def chapter_verdicts(rows: pd.DataFrame, folds: Sequence[Sequence[str]], categories: Sequence[str],
                     seeds: Sequence[int], a_a: AASeeds, metrics: Sequence[str], primary: str,
                     margin: float, seed: int, drop: Sequence[str] = ()) -> ChapterVerdicts:
    """Every comparison of the chapter; arms in ``drop`` (and arms the run left out) get none.
    ``a_a``: the A/A control's seeds (side B's paired in order with side A's)."""
    def v(a: str, b: str, claim: str, metric: str = primary, role: str = "novel", seeds_a=None, seeds_b=None) -> Verdict:
        return fold_verdict(rows, a, b, claim, folds, categories, seeds_b or seeds, metric, margin, role, seed, seeds_a)

    present = set(rows["arm"]) - set(drop)
    return ChapterVerdicts(
        headline=[v(FOR, b, f"FOR vs {b}", m) for m in metrics for b in (CLUSTER, GLOBAL)],
        forget=v(SUPERVISED, GLOBAL, "forgetting: supervised-only training vs CLIP's own embedding"),
        forget_base=v(SUPERVISED, GLOBAL, "supervised-only training vs CLIP's own embedding", role="base"),
        forget_start=v(SUPERVISED, UNTRAINED, "forgetting: supervised-only training vs the head's own start"),
        forget_start_base=v(SUPERVISED, UNTRAINED, "supervised-only training vs the head's own start", role="base"),
        specific=gain_verdict(rows, SUPERVISED, UNTRAINED, folds, seeds, primary, margin, seed) if len(folds) > 1 else None,
        repair=v(FOR, SUPERVISED, "pseudo-label loss on top of supervision"),
        others=[v(*p) for p in PAIRS if p[0] in present and p[1] in present],
        positive=v(PLANTED, SUPERVISED, "planted teacher with correct labels vs supervision alone"),
        negative=v(A_A_B, A_A, "A/A: supervised only's protocol on two disjoint sets of seeds", seeds_a=a_a.b,
                   seeds_b=a_a.a), primary=primary)


GAIN_ARMS = ("gain on the base categories", "gain on the novel categories")


def gain_verdict(rows: pd.DataFrame, arm: str, start: str, folds: Sequence[Sequence[str]], seeds: Sequence[int],
                 metric: str, margin: float, seed: int) -> Verdict:
    """Did training teach ``arm`` its labels more than the categories it never saw? Per (fold, seed)
    the mean gain over its start, ``arm`` minus ``start`` in ``metric``, over the fold's base
    categories (A) against the same over its novel ones (B), paired per (fold, seed): each fold is
    one trained head, so the folds are the units. 'A better': the base categories gained more;
    'equivalent': both gained alike within the margin, so what training learned is not specific
    to the labels it saw."""
    key = ["fold", "seed", "category"]
    runs = {a: rows[rows["arm"] == a].set_index(key) for a in (arm, start)}
    for a, r in runs.items():
        if r.empty:
            raise ValueError(f"no rows for arm {a!r}")
    gain = (runs[arm][metric] - runs[start][metric]).to_frame("gain").join(runs[arm]["role"])
    by = gain.groupby(["role", "seed", "fold"])["gain"].mean()  # categories without a relevant image (NaN) skipped
    m = [by.loc[role].unstack("fold").reindex(index=list(seeds), columns=range(len(folds))).to_numpy(np.float64)
         for role in ("base", "novel")]
    return compare(*m, claim=f"{arm}: gain over {start}, base vs novel categories ({metric})", arms=GAIN_ARMS,
                   unit="(fold, seed) mean gains", cluster_unit="folds (one trained head each)", margin=margin,
                   seed=seed)


SLOT_FIELDS = ("share", "learned_wins", "pairs", "queries", "queries_reordered", "queries_ap_changed",
               "cos_global", "cos_best_learned")


def global_slot_sentence(shares: Sequence[dict]) -> tuple[str, bool]:
    """From the fold loop's per-(fold, seed) records of
    :func:`fgclip.studies.for_retrieval.folds.global_slot_diagnostic`: the sentence, and whether
    "FOR + global slot" scores exactly as CLIP global in every run (no query's AP changed under
    any convention), in which case a verdict between the two says nothing about FOR's slots and
    the arm leaves the verdicts."""
    if not shares:
        raise ValueError("shares is empty: the fold loop recorded no global-slot share")
    missing = [f for f in SLOT_FIELDS if any(f not in r for r in shares)]
    if missing:
        raise ValueError(f"global-slot records lack the field(s) {missing}")
    tot = {f: sum(r[f] for r in shares) for f in SLOT_FIELDS}
    s = np.array([r["share"] for r in shares], dtype=float)
    n, rankings = len(shares), tot["queries"]
    most = max(r["learned_wins"] for r in shares)
    text = (f"Over {n} (fold, seed) runs, FOR's learned slots beat CLIP's global slot in {tot['learned_wins']} of "
            f"{tot['pairs']} (query, gallery image) pairs (at most {most} in one run; the global slot's share is "
            f"{s.min():.4f} at its lowest), every slot L2-normalised: CLIP's global embedding has a mean cosine "
            f"of {tot['cos_global'] / n:.3f} with the queries, FOR's best slot {tot['cos_best_learned'] / n:.3f}. "
            f"Those pairs changed the order of the gallery in {tot['queries_reordered']} of the {rankings} "
            f"(query, run) rankings and the AP of {tot['queries_ap_changed']}")
    if tot["queries_ap_changed"] == 0:
        return (text + ", so \"FOR + global slot\" scores exactly as CLIP global does on this gallery: its global "
                       "slot decides every ranking the metrics see, and a verdict between the two would be an "
                       "identity, not evidence that FOR's slots help or do no harm; the arm leaves the verdicts."), True
    return (text + f": the arm can differ from CLIP global only through those {tot['queries_ap_changed']} "
                   "rankings, so its verdicts say little about FOR's slots on their own."), False


def _learned_sentence(specific: Verdict | None, d) -> str:
    """What training taught the head, from the gain verdict (``d`` formats a difference and its interval)."""
    if specific is None:
        return (" With one fixed split there is one head per seed, too few units to pair the base categories' gain "
                "with the novel ones'.")
    return {A_BETTER: f" The base categories gained more from training than the novel ones ({d(specific)}): it "
                      f"learned the labels it was taught more than the categories it never saw.",
            EQUIVALENT: f" The base and the novel categories gained alike from training ({d(specific)}, within "
                        f"±{specific.margin:g}): what it learned is not specific to the labels it was taught.",
            B_BETTER: f" The novel categories gained more from training than the base ones ({d(specific)}): nothing "
                      f"it learned favours the labels it was taught."}.get(
        specific.verdict, f" Whether the base categories gained more than the novel ones cannot be told at this size "
                          f"({d(specific)}).")


def forgetting_sentence(forget: Verdict, forget_base: Verdict, forget_start: Verdict, forget_start_base: Verdict,
                        specific: Verdict | None, supervised: Selection) -> str:
    """Whether supervised-only training forgot the novel categories here, from the four verdicts
    (trained supervised-only minus CLIP's own embedding and minus the head's own untrained start,
    each on the novel and on the base categories), with the schedule it chose on validation.
    Below its own start on the novel categories is forgetting; below CLIP's own embedding is
    forgetting only where the base categories, whose labels it trains on, are not below it too
    (otherwise it is a weaker embedding throughout). ``specific`` (:func:`gain_verdict`) says what
    training learned: the labels it was taught only where the base categories gained more (None:
    one fixed split, not tested)."""
    below = lambda v: v.verdict == B_BETTER  # noqa: E731  (supervised only, arm A, worse than the reference)
    sched = f"(lr {supervised.lr:g} and {supervised.epochs} of {supervised.budget} epochs, chosen on validation)"
    how = lambda v: {A_BETTER: "above", B_BETTER: "below", EQUIVALENT: "equivalent to"}.get(  # noqa: E731
        v.verdict, "not distinguishable at this size from")
    d = lambda v: f"{v.difference:+.3f} {v.interval()}"  # noqa: E731
    detail = (f"supervised-only training {sched} came out {how(forget_start)} the head's own untrained start on the "
              f"novel categories ({d(forget_start)}) and {how(forget_start_base)} it on the base ones, whose labels "
              f"it trains on ({d(forget_start_base)}), and {how(forget)} CLIP's own embedding on the novel categories "
              f"({d(forget)}) and {how(forget_base)} it on the base ones ({d(forget_base)})")
    refs = [r for r, shown in (("CLIP's own embedding", below(forget) and not below(forget_base)),
                               ("the head's own start", below(forget_start))) if shown]
    if refs:
        return (f"Forgetting was shown here: {detail}; it fell below {' and '.join(refs)}, so the falsification "
                f"asks whether the pseudo-labels are what stops it.")
    learned = _learned_sentence(specific, d)
    weaker = (" Being below CLIP's embedding on the base categories too, and not below its own start, the head "
              "is a weaker embedding than CLIP's throughout, which is not forgetting of the novel categories."
              if below(forget) else "")
    return (f"Forgetting was not shown here: {detail}.{learned}{weaker} With nothing forgotten to repair, the "
            f"falsification can only ask whether the pseudo-label loss adds anything on top of supervision on the "
            f"novel categories, not whether it stops forgetting.")


def schedule_caveat(schedules: dict[str, Selection], arms: Sequence[str], what: str) -> str:
    """Which of ``arms`` (those ``what`` reads) chose a schedule the selection flags (best epoch
    within the budget's last P, or a lr at an end of the grid), so that what ``what`` reads is read
    at this grid and budget, not necessarily at each arm's best schedule (whatever it concludes,
    "cannot decide" included); a sentence saying so when none did."""
    missing = [a for a in arms if a not in schedules]
    if missing:
        raise ValueError(f"no schedule for the arm(s) {missing}")
    flagged = [f"{a}{schedules[a].caveat()}" for a in arms if schedules[a].caveat()]
    if not flagged:
        return f"No arm {what} reads chose a schedule the selection flags."
    budget = schedules[arms[0]].budget
    return (f"Of the arms {what} reads, {len(flagged)} of {len(arms)} chose a schedule the selection flags: "
            f"{'; '.join(flagged)}. So what {what} reads, it reads at this grid of learning rates and this budget "
            f"of {budget} epochs, not necessarily at each arm's best schedule.")


def underpowered_sentence(checks: Sequence[dict], central: dict, folds: Sequence[Sequence[str]],
                          categories: Sequence[str], train_s: float) -> str:
    """Which verdicts fail the power check (records of :func:`fgclip.verdicts.power_check`), and
    what the central one would cost, assuming its half-width shrinks as 1/sqrt(number of folds):
    the factor (half-width / target)^2, and the most the toy world allows (one category a fold)."""
    if not checks:
        raise ValueError("checks is empty: no verdict was power-checked")
    n_folds, n_categories = len(folds), len(categories)
    low = [c for c in checks if not c["met"]]
    names = "; ".join(f"{c['claim']} (half-width {c['half_width']:.3f}, target {c['target']:.3f}"
                      f"{', the margin: a negative control' if 'negative control' in c.get('rule', '') else ''})"
                      for c in low)
    head = (f"{len(low)} of the {len(checks)} verdicts are under-powered by that rule: {names}." if low else
            f"All {len(checks)} verdicts meet that rule.")
    if central["met"]:
        return head
    factor = (central["half_width"] / central["target"]) ** 2
    times = f"{factor:.1f}" if factor < 10 else f"{factor:.0f}"  # 4.4 is not 'about 4'
    if n_folds == 1:  # one fixed split: the categories are the resampled units
        return (head + f" For the central comparison to meet it would take about {times} times as many "
                f"categories (at the 1/√n rate); one fixed split cannot rotate.")
    most = n_categories / n_folds  # folds of one category each
    at_most = central["half_width"] / most ** 0.5
    why = (f"above the target of {central['target']:.3f}, so more folds alone cannot meet it: more seeds or more "
           f"categories would be needed" if at_most > central["target"] else
           "within the target, but not affordable in this chapter's budget")
    return (head + f" For the central comparison to meet it would take about {times} times as many folds "
            f"(at the 1/√n rate), about {factor * train_s / 3600:.1f} h of fold loop at this run's "
            f"{train_s:.0f} s; the {n_categories} categories allow at most {most:.0f} times as many folds (one "
            f"category each), which at that rate would leave a half-width of about {at_most:.3f}: {why}.")


def _count(n: int) -> str:
    return {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 8: "eight"}.get(n, str(n))


def a_a_sentence(negative: Verdict, others: Sequence[Verdict], selection_seeds: int = 2) -> str:
    """What the A/A says about the size of the chapter's noise: the half-width of its interval,
    where nothing differs but the seeds (the selection's included), set against the differences
    of ``others`` (a cautious yardstick: those comparisons pair arms trained from the same seeds,
    the A/A arms from different ones); and a lower bound on the seeds a side at which its
    half-width would fit within half the margin: its standard error taken to shrink as
    1/sqrt(seeds) and its t at the normal 1.96, which is smaller than any t of finite degrees of
    freedom (the ``selection_seeds`` of each side stay as many, so the sides' schedules do not
    average out)."""
    half = negative.half_width
    n = negative.n_seeds
    inside = [abs(v.difference) <= half for v in others]
    said = "; ".join(f"{v.claim} {v.difference:+.3f} ({'within' if i else 'beyond'} it)" for v, i in zip(others, inside))
    none = {1: "it is not", 2: "neither is"}.get(len(others), "none is")
    out = (f"A change of seeds alone, the selection included, moved supervised only by {negative.difference:+.3f} "
           f"{negative.interval()}: a half-width of {half:.3f} where nothing differs but the seeds. Against that "
           f"half-width (a cautious yardstick: the other comparisons pair arms trained from the same seeds): {said}"
           + (f", so at this size {none} shown to exceed what a change of seeds alone can make." if all(inside) else "."))
    if negative.standard_error is None or negative.margin is None:
        return out
    need = max(n, int(np.ceil(n * (negative.standard_error * 1.96 / (negative.margin / 2)) ** 2)))
    return out + (f" For its half-width to fit within half the margin (±{negative.margin / 2:g}) the A/A would need at "
                  f"least about {need} seeds a side (its standard error, {negative.standard_error:.3f} at {n}, taken to "
                  f"shrink as 1/√seeds; the {_count(selection_seeds)} selection seeds of each side stay "
                  f"{_count(selection_seeds)}). That is a bound, not a "
                  f"promise: the sides' choices of schedule do not average out, and the folds keep their share (the "
                  f"critique shows three A/As at twenty seeds a side).")


def findings(cv: ChapterVerdicts, falsification, power: dict, schedules: dict[str, Selection], margin: float,
             folds: Sequence[Sequence[str]], seeds: Sequence[int], texts: dict[str, str]) -> dict[str, str]:
    """The "What we found" sentences, keyed as the page glues them (``ch3-<key>``): every verdict's
    brief, the falsification's conclusion, the power check, and ``texts`` (sentences made
    elsewhere from the record: data, τ, forgetting, global slot, speed)."""
    brief = lambda a, b: cv.by_arms(a, b).brief()  # noqa: E731
    texts = dict(texts)
    lead = {"data": texts.pop("data")} if "data" in texts else {}  # the box opens with what the data are
    return {**lead, "forget": cv.forget.brief(), "forget-base": cv.forget_base.brief(), "forget-start": cv.forget_start.brief(),
            "forget-start-base": cv.forget_start_base.brief(), "specific": cv.specific.brief() if cv.specific else "not tested (one fixed split: one head per seed)",
            "for-cluster": brief(FOR, CLUSTER), "for-global": brief(FOR, GLOBAL), "repair": cv.repair.brief(),
            "planted": cv.positive.brief(), "a-a": cv.negative.brief(), "falsification": falsification.conclusion,
            "paper-head": brief(PAPER, FOR), "paper-cluster": brief(PAPER, CLUSTER), "paper-global": brief(PAPER, GLOBAL),
            "names-removed": brief(NAMES_REMOVED, FOR), "oracle": brief(ORACLE, FOR),
            "scaled-tau": brief(SCALED_TAU, FOR), "margin": f"±{margin:g} AP", "seeds": f"{len(folds)} folds x seeds "
            f"{list(seeds)}", "power": power_sentence(power), "converged": converged_sentence(schedules), **texts}
