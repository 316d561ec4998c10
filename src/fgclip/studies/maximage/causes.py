"""Chapter 1's rule for the cause of a seed below a floor, one rule for every arm.

A seed is an *outlier* when its arm's typical seed (the median of the others) clears every floor
and, against every floor the seed is below, it lies at least a margin below that typical seed: its
own failure, whose mechanism the chapter reads apart (an arm whose typical seed is below a floor
fails as an arm, not through one seed). Any other seed below a floor is its arm's: the arm as trained, when its typical
seeds clear the floor by less than the margin, or the arm's seed-to-seed spread, when they clear
it by more. :func:`cause_clause` says the reading in words; :func:`loss_rank`, :func:`diagnostics_beside` and
:func:`settles` read what sets an outlier apart (its validation loss, its collapse diagnostics,
its points off every object) against its arm's other seeds.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def _is_outlier(gaps: Mapping[str, Sequence[float]], k: int, margin: float) -> bool:
    """Seed k is below at least one floor, the arm's typical other seed (the median of their
    gaps) clears every floor, and against every floor seed k is below it lies at least ``margin``
    below that typical seed (``gaps``: floor -> g_i per seed of the arm). Where the typical seed
    is itself below a floor, the arm fails, and no seed of it is an outlier."""
    under = [n for n, g in gaps.items() if g[k] < 0]

    def typical(n: str) -> float:
        return float(np.median([x for i, x in enumerate(gaps[n]) if i != k]))
    return bool(under) and all(typical(n) >= 0 for n in gaps) and all(gaps[n][k] < typical(n) - margin for n in under)


def floor_cause(acc: Sequence[float], floors: Mapping[str, Sequence[float]], j: int, margin: float) -> dict:
    """Whose is seed j's place below its floors, the arm's or its own? With the gaps
    g_k^f = acc_k - f_k of every seed k of the arm to every floor f:

    * "outlier": median_{k != j} g_k^f >= 0 for every floor f, and g_j^f < median_{k != j} g_k^f
      - margin against every floor f it is below (its arm's typical seed clears every floor, and
      it lies a margin below that seed, however many seeds share its fate): the seed's own
      failure, whose mechanism is read apart; an arm whose typical seed is below a floor has no
      outlier;
    * "the arm as trained": else, if for every such f the mean gap of the other seeds that are no
      outliers is under ``margin``: the arm clears that floor by less than the margin;
    * "the arm's spread": else: the arm clears the floor by the margin on average, and its
      seed-to-seed spread reaches below it;
    * "not read": no other seed.

    ``acc`` and every floor: one value per seed of the arm. Returns {"cause", "floor" (the floor
    that decided: the one the typical other seed clears most), "others over it" (the median gap of
    the other seeds for an outlier, else the mean over the non-outlier others), "others median"
    (the median gap of the other seeds), "others range"}."""
    gaps = {n: [float(acc[k] - f[k]) for k in range(len(acc))] for n, f in floors.items()}
    under = [n for n in floors if gaps[n][j] < 0]
    if not under:
        raise ValueError(f"floor_cause: seed {j} is below none of {list(floors)}")
    others = [k for k in range(len(acc)) if k != j]
    if not others:
        return {"cause": "not read", "floor": under[0], "others over it": None, "others median": None, "others range": None}
    typical = [k for k in others if not _is_outlier(gaps, k, margin)] or others
    if _is_outlier(gaps, j, margin):
        floor = max(under, key=lambda n: float(np.median([gaps[n][k] for k in others])))
        centre, cause = float(np.median([gaps[floor][k] for k in others])), "outlier"
    else:
        floor = max(under, key=lambda n: float(np.mean([gaps[n][k] for k in typical])))  # the strictest reading of the arm
        centre = float(np.mean([gaps[floor][k] for k in typical]))
        cause = "the arm as trained" if centre < margin else "the arm's spread"
    return {"cause": cause, "floor": floor, "others over it": centre,
            "others median": float(np.median([gaps[floor][k] for k in others])),
            "others range": [min(gaps[floor][k] for k in others), max(gaps[floor][k] for k in others)]}


def _gap_words(floor: str, gap: float) -> str:
    return f"clear {floor} by {gap:.3f}" if gap >= 0 else f"sit {-gap:.3f} below {floor}"


def cause_clause(reading: Mapping, margin: float, mechanism: str = "", caveat: str = "", control: str = "") -> str:
    """:func:`floor_cause` in words; ``mechanism``: what was measured of the seed's failure;
    ``caveat``: the arm's selection caveat (:meth:`~fgclip.train.selection.Selection.caveat`),
    said where the arm is the cause; ``control``: what a control arm's construction removes."""
    if reading["cause"] == "not read":
        return "its arm has no other seed, so the arm and the seed cannot be told apart"
    lo, hi, floor, gap = *reading["others range"], reading["floor"], reading["others over it"]
    span_ = f"gaps {lo:+.3f} to {hi:+.3f}"
    if reading["cause"] == "outlier":
        return (f"an outlier (at least the margin {margin} below its arm's typical seed against every floor it is below: "
                f"its other seeds {_gap_words(floor, gap)} at the median, {span_}): " + (mechanism or "no mechanism read"))
    where = f"; {mechanism}" if mechanism else "; no mechanism of its own read"
    median = f" ({reading['others median']:+.3f} at the median)" if reading.get("others median") is not None else ""
    said = f"its arm's typical other seeds {_gap_words(floor, gap)} on average{median}, {span_}"
    if reading["cause"] == "the arm as trained":
        who = f"the arm, a control ({control})" if control else "the arm as trained"
        return (f"cause: {who}, not the seed ({said}; the arm clears it by less than the margin {margin}"
                + (f"; the arm's selection: {caveat}, so its design and its training cannot be told apart here"
                   if caveat and not control else "") + f"){where}")
    return f"cause: the arm's seed-to-seed spread, not a failure of its own ({said}){where}"


