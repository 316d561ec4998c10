"""One protocol behind every comparison the book states in words.

Two arms (a method and a baseline, or two variants) are scored on the same units (images,
categories, captions, phrases) under the same training seeds (or fold x seed replicates).
:func:`compare` turns the paired scores into a :class:`Verdict`: the mean difference, an
interval that accounts for both sources of chance, and one of four outcomes, judged against
a margin of practical equivalence m > 0 declared before the run (a chapter parameter):

* ``equivalent``: the whole interval lies inside [-m, +m]       (eq-verdict-equivalent)
  (no difference that matters, even if the interval excludes zero),
* ``A better``: otherwise, the interval lies above zero and most seeds agree,
* ``B better``: otherwise, the interval lies below zero and most seeds agree,
* ``cannot tell``: anything else ("cannot tell at this size").

The estimate (the paper-free notation of ``book/notation.md``: D[s, u] = a[s, u] - b[s, u]
for seed s and unit u, units grouped into clusters k such as the image of a phrase) is

    d = sum_{s,u} D[s, u] / #observed                                         (eq-verdict-mean)

and its standard error has two parts that add:

    SE^2 = V_seed + V_unit,   V_seed = var_s(m_s) / S,   m_s = mean_u D[s, u]   (eq-verdict-se)

V_unit is a cluster bootstrap: whole clusters of the seed-averaged differences are
resampled with replacement (numpy, seeded), so phrases of one image or captions of one
scene move together. V_seed is the between-seed variance of the per-seed means. The
interval is d +/- t_nu SE with Welch-Satterthwaite degrees of freedom

    nu = SE^4 / (V_seed^2 / (S - 1) + V_unit^2 / (K - 1)).                   (eq-verdict-df)

Why not a plain percentile bootstrap that also resamples the seeds: with 3 seeds a resampled
seed level has 10 distinct draws and underestimates the between-seed variance by (S-1)/S,
so its 95% interval covers a null difference far less often than 95% when seeds disagree
(``tests/test_verdicts.py`` measures both). Student's t with the seeds' degrees of freedom
is the standard small-sample correction; when the seeds agree closely, nu grows towards
the number of clusters and the interval is the cluster bootstrap's.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import stats

A_BETTER = "A better"
B_BETTER = "B better"
EQUIVALENT = "equivalent"
CANNOT_TELL = "cannot tell"
OUTCOMES = (A_BETTER, B_BETTER, EQUIVALENT, CANNOT_TELL)
CANNOT_DECIDE = "the test cannot decide here"


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`compare`; ``difference`` is always mean(A) - mean(B)."""

    claim: str
    arms: tuple[str, str]
    mean_a: float
    mean_b: float
    difference: float
    ci_low: float
    ci_high: float
    confidence: float
    n_seeds: int
    n_units: int
    n_clusters: int
    unit: str
    cluster_unit: str
    seeds_agreeing: int
    verdict: str
    higher_is_better: bool = True
    seed_differences: tuple[float, ...] = field(default=())
    margin: float | None = None  # the declared margin of practical equivalence m (None: none declared)
    standard_error: float | None = None  # sqrt of eq-verdict-se's se^2, the interval's half-width over its t
    design: str = "crossed"  # "crossed": seeds score the same units (eq-verdict-se); "nested": each unit one seed's (eq-verdict-se-nested)

    @property
    def half_width(self) -> float:
        """(hi - lo) / 2, the interval's half-width."""
        return (self.ci_high - self.ci_low) / 2

    @property
    def winner(self) -> str | None:
        """The better arm's name, or None when the verdict is 'equivalent' or 'cannot tell'."""
        return {A_BETTER: self.arms[0], B_BETTER: self.arms[1]}.get(self.verdict)

    @property
    def outcome(self) -> str:
        """The verdict in the arms' own words: '<arm> better', 'equivalent within ±m' or
        'cannot tell at this size'."""
        if self.verdict == EQUIVALENT:
            return f"equivalent within ±{self.margin:g}"
        return f"{self.winner} better" if self.winner else "cannot tell at this size"

    def size(self) -> str:
        """'3 seeds x 480 phrases in 120 images', the sample the interval rests on."""
        seeds = f"{self.n_seeds} seed{'s' if self.n_seeds != 1 else ''}"
        units = f"{self.n_units} {self.unit}"
        if self.n_clusters != self.n_units:
            units += f" in {self.n_clusters} {self.cluster_unit}"
        return f"{seeds} x {units}"

    def _ci_digits(self, digits: int) -> int:
        """One digit more where a bound of the interval rounds onto ±margin: there the verdict
        turns on a digit the printout would hide (0.0496 'equivalent', 0.0501 'cannot tell')."""
        m = self.margin
        near = m is not None and any(round(abs(x), digits) == round(m, digits) for x in (self.ci_low, self.ci_high))
        return digits + 1 if near else digits

    def interval(self, digits: int = 3) -> str:
        """'[lo, hi]' as every printout shows the interval (a fourth digit where a bound rounds onto the margin)."""
        d = self._ci_digits(digits)
        return f"[{self.ci_low:+.{d}f}, {self.ci_high:+.{d}f}]"

    def _excludes_zero(self) -> str:
        """For an 'equivalent' whose interval excludes 0: which arm is ahead, by less than the margin."""
        if self.verdict != EQUIVALENT or self.ci_low <= 0 <= self.ci_high:
            return ""
        ahead = self.arms[0] if (self.ci_low > 0) == self.higher_is_better else self.arms[1]
        return f" ({ahead} ahead, by less than the margin: the interval excludes 0)"

    def sentence(self, digits: int = 3) -> str:
        """The sentence a chapter prints for this comparison."""
        a, b = self.arms
        pct, d = f"{self.confidence:.0%}", self._ci_digits(digits)
        return (f"{self.claim}: {a} {self.mean_a:.{digits}f} vs {b} {self.mean_b:.{digits}f}, "
                f"difference {self.difference:+.{digits}f} ({pct} CI {self.ci_low:+.{d}f} "
                f"to {self.ci_high:+.{d}f}; {self.size()}; {self.seeds_agreeing} of "
                f"{self.n_seeds} seeds agree in sign): **{self.outcome}**{self._excludes_zero()}.")

    def brief(self, digits: int = 3) -> str:
        """The comparison as a clause for prose: both means, the difference, its interval
        and the outcome (:meth:`sentence` adds the claim, the units and the seeds)."""
        a, b = self.arms
        return (f"{a} {self.mean_a:.{digits}f} vs {b} {self.mean_b:.{digits}f}, difference "
                f"{self.difference:+.{digits}f} {self.interval(digits)}, **{self.outcome}**{self._excludes_zero()}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe record with the keys every chapter's results.json carries."""
        d = asdict(self)
        d["arms"] = list(self.arms)
        d["seed_differences"] = list(self.seed_differences)
        d["outcome"] = self.outcome
        return {k: (float(v) if isinstance(v, np.floating) else v) for k, v in d.items()}


def _as_matrix(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]  # one seed
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(f"{name} must be (n_seeds, n_units) with at least 2 units, got shape {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError(f"{name} contains infinite values")
    return arr


def _cluster_index(clusters, n_units: int) -> tuple[np.ndarray, int]:
    if clusters is None:
        return np.arange(n_units), n_units
    labels = np.asarray(clusters)
    if labels.shape != (n_units,):
        raise ValueError(f"clusters must give one label per unit ({n_units}), got shape {labels.shape}")
    _, index = np.unique(labels, return_inverse=True)
    return index, int(index.max()) + 1


def cluster_bootstrap_var(values: np.ndarray, cluster: np.ndarray, n_clusters: int,
                          n_resamples: int, rng: np.random.Generator) -> float:
    """Bootstrap variance of a mean whose units are resampled by whole clusters.

    values: (n_units,) with NaN for units without a score; cluster: (n_units,) in 0..K-1.
    Each resample draws K clusters with replacement (multinomial counts w_k) and takes
    sum_k w_k S_k / sum_k w_k N_k, with S_k, N_k the cluster's sum and count.
    """
    ok = ~np.isnan(values)
    sums = np.bincount(cluster[ok], weights=values[ok], minlength=n_clusters)  # (K,)
    counts = np.bincount(cluster[ok], minlength=n_clusters).astype(np.float64)  # (K,)
    weights = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters),
                              size=n_resamples).astype(np.float64)  # (B, K)
    denom = weights @ counts
    means = (weights @ sums)[denom > 0] / denom[denom > 0]  # (B',)
    return float(means.var(ddof=1)) if means.size > 1 else 0.0


