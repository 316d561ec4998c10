"""Asymmetric loss (ASL, Ridnik et al. 2021) and its partial-label form (P-ASL).

Targets use one tensor with three values: 1 = known positive, 0 = known negative,
-1 = unknown. P-ASL is ASL summed over the known entries only: an unknown entry has no
loss term of its own, so dL/dp is zero there. Whether its *score* s gets a gradient
depends on how p was made from s. Under a per-category sigmoid, p_ic depends on s_ic
alone, so dL/ds_ic = 0 at an unknown entry. Under the paper's softmax over categories,
p_ic' = exp(s_ic') / sum_c exp(s_ic) depends on every s_ic of the image: a known positive
(i, c') pushes each other score s_ic down (dL/ds_ic = -dL/dlog p_ic' * p_ic > 0), while a
known negative above the margin pushes the other scores up. An unknown entry moves whichever
way its image's known entries net out, and a known negative's gradient is partly this
coupling: "known labels only" does not hold for the scores (chapter 4 measures the signs and
the coupling share: :func:`fgclip.studies.decoupling.controls.score_gradients`). The losses take probabilities p, not logits,
because the paper applies P-ASL to its softmax-over-categories probabilities.

Why not timm's ``AsymmetricLossMultiLabel``: it takes logits through a per-category sigmoid
and has no value for an unknown label, so it can take neither the softmax probabilities nor
the partial labels. On sigmoid probabilities with every label known it is the same loss
(its 'sum' and 'mean' are ours), and its per-entry loss over the known entries is P-ASL:
tests/test_losses_reference.py checks both, gradients included.
"""
from __future__ import annotations

import torch

from ..partial_labels import UNKNOWN


def _check(probs: torch.Tensor, targets: torch.Tensor) -> None:
    if probs.shape != targets.shape:
        raise ValueError(f"probs {tuple(probs.shape)} and targets {tuple(targets.shape)} "
                         "must have the same shape")
    bad = ~((targets == 1) | (targets == 0) | (targets == UNKNOWN))
    if bad.any():
        raise ValueError(f"targets must be 1 (positive), 0 (negative) or {UNKNOWN} (unknown); "
                         f"found {targets[bad].unique().tolist()}")


def asymmetric_loss_terms(probs: torch.Tensor, targets: torch.Tensor, gamma_pos: float = 1.0,
                          gamma_neg: float = 2.0, clip: float = 0.05,
                          eps: float = 1e-8) -> torch.Tensor:
    """Per-entry ASL of Eq. (eq-partial-asl) of chapter 4, (B, C) -> (B, C), zero at unknown
    entries.

    L_+ = -(1 - p)^{γ+} log p                 for y = 1
    L_- = -p_m^{γ-} log(1 - p_m),  p_m = max(p - m, 0)   for y = 0
    with m = ``clip`` (the probability margin that discards easy negatives).
    """
    _check(probs, targets)
    if gamma_pos < 0 or gamma_neg < 0 or not 0 <= clip < 1:
        raise ValueError(f"need gamma_pos, gamma_neg >= 0 and 0 <= clip < 1; got "
                         f"{gamma_pos}, {gamma_neg}, {clip}")
    p = probs.clamp(min=eps, max=1 - eps)
    p_m = (p - clip).clamp(min=0) if clip > 0 else p
    pos = -((1 - p) ** gamma_pos) * torch.log(p)
    neg = -(p_m ** gamma_neg) * torch.log((1 - p_m).clamp(min=eps))
    terms = torch.where(targets == 1, pos, neg)
    return torch.where(targets == UNKNOWN, torch.zeros_like(terms), terms)


def partial_asymmetric_loss(probs: torch.Tensor, targets: torch.Tensor, gamma_pos: float = 1.0,
                            gamma_neg: float = 2.0, clip: float = 0.05,
                            reduction: str = "mean") -> torch.Tensor:
    """P-ASL, Eq. (eq-partial-asl) of chapter 4: L = (1/|K|) Σ_{(i,c) ∈ K} L_{ic}, K the
    known entries (``reduction='mean'``), or the plain sum over K (``reduction='sum'``, as
    the ASL reference code).

    With gamma_pos = gamma_neg = clip = 0 this is the partial binary cross-entropy.
    """
    terms = asymmetric_loss_terms(probs, targets, gamma_pos, gamma_neg, clip)
    if reduction == "sum":
        return terms.sum()
    if reduction == "mean":
        n_known = (targets != UNKNOWN).sum().clamp(min=1)
        return terms.sum() / n_known
    raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")


def partial_bce(probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Partial BCE: -(1/|K|) Σ_K [y log p + (1 - y) log(1 - p)], i.e. P-ASL with γ± = m = 0."""
    return partial_asymmetric_loss(probs, targets, 0.0, 0.0, 0.0)

