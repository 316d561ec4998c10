"""Bidirectional ranking losses on a batch score matrix S (B, B), S[i, j] = S(I_i, T_j).

The positive pair of image i is caption i (the diagonal); every other caption in the batch
is a negative for it, and every other image a negative for caption i. A stack of score
matrices (..., B, B), one per independently trained replica (chapter 1 trains its seeds
side by side), gives one loss per matrix (...,): each the loss of its own (B, B) problem.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

MINING = ("hardest", "semi-hard", "all")


def _check_square(scores: torch.Tensor) -> int:
    if scores.ndim < 2 or scores.shape[-1] != scores.shape[-2] or scores.shape[-1] < 2:
        raise ValueError(f"scores must be a square (B, B) matrix with B >= 2 (or a stack (..., B, B)), "
                         f"got {tuple(scores.shape)}")
    return scores.shape[-1]


def _check_same(same: torch.Tensor | None, b: int, device: torch.device,
                lead: tuple[int, ...] = ()) -> torch.Tensor:
    """The (B, B) false-negative mask (or one per matrix of a stack, (..., B, B)): True where
    j != i is not a negative of i (the same caption text), symmetric; all False when
    ``same`` is None."""
    if same is None:
        return torch.zeros(b, b, dtype=torch.bool, device=device)
    if same.shape not in ((b, b), (*lead, b, b)) or same.dtype != torch.bool:
        raise ValueError(f"same must be a bool (B, B) = ({b}, {b}) mask (or one per score matrix), got "
                         f"{same.dtype} {tuple(same.shape)}")
    return same.to(device) & _off_diagonal(b, device)


def same_text_mask(text_ids: torch.Tensor) -> torch.Tensor:
    """same[i, j] = 1[text_i = text_j] for j != i: pairs whose captions read the same, so
    caption j describes image i as well as caption i does (a false negative). (B,) -> (B, B)."""
    if text_ids.ndim != 1:
        raise ValueError(f"text_ids must be (B,), got {tuple(text_ids.shape)}")
    b = text_ids.shape[0]
    return (text_ids[:, None] == text_ids[None, :]) & _off_diagonal(b, text_ids.device)


def npair_loss(scores: torch.Tensor, temperature: float = 1.0,
               same: torch.Tensor | None = None) -> torch.Tensor:
    """Bidirectional multi-class N-Pair loss (Sohn 2016), averaged over both directions:
    Eq. (eq-npair-loss) of chapter 1, with tau the ``temperature``,

    L = 1/(2B) sum_i [ log(1 + sum_{j in N_i} exp((S_ij - S_ii)/tau))
                     + log(1 + sum_{j in N_i} exp((S_ji - S_ii)/tau)) ],
    the softmax cross-entropy of each row (image -> captions) and each column (caption ->
    images) against the diagonal. N_i = {j != i} (the paper), or {j != i : not same[i, j]}
    with a false-negative mask ``same`` (:func:`same_text_mask`).
    """
    b = _check_square(scores)
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    lead = tuple(scores.shape[:-2])
    drop = _check_same(same, b, scores.device, lead)
    logits = (scores / temperature).masked_fill(drop, float("-inf"))
    if not lead:
        target = torch.arange(b, device=scores.device)
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target))
    target = torch.arange(b, device=scores.device).repeat(logits[..., 0, 0].numel())

    def rows(x: torch.Tensor) -> torch.Tensor:  # mean cross-entropy of each matrix's rows: (...,)
        return F.cross_entropy(x.reshape(-1, b), target, reduction="none").view(*lead, b).mean(dim=-1)
    return 0.5 * (rows(logits) + rows(logits.transpose(-1, -2)))


def _off_diagonal(b: int, device: torch.device) -> torch.Tensor:
    return ~torch.eye(b, dtype=torch.bool, device=device)


def _semi_hard(neg: torch.Tensor, pos: torch.Tensor, margin: float,
               off: torch.Tensor) -> torch.Tensor:
    """Per-anchor semi-hard hinge: neg (..., B, B) scores of each anchor's candidates, pos (..., B, 1).

    The chosen negative is the most similar one that still scores below the positive; an
    anchor without one takes its least similar negative (the rule of TensorFlow Addons'
    triplet_semihard_loss).
    """
    semi = off & (neg < pos)
    hardest_semi = neg.masked_fill(~semi, float("-inf")).max(dim=-1).values  # (..., B)
    easiest = neg.masked_fill(~off, float("inf")).min(dim=-1).values  # (..., B)
    chosen = torch.where(semi.any(dim=-1), hardest_semi, easiest)
    return F.relu(margin - pos.squeeze(-1) + chosen).masked_fill(~off.any(dim=-1), 0.0)


def triplet_loss(scores: torch.Tensor, margin: float = 0.2, mining: str = "hardest",
                 same: torch.Tensor | None = None) -> torch.Tensor:
    """Bidirectional triplet (hinge) loss with negative mining, averaged over anchors:
    Eq. (eq-triplet-loss) of chapter 1, with alpha the ``margin``.

    For anchor i and negative j: h_ij = [alpha - S_ii + S_ij]_+ (image anchor, caption
    negatives) and [alpha - S_ii + S_ji]_+ (caption anchor, image negatives).
    ``mining``: "hardest" takes max_j h_ij (VSE++, Faghri et al. 2018); "semi-hard" takes
    the negative with the largest S_ij among those with S_ij < S_ii, else the smallest
    S_ij (FaceNet, Schroff et al. 2015); "all" sums h_ij over j != i.
    L = 1/(2B) sum_i (loss of image anchor i + loss of caption anchor i). With a
    false-negative mask ``same``, the pairs it marks are never negatives (an anchor left
    without any negative contributes 0).
    """
    b = _check_square(scores)
    if mining not in MINING:
        raise ValueError(f"mining must be one of {MINING}, got {mining!r}")
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    pos = scores.diagonal(dim1=-2, dim2=-1).unsqueeze(-1)  # (..., B, 1)
    off = _off_diagonal(b, scores.device) & ~_check_same(same, b, scores.device, tuple(scores.shape[:-2]))
    per_dir = []
    for s in (scores, scores.transpose(-1, -2)):  # rows: image anchors; rows of S^T: caption anchors
        if mining == "semi-hard":
            per_dir.append(_semi_hard(s, pos, margin, off))
            continue
        hinge = F.relu(margin - pos + s).masked_fill(~off, 0.0)  # (..., B, B), diagonal zeroed
        per_dir.append(hinge.max(dim=-1).values if mining == "hardest" else hinge.sum(dim=-1))
    return 0.5 * (per_dir[0].mean(dim=-1) + per_dir[1].mean(dim=-1))