def compare(a, b, *, claim: str, arms: tuple[str, str], unit: str, clusters=None,
            cluster_unit: str = "clusters", seed: int = 0, confidence: float = 0.95,
            n_resamples: int = 2000, higher_is_better: bool = True,
            margin: float | None = None) -> Verdict:
    """Compare arm A with arm B on paired scores a[s, u], b[s, u] (eq-verdict-mean, eq-verdict-se,
    eq-verdict-df, eq-verdict-equivalent; eq-verdict-se-nested when every unit is scored by one
    seed only, a fresh test draw per seed).

    a, b: (n_seeds, n_units) arrays, or (n_units,) for one seed; NaN marks a unit that a
    seed did not score (it must be NaN in both arms). clusters: one label per unit; units
    with the same label are resampled together (phrases clustered by image, categories by
    the head trained on them). With ``higher_is_better=False`` (an error rate, a latency)
    'A better' means A is lower. ``margin``: the margin of practical equivalence m > 0,
    declared before the run; without one, 'equivalent' is never the outcome.
    """
    if margin is not None and not margin > 0:
        raise ValueError(f"margin must be > 0 (or None), got {margin}")
    x, y = _as_matrix(a, "a"), _as_matrix(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same shape, got {x.shape} and {y.shape}")
    if not np.array_equal(np.isnan(x), np.isnan(y)):
        raise ValueError("a and b must have NaN (unscored units) in the same places")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if len(arms) != 2 or arms[0] == arms[1]:
        raise ValueError(f"arms must name two different arms, got {arms!r}")
    diff = x - y  # (S, U)
    observed = ~np.isnan(diff)
    if not observed.any(axis=1).all():
        raise ValueError("every seed must score at least one unit")
    cluster, n_clusters = _cluster_index(clusters, diff.shape[1])
    n_seeds = diff.shape[0]
    d = float(np.nanmean(diff))
    seed_means = np.nanmean(diff, axis=1)  # (S,) m_s
    rng = np.random.default_rng(seed)
    # a unit no seed scored (chapter 3: a category never in the role, or without a relevant image)
    # stays NaN, which the bootstrap skips; its mean is not taken, so numpy has no empty slice to
    # warn about, and every other unit's mean is nanmean's own
    unit_means = np.full(diff.shape[1], np.nan)
    scored = observed.any(axis=0)
    unit_means[scored] = np.nanmean(diff[:, scored], axis=0)
    v_unit = cluster_bootstrap_var(unit_means, cluster, n_clusters, n_resamples, rng)
    nested = n_seeds > 1 and bool((observed.sum(axis=0) == 1).all())
    q = 0.5 + confidence / 2
    if nested:
        se, half = _nested_half(seed_means, observed.sum(axis=1), d, v_unit, n_clusters, q)
    else:
        v_seed = float(seed_means.var(ddof=1)) / n_seeds if n_seeds > 1 else 0.0
        se, half = _crossed_half(v_seed, v_unit, n_seeds, n_clusters, q)
    low, high = d - half, d + half
    sign = np.sign(d)
    agreeing = int((np.sign(seed_means) == sign).sum()) if sign != 0 else 0
    majority = agreeing * 2 > n_seeds
    above, below = low > 0 and majority, high < 0 and majority
    if not higher_is_better:
        above, below = below, above
    inside = margin is not None and -margin <= low and high <= margin
    verdict = EQUIVALENT if inside else A_BETTER if above else B_BETTER if below else CANNOT_TELL
    return Verdict(claim=claim, arms=(str(arms[0]), str(arms[1])),
                   mean_a=float(np.nanmean(x)), mean_b=float(np.nanmean(y)), difference=d,
                   ci_low=float(low), ci_high=float(high), confidence=confidence,
                   n_seeds=n_seeds, n_units=int(observed.any(axis=0).sum()),
                   n_clusters=n_clusters, unit=unit, cluster_unit=cluster_unit,
                   seeds_agreeing=agreeing, verdict=verdict, higher_is_better=higher_is_better,
                   seed_differences=tuple(float(m) for m in seed_means), margin=margin,
                   standard_error=float(se), design="nested" if nested else "crossed")


def _crossed_half(v_seed: float, v_unit: float, n_seeds: int, n_clusters: int, q: float) -> tuple[float, float]:
    """Seeds that score the same units (eq-verdict-se, eq-verdict-df): SE^2 = V_seed + V_unit,
    t at Welch-Satterthwaite's nu; (SE, half-width t_{nu, q} SE)."""
    se2 = v_seed + v_unit
    if se2 == 0.0:
        return 0.0, 0.0
    terms = (v_seed ** 2 / (n_seeds - 1) if n_seeds > 1 else 0.0) + \
            (v_unit ** 2 / (n_clusters - 1) if n_clusters > 1 else 0.0)
    nu = se2 ** 2 / terms if terms > 0 else np.inf
    return float(np.sqrt(se2)), float(stats.t.ppf(q, nu) * np.sqrt(se2))


def _nested_half(seed_means: np.ndarray, counts: np.ndarray, d: float, v_unit: float, n_clusters: int,
                 q: float) -> tuple[float, float]:
    """Each unit scored by one seed only (a fresh test draw per seed; eq-verdict-se-nested). The
    pooled mean d = sum_s w_s m_s (w_s = n_s / N) varies with its seeds' means, which already hold
    their units' sampling noise, so V_unit is not added to it:
    V_seed = S / (S - 1) sum_s w_s^2 (m_s - d)^2 (var(m_s) / S for equal n_s), and the half-width
    is the larger of the two parts' own t intervals, max(t_{S-1} sqrt(V_seed), t_{K-1} sqrt(V_unit)),
    which does not jump where one part overtakes the other; (SE of the larger part, half-width)."""
    s = len(seed_means)
    w = counts / counts.sum()  # (S,) w_s
    v_seed = float(s / (s - 1) * np.sum(w ** 2 * (seed_means - d) ** 2))
    by_seed = float(stats.t.ppf(q, s - 1) * np.sqrt(v_seed))
    by_unit = float(stats.t.ppf(q, n_clusters - 1) * np.sqrt(v_unit)) if n_clusters > 1 else 0.0
    return (float(np.sqrt(v_seed)), by_seed) if by_seed >= by_unit else (float(np.sqrt(v_unit)), by_unit)


@dataclass(frozen=True)
class Falsification:
    """A falsification test read through its two controls."""

    test: Verdict
    positive: Verdict
    negative: Verdict
    effect: str
    positive_passed: bool
    negative_passed: bool

    @property
    def controls_pass(self) -> bool:
        return self.positive_passed and self.negative_passed

    @property
    def conclusion(self) -> str:
        """The test's outcome when both controls behaved, else 'the test cannot decide here'."""
        return self.test.outcome if self.controls_pass else CANNOT_DECIDE

    def _negative_words(self) -> str:
        """How the negative control behaved: quiet (equivalent), fired (a side), or neither, and
        then whether its interval was too wide to fit the margin at all (it could not pass)."""
        neg = self.negative
        if self.negative_passed:
            return "stayed quiet"
        if neg.verdict in (A_BETTER, B_BETTER):
            return "did NOT stay quiet"
        if neg.half_width > neg.margin:
            return (f"could NOT show equivalence: its interval's half-width, {neg.half_width:.3f}, is wider than the "
                    f"margin ±{neg.margin:g}, so at this size it could not have passed")
        return f"was NOT shown equivalent within ±{neg.margin:g}"

    def sentence(self) -> str:
        pos = "fired" if self.positive_passed else "did NOT fire"
        neg = self._negative_words()
        return (f"{self.test.claim}: positive control ({self.positive.claim}) {pos}, negative "
                f"control ({self.negative.claim}) {neg}; conclusion: **{self.conclusion}**.")

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test.to_dict(), "positive_control": self.positive.to_dict(),
                "negative_control": self.negative.to_dict(), "effect": self.effect,
                "positive_passed": self.positive_passed, "negative_passed": self.negative_passed,
                "controls_pass": self.controls_pass, "conclusion": self.conclusion}


