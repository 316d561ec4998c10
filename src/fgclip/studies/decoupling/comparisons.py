"""Chapter 4's comparisons: the pointing game of the attention maps, the scoring-rule test at each
proportion, the A/A negative control, the full model against every baseline and ablation, and
the power check of the central comparison."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ... import verdicts
from ...metrics.pointing import argmax_point, center_point, class_pointing
from .arms import DECOUPLING_ONLY, FULL, FULL_AFFINE, FULL_BIAS, LOGISTIC, PROMPTS_ONLY, UNTRAINED, ZERO_SHOT, Arm
from .controls import CLUSTER_UNIT

power_check = verdicts.power_check  # the chapter's name for the shared record


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


def pointing_verdict(trials: PointingTrials, rho: float, seed: int, margin: float):
    """The attention's argmax against the image centre on the pointing trials, clustered by
    image (``fgclip.verdicts.compare``, margin ``pointing_margin``)."""
    n_maps = len(trials.attention_hits)
    return verdicts.compare(trials.attention_hits, np.tile(trials.centre_hits, (n_maps, 1)),
                            claim=f"pointing, full model at {rho:.0%} known", unit="(image, category) trials",
                            arms=("decoupling attention", "image centre"), clusters=trials.images,
                            cluster_unit="images", seed=seed, margin=margin)


def read_falsification(test_v: dict, positive, negative, proportions: list[float], margin: float,
                       arm: Arm = FULL_AFFINE) -> tuple[list, dict]:
    """The scoring-rule test against ``arm`` at each ρ read through the planted positive
    control and the A/A negative control (``fgclip.verdicts.falsify``, the sigmoid expected
    better where coupling hurts), and the power check of the central comparison (middle ρ)."""
    controls = [verdicts.falsify(test_v[arm, rho], positive, negative, effect=verdicts.B_BETTER) for rho in proportions]
    return controls, power_check(test_v[arm, proportions[len(proportions) // 2]], margin)


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


def ranking_split_verdicts(ap: dict, proportions: list[float], seed: int, margin: float) -> dict:
    """Training or ranking? At each proportion the softmax-trained full model ranked by its score
    s (no per-image denominator at test time) against the affine sigmoid (which ranks alike by p
    and s): what coupling in training alone does, apart from ranking by Eq. 9; keyed by ρ."""
    return {rho: compare_categories(ap[FULL, rho, "s"], ap[FULL_AFFINE, rho, "p"],
                                    f"softmax-trained, ranked by s, against sigmoid+affine, {rho:.0%} known",
                                    ("softmax-trained, ranked by s", FULL_AFFINE.scoring), seed, margin)
            for rho in proportions}


def a_a_verdict(ap: dict, rho: float, seed: int, margin: float, arm: Arm = FULL,
                more: np.ndarray | None = None, per_side: int | None = None):
    """The A/A negative control: the same arm (the paper's softmax) at ρ, one set of seeds
    against a disjoint second set of as many (paired by position), must come out
    'equivalent'. Its per-category AP are ap[arm, ρ, "p"] (n_seeds, C) followed by ``more``
    (further seeds' rows, :func:`~fgclip.studies.decoupling.sweep.more_seeds_ap`); of the first
    2 x ``per_side`` rows (default: all, an even count), the even-numbered ones are set A and the
    odd-numbered ones set B, paired in order. Alternating keeps the two sets alike: each holds
    one of two consecutive seeds, so the selection grid's first two seeds (whose runs chose the
    lr and epochs) fall one on each side. It fails when training noise at this size is wider
    than the margin."""
    x = ap[arm, rho, "p"] if more is None or not len(more) else np.concatenate([ap[arm, rho, "p"], more])
    half = len(x) // 2 if per_side is None else per_side
    if half < 1 or 2 * half > len(x):
        raise ValueError(f"the A/A control needs 2 x {half} seeds (at least 1 per side), got {len(x)}")
    return compare_categories(x[0:2 * half:2], x[1:2 * half:2],
                              f"A/A: the paper's model against itself, {rho:.0%} known, {half} vs {half} seeds",
                              ("seeds, set A", "seeds, set B"), seed, margin)


def ablation_verdicts(ap: dict, proportions: list[float], seed: int, margin: float,
                      ablations: tuple[Arm, ...] = (DECOUPLING_ONLY, PROMPTS_ONLY)) -> dict:
    """The full model (:data:`FULL`) against each ablation at every proportion (per-category AP
    of log p), so that a sign change across the proportions is not averaged away; keyed by
    (ablation Arm, ρ)."""
    return {(b, rho): compare_categories(ap[FULL, rho, "p"], ap[b, rho, "p"], f"full model vs {b.name}, {rho:.0%} known",
                                         ("full (paper)", b.name), seed, margin)
            for b in ablations for rho in proportions}


def a_a_seeds_for(sd: float, margin: float, most: int = 200) -> int:
    """Seeds per side an A/A comparison needs so that its between-seed half-width,
    t_{0.975, n-1} sd / sqrt(n), is at most half the ``margin`` when the paired seed
    differences have standard deviation ``sd`` (a spread measured before the run): then a
    true null lands within the margin for any difference up to half of it."""
    from scipy import stats
    for n in range(2, most + 1):
        if stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n) <= margin / 2:
            return n
    raise ValueError(f"a_a_seeds_for: no n <= {most} reaches a half-width of {margin / 2:g} at sd {sd:g}")


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




def full_vs_zero_shot(sweep, proportions: list[float], seed: int, margin: float, hand_text: torch.Tensor,
                      curves: dict | None = None) -> dict:
    """Why the paper's model does (or does not) beat its zero-shot start, as a record, from a
    :class:`~fgclip.studies.decoupling.sweep.Sweep` (its per-category AP, the full model's
    selection and kept head).

    ``verdicts``: the full model (:data:`FULL`) against zero-shot at each ρ (per-category AP of
    log p); ``start``: the mAP at the middle ρ of the full model untrained (where training
    starts: random attention, prompts at the hand prompt's words) and of zero-shot;
    ``prompt drift``: 1 - mean_c cos(f^t_c of the kept trained full model, f^t_c of the
    hand prompt ``hand_text`` (C, D)); ``context tokens``: its prompts' M; ``convergence``: the selection's chosen epoch, budget,
    whether the best epoch came before the budget's last, and the mean validation mAP after the
    first and the chosen epoch at the chosen lr; ``check``: the sweep's
    :func:`~fgclip.studies.decoupling.sweep.convergence_check` of that choice (None: none ran);
    ``decoupling only verdicts``: decoupling only (:data:`DECOUPLING_ONLY`, hand prompt) against
    zero-shot at each ρ where the sweep has it (the part of the full model's gap its ablation shares);
    ``validation curves``: ``curves``, the full model's
    :func:`~fgclip.studies.decoupling.sweep.proportion_curves` at every ρ (None: not run)."""
    rho, ap, selection, head = proportions[len(proportions) // 2], sweep.ap, sweep.selections[FULL], sweep.heads[FULL]
    with torch.no_grad():
        f_t = head.prompts() if getattr(head, "prompts", None) is not None else head.text_features
        cos = F.cosine_similarity(f_t.float().cpu(), hand_text.float().cpu(), dim=-1)
    curve = selection.mean_curve()
    return {"verdicts": [compare_categories(ap[FULL, r, "p"], ap[ZERO_SHOT, r, "p"], f"full model vs zero-shot, {r:.0%} known",
                                            ("full (paper)", "zero-shot"), seed, margin) for r in proportions],
            "known": list(proportions),
            "decoupling only verdicts": [compare_categories(
                ap[DECOUPLING_ONLY, r, "p"], ap[ZERO_SHOT, r, "p"], f"decoupling only vs zero-shot, {r:.0%} known",
                ("decoupling only", "zero-shot"), seed, margin) for r in proportions if (DECOUPLING_ONLY, r, "p") in ap],
            "start": {"untrained": float(ap[UNTRAINED, rho, "p"].mean()), "zero-shot": float(ap[ZERO_SHOT, rho, "p"].mean()),
                      "known": rho},
            "prompt drift": float(1 - cos.mean()), "context tokens": int(getattr(getattr(head, "prompts", None), "n_ctx", 0)),
            "convergence": {"lr": selection.lr, "epochs": selection.epochs, "budget": selection.budget,
                            "converged": bool(selection.converged), "val first epoch": float(curve[0]),
                            "val chosen epoch": float(curve[selection.epochs - 1]),
                            "check": getattr(sweep, "checks", {}).get(FULL)},
            "validation curves": curves}