def span(shares: Sequence[float]) -> str:
    """A range of shares as the findings print it: "30%" when it rounds to one value, else "11%-44%"."""
    lo, hi = f"{min(shares):.0%}", f"{max(shares):.0%}"
    return lo if lo == hi else f"{lo}-{hi}"


def loss_rank(v: float, rest: Sequence[float], background: bool) -> str:
    """An outlier's validation loss v read against its arm's other seeds' (``rest``): as low as
    their median (it ranks as well as its arm's typical seed, so the loss does not tell its solution
    apart; with ``background``, the one on background), above every one of them (the loss itself
    ranks it last), or in between (the loss ranks it below the typical seed, not last)."""
    m = float(np.median(rest))
    if v <= m:
        return (f"it ranks as well as its arm's typical seed (validation loss at or below their median, {m:.3f})"
                + (", so the retrieval loss did not prefer its arm's solution to this one on background" if background else ""))
    if v > max(rest):
        return f"its validation loss is above every other seed's (median {m:.3f}): the retrieval loss itself ranks it last"
    return f"its validation loss lies above its arm's typical seed's ({m:.3f}), below the worst: the loss ranks it lower, not last"


def diagnostics_beside(seed: int, diag: Mapping[int, Mapping[str, float]], low: set[int], by: float
                       ) -> tuple[str, list[str]]:
    """A low seed's collapse diagnostics (``diag``: seed -> name -> share, validation images)
    beside its arm's seeds above the floors (those not in ``low``): the words, and as mechanisms
    each diagnostic at least ``by`` beyond every one of them (:func:`settles`' rule), or, where
    none is, that none sets it apart (nothing, where no seed is above the floors). The words start
    "on the validation images"; ("", []) where the seed's were not recorded."""
    if seed not in diag:
        return "", []
    words, mechanism = [], []
    above = [s for s in diag if s not in low]
    for n, x in diag[seed].items():
        up = [float(diag[s][n]) for s in above]
        words.append(f"{n} {x:.0%}" + (f" (its arm's seeds above the floors {span(up)})" if up else ""))
        if settles(float(x), up, by):
            mechanism.append(f"{n} {x:.0%} on the validation images, beyond every seed of its arm above the floors")
    neither = f"neither {' nor '.join(diag[seed])} sets it apart from its arm's seeds above the floors"
    return "on the validation images " + ", ".join(words), mechanism or ([neither] if above else [])


def settles(share: float, above: Sequence[float], by: float) -> bool:
    """The chapter's one rule: a seed below a floor *settles on background* when its share of
    points off every object is at least ``by`` above that of every seed of its arm above the
    floors (none above: not read)."""
    return bool(len(above)) and share >= max(above) + by


FIELDS = {"cause": "cause", "floor": "cause floor", "others over it": "others over it", "others median": "others median",
          "others range": "others range"}


def as_fields(reading: Mapping) -> dict:
    """A :func:`floor_cause` reading as a seed record's fields ("floor" becomes "cause floor")."""
    return {FIELDS[k]: reading[k] for k in FIELDS}


def from_fields(record: Mapping) -> dict:
    """The reading back from a record's fields (:func:`as_fields`), for :func:`cause_clause`."""
    return {k: record.get(f) for k, f in FIELDS.items()}