def falsify(test: Verdict, positive: Verdict, negative: Verdict, effect: str = A_BETTER) -> Falsification:
    """Read a test through its controls.

    The positive control is a planted setting where the effect must show: it passes when
    its verdict is ``effect``. The negative control is a setting where it must not: it
    passes only when its verdict is 'equivalent', its interval inside the margin declared
    for it (a 'cannot tell' whose interval reaches half the effect shows nothing).
    """
    if effect not in (A_BETTER, B_BETTER):
        raise ValueError(f"effect must be {A_BETTER!r} or {B_BETTER!r}, got {effect!r}")
    if negative.margin is None:
        raise ValueError(f"negative control {negative.claim!r} declares no margin, so it can never be 'equivalent'")
    negative_passed = negative.verdict == EQUIVALENT
    return Falsification(test=test, positive=positive, negative=negative, effect=effect,
                         positive_passed=positive.verdict == effect, negative_passed=negative_passed)


def power_check(v: Verdict, margin: float | None = None, null: bool = False) -> dict[str, Any]:
    """Is a comparison's interval narrow enough to decide? Its half-width (hi - lo) / 2 against
    the target max(|difference|, margin) / 2 (``margin`` defaults to the verdict's own); a record
    for results.json, never an assertion. ``null``: a negative control, which passes only as
    "equivalent", so the target is the margin itself (a wider interval cannot fit within
    [-margin, +margin] wherever it lies)."""
    m = v.margin if margin is None else margin
    half = v.half_width
    target = (m or 0.0) if null else 0.5 * max(abs(v.difference), m or 0.0)
    return {"claim": v.claim, "arms": list(v.arms), "n_seeds": v.n_seeds, "n_clusters": v.n_clusters,
            "half_width": float(half), "target": float(target), "met": bool(half <= target),
            "rule": "half-width <= margin (negative control)" if null else "half-width <= max(|difference|, margin) / 2"}


def verdict_records(verdicts: Iterable[Verdict]) -> list[dict[str, Any]]:
    """The ``verdicts`` list of a chapter's results.json."""
    return [v.to_dict() for v in verdicts]


def verdict_table(verdicts: Sequence[Verdict], digits: int = 3):
    """A pandas table of verdicts, one row each, for display in a chapter."""
    import pandas as pd

    rows = [{"claim": v.claim, "A": v.arms[0], "B": v.arms[1], "mean A": v.mean_a,
             "mean B": v.mean_b, "A - B": v.difference,
             f"{v.confidence:.0%} CI": f"[{v.ci_low:+.{digits}f}, {v.ci_high:+.{digits}f}]",
             "margin": "-" if v.margin is None else f"±{v.margin:g}",
             "sample": v.size(), "verdict": v.outcome} for v in verdicts]
    return pd.DataFrame(rows).round(digits)
