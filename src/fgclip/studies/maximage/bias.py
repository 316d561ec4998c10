"""Chapter 1's centre-bias test: the main arm trained on toy worlds of rising centre bias b,
each evaluated on its own test split and cross-evaluated on the unbiased (b = 0) test.

A grounded model of fixed accuracy a has margin a - c(b) over a centre baseline whose
accuracy c(b) rises with b, so a shrinking margin is no evidence of a learned prior. What
can answer: (1) pointing on the b = 0 test of a model trained at b against the one trained
at 0; (2) the share of argmaxes in the centre cells on the b = 0 test of the most biased
model against the b = 0 model, read through two controls: a planted prior (the most biased
model's own shares moved to lie ``share_margin`` above the b = 0 model's, the test's own
noise) must show the excess, and a replicate of the b = 0 model (the same arm at fresh
training seeds) must come out equivalent to it within the margin.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from ... import verdicts
from ...methods.maximage import MaxImageHeads
from . import evaluation as ev
from .data import Split

Point = tuple[float, float]


class BiasSweep(NamedTuple):
    table: pd.DataFrame  # one row per (train_bias, seed): :func:`fgclip.studies.maximage.evaluation.bias_records`
    on_zero: dict[float, np.ndarray]  # train bias -> (S, K0) hits on the bias-0 test
    share_zero: dict[float, np.ndarray]  # train bias -> (S, K0) 1[argmax in the centre cells]
    zero: Split | None  # the bias-0 test split (None when the sweep did not run)
    zero_keep: np.ndarray | None  # (K0,) its phrases the area filter keeps
    zero_points: list[list[Point]]  # per seed, the bias-0 model's points on the bias-0 test
    replicate_share: np.ndarray | None = None  # (S, K0) centre share of the bias-0 arm at fresh seeds
    replicate_table: pd.DataFrame | None = None  # its rows (as ``table``'s; seeds :func:`replicate_seeds`)


def replicate_seeds(seeds: Sequence[int]) -> list[int]:
    """The fresh training seeds of the bias-0 replicate: each seed moved by len(seeds), so
    none is one of ``seeds`` when they are consecutive (the chapter's are)."""
    return [s + len(seeds) for s in seeds]


def centre_bias_sweep(levels: Sequence[float],
                      world_at: Callable[[float], tuple[Split, list[MaxImageHeads]]],
                      seeds: Sequence[int], min_box_area: float, area_rule: str, mode: str
                      ) -> BiasSweep:
    """Run the sweep over ``levels`` (must hold 0.0; [] returns an empty sweep).

    ``world_at(b)`` returns the test split of the world with centre bias b and the heads
    trained on that world, one per seed; at b = 0 it may return twice as many, the second
    half trained at fresh seeds (:func:`replicate_seeds`, the replicate of the negative
    control), whose rows (pointing, floors, centre share) are ``replicate_table``.
    """
    levels = sorted(levels)
    if levels and levels[0] != 0.0:
        raise ValueError(f"bias_levels needs 0.0 for the cross-evaluation, got {levels}")
    rows, on_zero, share_zero = [], {}, {}
    zero = zero_keep = None
    zero_points: list[list[Point]] = []
    replicate = replicate_rows = None
    for bias in levels:
        test, heads = world_at(bias)
        keep = ev.evaluated(test, min_box_area, area_rule)
        if bias == 0.0:
            zero, zero_keep = test, keep
            extra, heads = heads[len(seeds):], heads[:len(seeds)]
            if extra and len(extra) != len(seeds):
                raise ValueError(f"world_at(0.0) returned {len(seeds) + len(extra)} heads; expected {len(seeds)} or {2 * len(seeds)}")
            if extra:
                replicate_rows, _, replicate, _ = ev.bias_records(0.0, replicate_seeds(seeds), extra, test, keep, test, keep, mode)
        r, on_zero[bias], share_zero[bias], pts = ev.bias_records(bias, seeds, heads, test, keep,
                                                                   zero, zero_keep, mode)
        rows += r
        zero_points = pts if bias == 0.0 else zero_points
    return BiasSweep(pd.DataFrame(rows), on_zero, share_zero, zero, zero_keep, zero_points, replicate,
                     None if replicate_rows is None else pd.DataFrame(replicate_rows))


def centre_prior_falsification(biased: np.ndarray, zero: np.ndarray, planted: np.ndarray,
                               replicate: np.ndarray, images: np.ndarray, share_margin: float, seed: int,
                               top: float = 0.9, label: str = "") -> verdicts.Falsification:
    """The centre-prior test on (S, K0) centre-cell shares on the bias-0 test: the model
    trained at bias ``top`` against the bias-0 model must show more ('A better'); the planted
    prior (the biased arm's shares re-centred ``share_margin`` above the bias-0 model's,
    :func:`fgclip.studies.maximage.evaluation.planted_effect_scores`) must too (positive control); the bias-0 arm at fresh
    seeds against it must be 'equivalent' within ``share_margin`` (negative control). ``label``
    (e.g. "N-Pair, dot score, ") opens every arm's name and claim: the arm the sweep trained."""
    def cmp(a: str, x: np.ndarray, claim: str) -> verdicts.Verdict:
        return verdicts.compare(x, zero, claim=label + claim, arms=(label + a, f"{label}trained at bias 0.0"),
                                unit="phrases", clusters=images, cluster_unit="images", seed=seed, margin=share_margin)

    return verdicts.falsify(cmp(f"trained at bias {top}", biased, "more argmaxes in the centre cells on the bias-0 test"),
                            cmp(f"trained at bias {top}, re-centred a margin above bias 0.0", planted, "planted centre prior"),
                            cmp("bias 0, fresh seeds", replicate, "the bias-0 arm against itself at fresh seeds"))


def bias_verdicts(sweep: BiasSweep, seed: int, margin: float, share_margin: float, label: str = ""
                  ) -> tuple[list[verdicts.Verdict], verdicts.Falsification]:
    """The cross-evaluation verdicts (each bias against bias 0 on the bias-0 test, pointing
    ``margin``) and the centre-prior falsification of the most biased model
    (:func:`centre_prior_falsification`); phrases clustered by image. ``label`` opens the arm
    names and claims (the sweep's arm, when it is not the chapter's main one)."""
    if sweep.zero is None or sweep.replicate_share is None:
        raise ValueError("the sweep did not run (no bias level, or no fresh-seed replicate at bias 0): nothing to judge")
    zero, keep = sweep.zero, sweep.zero_keep
    images = ev.kept_images(zero, keep)
    cross = [verdicts.compare(sweep.on_zero[b], sweep.on_zero[0.0], arms=(f"{label}trained at bias {b}",
                                                                          f"{label}trained at bias 0.0"),
                              claim=f"{label}pointing on the bias-0 test, a model trained at bias {b} against one trained at 0.0",
                              unit="phrases", clusters=images, cluster_unit="images", seed=seed, margin=margin)
             for b in sweep.on_zero if b != 0.0]
    top = max(sweep.on_zero)
    planted = ev.planted_effect_scores(sweep.share_zero[top], sweep.share_zero[0.0], share_margin)
    test = centre_prior_falsification(sweep.share_zero[top], sweep.share_zero[0.0], planted,
                                      sweep.replicate_share, images, share_margin, seed, top, label)
    return cross, test


def bias_study(levels: Sequence[float], world_at: Callable[[float], tuple[Split, list[MaxImageHeads]]],
               seeds: Sequence[int], min_box_area: float, area_rule: str, mode: str, seed: int, margin: float,
               share_margin: float, label: str = "") -> tuple[BiasSweep, list[verdicts.Verdict], verdicts.Falsification | None]:
    """:func:`centre_bias_sweep` over ``levels`` and its :func:`bias_verdicts`: (sweep, cross
    verdicts, centre-prior falsification); with no level, the empty sweep, [] and None."""
    sweep = centre_bias_sweep(levels, world_at, seeds, min_box_area, area_rule, mode)
    return (sweep, *bias_verdicts(sweep, seed, margin, share_margin, label)) if levels else (sweep, [], None)


def centre_prior_sentence(f: verdicts.Falsification) -> str:
    """The centre-prior test in words, in the equivalence form where the controls allow it: with
    both controls passing and no excess detected, the interval's upper end bounds any excess
    of the biased model's centre-cell share over the bias-0 model's."""
    t, head, p = f.test, f.sentence(), f.positive
    if not f.positive_passed:  # a planted excess of exactly the margin shows once the half-width is below it
        head += (f" The planted prior's interval has half-width {p.half_width:.3f}; it would need "
                 f"one below the margin ({p.margin:g}) to show.")
    if f.controls_pass and t.verdict == verdicts.A_BETTER:  # 'better' here is more centre argmaxes: a prior
        size = ("an excess of the margin ({:g}) is neither shown nor excluded" if t.ci_low < t.margin < t.ci_high else
                "the excess is at least the margin ({:g})" if t.ci_low >= t.margin else
                "an excess of the margin ({:g}) is excluded").format(t.margin)
        return (f"{head.replace(f'**{f.conclusion}**', '**centre prior detected**')} The model trained at the highest "
                f"bias puts more of its argmaxes in the centre cells of the unbiased test than the bias-0 model, "
                f"{t.difference:+.3f} {t.interval()}; {size}.")
    if not f.controls_pass or t.verdict == verdicts.A_BETTER:
        return f"{head} The interval: {t.difference:+.3f} {t.interval()}."
    bound = "is excluded too" if t.ci_high <= t.margin else "is not"
    return (f"{head} No centre prior detected ({t.difference:+.3f} {t.interval()}): "
            f"any excess of the centre-cell share above {max(t.ci_high, 0.0):.3f} is excluded; an excess "
            f"of the margin ({t.margin:g}) {bound}.")
