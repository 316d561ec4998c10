"""Recall@K for cross-modal retrieval with possibly several relevant items per query."""
from __future__ import annotations

import torch


def recall_at_k(similarity: torch.Tensor, relevant: torch.Tensor,
                ks: tuple[int, ...] = (1, 5, 10)) -> dict[int, float]:
    """R@K = (1/Q) sum_q 1[some relevant item of q is among its K most similar].

    similarity: (Q, G) scores; relevant: (Q, G) bool. Ties in score are broken by index,
    as torch.topk does. A query with no relevant item is an error, not a silent miss.
    """
    if similarity.shape != relevant.shape:
        raise ValueError(f"similarity {tuple(similarity.shape)} and relevant "
                         f"{tuple(relevant.shape)} must have the same shape")
    if not relevant.any(dim=1).all():
        missing = (~relevant.any(dim=1)).nonzero().flatten()[:5].tolist()
        raise ValueError(f"queries {missing} have no relevant item")
    out = {}
    for k in ks:
        top = similarity.topk(min(k, similarity.shape[1]), dim=1).indices  # (Q, k)
        out[k] = relevant.gather(1, top).any(dim=1).float().mean().item()
    return out


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Top-1 accuracy of (N, C) logits against (N,) class indices."""
    return (logits.argmax(dim=1) == targets).float().mean().item()
