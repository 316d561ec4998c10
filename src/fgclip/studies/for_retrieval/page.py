"""Chapter 3's verdicts and the sentences built from them.

:func:`chapter_verdicts` makes every comparison the chapter states in words, each through
:func:`fgclip.studies.for_retrieval.protocol.fold_verdict` (paired per (fold, category) and
seed, whole folds resampled). :func:`global_slot_sentence` says from the record whether
"FOR + global slot" can differ from CLIP global at all, and the arm leaves the verdicts when
it cannot. :func:`forgetting_sentence` says whether supervised-only training forgot the novel
categories here, against both references, and what the falsification can then ask.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...train.selection import Selection
from ...verdicts import A_BETTER, B_BETTER, EQUIVALENT, Verdict
from .folds import (CLUSTER, FIXED_TAU, FOR, GLOBAL, GLOBAL_SLOT, NAMES_REMOVED, ORACLE, PAPER, PLANTED, SCALED_TAU,
                    SHUFFLED, SUPERVISED, UNTRAINED)
from .protocol import converged_sentence, fold_verdict, power_sentence

PAIRS = [(CLUSTER, GLOBAL, "clustering vs the global embedding"), (FOR, UNTRAINED, "FOR vs the head's own start"),
         (GLOBAL_SLOT, FOR, "adding CLIP's global embedding as one more slot"),
         (GLOBAL_SLOT, GLOBAL, "FOR + global slot vs global"), (FIXED_TAU, FOR, "paper's fixed τ vs held-out τ"),
         (PAPER, FOR, "the paper's head (frozen pooling) vs FOR with a trainable W_c"),
         (SCALED_TAU, FOR, "vocabulary-scaled τ vs held-out τ"), (ORACLE, FOR, "oracle: wrong pseudo-labels removed"),
         (NAMES_REMOVED, FOR, "novel names removed from the teacher vocabulary")]


@dataclass
class ChapterVerdicts:
    headline: list[Verdict]  # FOR vs Cluster-CLIP and vs CLIP global, under each metric
    forget: Verdict  # supervised only vs CLIP global, novel
    forget_base: Verdict  # the same on the base categories
    forget_start: Verdict  # supervised only vs the untrained head, novel
    repair: Verdict  # FOR vs supervised only: the falsification's test
    others: list[Verdict]
    positive: Verdict  # planted teacher vs supervised only
    negative: Verdict  # shuffled planted labels vs supervised only
    primary: str = ""  # the metric every verdict but the headline's others is on

    @property
    def central(self) -> list[Verdict]:
        return [self.forget, self.forget_base, self.forget_start, self.repair]

    @property
    def all(self) -> list[Verdict]:
        """Every verdict, in the order results.json lists them."""
        return self.headline + self.central + self.others + [self.positive, self.negative]

    def by_arms(self, a: str, b: str) -> Verdict:
        """The first verdict of arm a against arm b (the headline's on its primary metric)."""
        return next(v for v in self.headline if v.arms == (a, b) and v.claim.endswith(f" {self.primary})")) \
            if a == FOR and b in (CLUSTER, GLOBAL) else next(v for v in self.all if v.arms == (a, b))


def chapter_verdicts(rows: pd.DataFrame, folds: Sequence[Sequence[str]], categories: Sequence[str],
                     seeds: Sequence[int], metrics: Sequence[str], primary: str, margin: float, seed: int,
                     drop: Sequence[str] = ()) -> ChapterVerdicts:
    """Every comparison of the chapter; arms in ``drop`` (and arms the run left out) get none."""
    def v(a: str, b: str, claim: str, metric: str = primary, role: str = "novel") -> Verdict:
        return fold_verdict(rows, a, b, claim, folds, categories, seeds, metric, margin, role, seed)

    present = set(rows["arm"]) - set(drop)
    return ChapterVerdicts(
        headline=[v(FOR, b, f"FOR vs {b}", m) for m in metrics for b in (CLUSTER, GLOBAL)],
        forget=v(SUPERVISED, GLOBAL, "forgetting: supervised-only training vs CLIP's own embedding"),
        forget_base=v(SUPERVISED, GLOBAL, "supervised-only training vs CLIP's own embedding", role="base"),
        forget_start=v(SUPERVISED, UNTRAINED, "forgetting: supervised-only training vs the head's own start"),
        repair=v(FOR, SUPERVISED, "pseudo-label loss on top of supervision"),
        others=[v(*p) for p in PAIRS if p[0] in present and p[1] in present],
        positive=v(PLANTED, SUPERVISED, "planted teacher with correct labels vs supervision alone"),
        negative=v(SHUFFLED, SUPERVISED, "shuffled correct labels vs supervision alone"), primary=primary)


def global_slot_sentence(shares: Sequence[dict]) -> tuple[str, bool]:
    """From the share of (query, image) pairs whose max over "FOR + global slot" is the global
    slot, per (fold, seed): the sentence, and whether the arm is CLIP global by construction
    (the global slot won every pair of every run, so its ranking is CLIP global's)."""
    if not shares:
        raise ValueError("shares is empty: the fold loop recorded no global-slot share")
    s = np.array([r["share"] for r in shares], dtype=float)
    same = bool((s == 1.0).all())
    text = (f"The global slot gave the maximum in {s.mean():.4f} of the (query, gallery image) pairs on average "
            f"(lowest {s.min():.4f} over {len(s)} (fold, seed) runs)")
    if same:
        return (text + ": in every pair of every run, so \"FOR + global slot\" ranks exactly as CLIP global does, "
                       "by construction; it is left out of the verdicts."), True
    return text + ": the learned slots win some pairs, so the arm can differ from CLIP global.", False


def forgetting_sentence(forget: Verdict, forget_start: Verdict, supervised: Selection) -> str:
    """Whether supervised-only training forgot the novel categories here, from both verdicts,
    with the schedule it chose on validation."""
    def below(v: Verdict) -> bool:  # supervised only (arm A) worse than the reference
        return v.verdict == B_BETTER

    sched = f"(lr {supervised.lr:g} and {supervised.epochs} of {supervised.budget} epochs, chosen on validation)"
    how = lambda v: {A_BETTER: "above", B_BETTER: "below", EQUIVALENT: "equivalent to"}.get(  # noqa: E731
        v.verdict, "not distinguishable at this size from")
    detail = (f"on the novel categories supervised-only training {sched} came out {how(forget)} CLIP's own "
              f"embedding and {how(forget_start)} the head's own start")
    if below(forget) or below(forget_start):
        refs = " and ".join(r for r, v in (("CLIP's own embedding", forget), ("the head's own start", forget_start))
                            if below(v))
        return (f"Forgetting was shown here: {detail}; it fell below {refs}, so the falsification asks whether "
                f"the pseudo-labels are what stops it.")
    return (f"Forgetting was not shown here: {detail}. With nothing forgotten to repair, the falsification "
            f"can only ask whether the pseudo-label loss adds anything on top of supervision on the novel "
            f"categories, not whether it stops forgetting.")


def findings(cv: ChapterVerdicts, falsification, power: dict, schedules: dict[str, Selection], margin: float,
             folds: Sequence[Sequence[str]], seeds: Sequence[int], texts: dict[str, str]) -> dict[str, str]:
    """The "What we found" sentences, keyed as the page glues them (``ch3-<key>``): every verdict's
    brief, the falsification's conclusion, the power check, and ``texts`` (sentences made
    elsewhere from the record: data, τ, forgetting, global slot, speed)."""
    brief = lambda a, b: cv.by_arms(a, b).brief()  # noqa: E731
    texts = dict(texts)
    slot = [v for v in cv.others if v.arms == (GLOBAL_SLOT, GLOBAL)]
    if slot and slot[0].difference == slot[0].ci_low == slot[0].ci_high == 0 and "global-slot" in texts:
        texts["global-slot"] += (" Yet the pairs they win changed no ranking that the metric sees: FOR + global "
                                 "slot against CLIP global is " + slot[0].brief() + ".")
    lead = {"data": texts.pop("data")} if "data" in texts else {}  # the box opens with what the data are
    return {**lead, "forget": cv.forget.brief(), "forget-base": cv.forget_base.brief(), "forget-start": cv.forget_start.brief(),
            "for-cluster": brief(FOR, CLUSTER), "for-global": brief(FOR, GLOBAL), "repair": cv.repair.brief(),
            "planted": cv.positive.brief(), "shuffled": cv.negative.brief(), "falsification": falsification.conclusion,
            "paper-head": brief(PAPER, FOR), "names-removed": brief(NAMES_REMOVED, FOR), "oracle": brief(ORACLE, FOR),
            "scaled-tau": brief(SCALED_TAU, FOR), "margin": f"±{margin:g} AP", "seeds": f"{len(folds)} folds x seeds "
            f"{list(seeds)}", "power": power_sentence(power), "converged": converged_sentence(schedules), **texts}
