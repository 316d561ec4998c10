"""Chapter 4's comparisons: the pointing game of the attention maps, the scoring-rule test at each
proportion, the A/A negative control, the full model against every baseline and ablation, and
the power check of the central comparison."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import verdicts
from ...metrics.pointing import argmax_point, center_point, class_pointing
from .arms import DECOUPLING_ONLY, FULL, FULL_AFFINE, FULL_BIAS, LOGISTIC, PROMPTS_ONLY, UNTRAINED, ZERO_SHOT, Arm
from .controls import CLUSTER_UNIT


class PointingTrials(NamedTuple):
    """Per-class pointing trials, one per (image, category present)."""

    attention_hits: np.ndarray  # (n_maps, T) 0/1: the argmax of a_c falls in a box of c
    centre_hits: np.ndarray  # (T,) 0/1: the image centre does
    images: np.ndarray  # (T,) the trial's image index (the bootstrap's cluster)


def pointing_hits(attention: list[np.ndarray], objects: list, hws: list,
                  class_names: list[str]) -> PointingTrials:
    """Per-class pointing trials (one per image and category present): 0/1 hits of each
    attention map's argmax (n_maps, T), of the image centre (T,), and the trials' image ids."""
    trials = [(i, c) for i, objs in enumerate(objects) for c in sorted({n for n, _ in objs})]
    boxes = [[b for n, b in objects[i] if n == c] for i, c in trials]
    t_hws, classes = [hws[i] for i, _ in trials], [c for _, c in trials]
    att_hits = [class_pointing([argmax_point(att[i, class_names.index(c)], hws[i]) for i, c in trials],
                               boxes, t_hws, classes, 0.0).hits for att in attention]
    centre = class_pointing([center_point(hw) for hw in t_hws], boxes, t_hws, classes, 0.0).hits
    return PointingTrials(np.array(att_hits, float), np.array(centre, float),
                          np.array([i for i, _ in trials]))


def compare_categories(a, b, claim: str, arms: tuple[str, str], seed: int, margin: float):
    """``fgclip.verdicts.compare`` on per-category AP (n_seeds, C) with the chapter's cluster unit
    (:data:`~fgclip.studies.decoupling.controls.CLUSTER_UNIT`) and margin."""
    return verdicts.compare(a, b, claim=claim, arms=arms, unit="categories", cluster_unit=CLUSTER_UNIT,
                            seed=seed, margin=margin)


def scoring_verdicts(ap: dict, proportions: list[float], seed: int, margin: float,
                     controls: tuple[Arm, ...] = (FULL_BIAS, FULL_AFFINE)) -> dict:
    """The falsification's test: at each proportion, the paper's softmax (:data:`FULL`)
    against each calibrated sigmoid, judged on per-category test AP of log p over seeds x
    categories; keyed by (control Arm, ρ)."""
    return {(ctrl, rho): compare_categories(
        ap[FULL, rho, "p"], ap[ctrl, rho, "p"], f"scoring rule of the full model, {rho:.0%} known (mAP on p)",
        ("softmax (paper)", ctrl.scoring), seed, margin)
        for rho in proportions for ctrl in controls}


def a_a_verdict(ap: dict, rho: float, seed: int, margin: float, arm: Arm = FULL):
    """The A/A negative control: the same arm (the paper's softmax) at ρ, its first half of
    seeds against its second half (paired by position), must come out 'equivalent'. It
    fails when training noise at this size is wider than the margin."""
    x = ap[arm, rho, "p"]
    half = len(x) // 2
    if half < 1:
        raise ValueError(f"the A/A control needs at least 2 seeds, got {len(x)}")
    return compare_categories(x[:half], x[half:2 * half], f"A/A: the paper's model against itself, {rho:.0%} known",
                              ("seeds, first half", "seeds, second half"), seed, margin)


def summary_verdicts(ap: dict, proportions: list[float], seed: int, margin: float) -> list:
    """The full model (:data:`FULL`) against each baseline and ablation on per-category AP of
    log p averaged over the proportions, and the full model ranked by p against by s."""
    avg = lambda arm, kind="p": np.mean([ap[arm, r, kind] for r in proportions], axis=0)  # noqa: E731
    out = [compare_categories(avg(FULL), avg(b), f"average over {len(proportions)} proportions, mAP on p",
                              ("full (paper)", b.name), seed, margin)
           for b in (ZERO_SHOT, UNTRAINED, LOGISTIC, DECOUPLING_ONLY, PROMPTS_ONLY)]
    out.append(compare_categories(avg(FULL, "p"), avg(FULL, "s"), "full model, ranked by p or by s",
                                  ("p (Eq. 9)", "s"), seed, margin))
    return out


power_check = verdicts.power_check  # the chapter's name for the shared record
