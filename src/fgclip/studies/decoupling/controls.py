"""Chapter 4's controls for the softmax-vs-sigmoid falsification: the chapter's cluster unit, a
learnable stand-in for the prompts (tests), and the loss's gradients at unknown entries at
initialisation. The positive control itself runs the chapter's pipeline on a planted toy world
(:mod:`fgclip.studies.decoupling.planted`)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from ...losses.asymmetric import asymmetric_loss_terms
from ...methods.decoupling import score_probabilities
from ...partial_labels import UNKNOWN
from .heads import FitConfig, known_prevalence

# Chapter 4's independent unit: a category. All categories of a run share one trained head, so
# the head's noise is not resampled with them: it is the between-seed term V_seed.
CLUSTER_UNIT = "categories (the trained head's noise is in V_seed)"


class FreeText(nn.Module):
    """Learnable category vectors f^t (C, D), a stand-in for the prompts (a cosine head without CLIP)."""

    def __init__(self, n_classes: int, dim: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = nn.Parameter(torch.randn(n_classes, dim, generator=g) * 0.1)

    def forward(self) -> torch.Tensor:
        return self.weight  # (C, D)


def init_gradients(make: Callable, scorings: tuple[str, ...], dense: torch.Tensor,
                   pooled: torch.Tensor, targets: np.ndarray, seed: int, cfg: FitConfig
                   ) -> pd.DataFrame:
    """:func:`score_gradients` on one batch (the first cfg.batch_size images of
    dense/pooled/targets) for the full head at its initialisation under each scoring rule
    (controls calibrated on all given images and their known labels); one row per rule."""
    heads = {scoring: make("full", scoring, seed) for scoring in scorings}
    for head in heads.values():
        head.calibrate(dense, pooled, known_prevalence(targets))
    return trained_gradients(heads, dense, pooled, targets, cfg).rename_axis("P-ASL gradient on the scores")


def trained_gradients(heads: dict, dense: torch.Tensor, pooled: torch.Tensor, targets: np.ndarray,
                      cfg: FitConfig) -> pd.DataFrame:
    """:func:`score_gradients` on the same batch as :func:`init_gradients` (the first
    cfg.batch_size images), for trained heads: ``heads`` maps a scoring rule to its trained full
    head (as chosen on validation); one row per rule. At initialisation the softmax's p of an image
    average 1/C, under the margin m for any C > 1/m, so the share of negatives under m there is
    largely set by C; here it is read where training ended."""
    n, rows = min(cfg.batch_size, len(dense)), {}
    for scoring, head in heads.items():
        with torch.no_grad():
            s = head(dense[:n], pooled[:n]).scores  # (n, C)
        rows[scoring] = score_gradients(s, targets[:n], scoring, cfg.gamma_pos, cfg.gamma_neg, cfg.clip)
    return pd.DataFrame(rows).T.rename_axis("P-ASL gradient on the scores, trained heads")


ENTRY_TYPES = (("known positive", 1), ("known negative", 0), ("unknown", UNKNOWN))


def score_gradients(scores: torch.Tensor, targets: torch.Tensor, scoring: str,
                    gamma_pos: float = 1.0, gamma_neg: float = 2.0,
                    clip: float = 0.05) -> dict[str, float]:
    """The gradient g = dL/ds of P-ASL at every entry of one batch, read by entry type.

    scores s (B, C) (the head's scores, detached here), targets (B, C) in {1, 0, -1};
    p = softmax_c(s) or σ(s) by ``scoring`` (``fgclip.methods.decoupling.SCORINGS``).
    For each type T of known positive, known negative, unknown: ``T`` the mean |g|, ``T up``
    the share with g < 0 (a descent step raises s), ``T down`` the share with g > 0. Then
    ``negatives under m``: the share of known negatives with p <= m (``clip``: their own term
    is zero); ``negatives, own terms deleted``: the mean |g| at known negatives when every
    known negative's term is deleted from L (same |K|), what reaches them through other
    entries' terms; ``coupling share`` its ratio to ``known negative``; ``m`` the margin.
    Under a sigmoid the unknown entries get exactly zero and the deleted-terms gradient is 0.
    """
    s = scores.detach().float().clone().requires_grad_(True)  # (B, C)
    t = torch.as_tensor(targets, dtype=torch.long)
    p = score_probabilities(s, scoring)
    terms = asymmetric_loss_terms(p, t, gamma_pos, gamma_neg, clip)  # (B, C), 0 where unknown
    n_known = (t != UNKNOWN).sum().clamp(min=1)
    (grad,) = torch.autograd.grad(terms.sum() / n_known, s, retain_graph=True)  # P-ASL's gradient
    (rest,) = torch.autograd.grad(terms[t != 0].sum() / n_known, s)  # negatives' own terms deleted
    out, mean = {}, lambda x: float(x.float().mean()) if x.numel() else float("nan")  # noqa: E731
    for name, value in ENTRY_TYPES:
        g = grad[t == value]
        out |= {name: mean(g.abs()), f"{name} up": mean(g < 0), f"{name} down": mean(g > 0)}
    neg = t == 0
    out["negatives under m"] = mean(p.detach()[neg] <= clip)
    out["negatives, own terms deleted"] = mean(rest[neg].abs())
    out["coupling share"] = out["negatives, own terms deleted"] / out["known negative"] \
        if out["known negative"] > 0 else float("nan")
    return out | {"m": float(clip)}

