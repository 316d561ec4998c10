"""Chapter 4's comparisons: the pointing game of the attention maps, the scoring-rule test at each
proportion, and the full model against every baseline and ablation."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import verdicts
from ...metrics.pointing import argmax_point, center_point, class_pointing
from .arms import DECOUPLING_ONLY, FULL, FULL_AFFINE, FULL_BIAS, LOGISTIC, PROMPTS_ONLY, UNTRAINED, ZERO_SHOT, Arm


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


def scoring_verdicts(ap: dict, proportions: list[float], seed: int,
                     controls: tuple[Arm, ...] = (FULL_BIAS, FULL_AFFINE)) -> dict:
    """The falsification's test: at each proportion, the paper's softmax (:data:`FULL`)
    against each calibrated sigmoid, judged on per-category test AP of log p over seeds x
    categories (``fgclip.verdicts.compare``); keyed by (control Arm, ρ)."""
    return {(ctrl, rho): verdicts.compare(
        ap[FULL, rho, "p"], ap[ctrl, rho, "p"],
        claim=f"scoring rule of the full model, {rho:.0%} known (mAP on p)",
        arms=("softmax (paper)", ctrl.scoring), unit="categories", seed=seed)
        for rho in proportions for ctrl in controls}


def summary_verdicts(ap: dict, proportions: list[float], seed: int) -> list:
    """The full model (:data:`FULL`) against each baseline and ablation on per-category AP of
    log p averaged over the proportions, and the full model ranked by p against by s."""
    avg = lambda arm, kind="p": np.mean([ap[arm, r, kind] for r in proportions], axis=0)  # noqa: E731
    out = [verdicts.compare(avg(FULL), avg(b), claim=f"average over {len(proportions)} proportions, mAP on p",
                            arms=("full (paper)", b.name), unit="categories", seed=seed)
           for b in (ZERO_SHOT, UNTRAINED, LOGISTIC, DECOUPLING_ONLY, PROMPTS_ONLY)]
    out.append(verdicts.compare(avg(FULL, "p"), avg(FULL, "s"), claim="full model, ranked by p or by s",
                                arms=("p (Eq. 9)", "s"), unit="categories", seed=seed))
    return out
