"""Object-level retrieval: rank images for a category name by their best-matching embedding.

An image is stored as E embeddings e_{i,1..E}; for a text query t (a category name) its
score is s_i(t) = max_e <t, e_{i,e}>, and images are ranked by s_i(t), ties broken by
image order. An image is relevant to t when it contains an object of that category.

AP@K follows torchmetrics' ``RetrievalMAP(top_k=K)``: with the relevant images among the
top K at ranks r_1 < r_2 < ... < r_R, AP@K = (1/R) sum_j j / r_j (0 when R = 0), and
full AP is AP@K with K = the number of images. That normalisation ("hits") is not
monotone: a ranking that finds one relevant image at rank 1 and nothing else scores 1.0.
The other convention ("min_k_r") divides by min(K, R_total), the most hits the top K could
hold, with R_total the category's relevant images in the whole gallery:

    AP@K_min = (1 / min(K, R_total)) sum_j j / r_j.

The FOR paper reports "mAP@50" without saying which; we report both and full AP, which
the two agree on. mAP is the mean over categories that have
at least one relevant image; categories without one are reported, not skipped silently.
"""
from __future__ import annotations

from typing import Sequence

import torch


def max_similarity(text: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
    """s_{q,i} = max_e <t_q, e_{i,e}>: text (Q, D), embeddings (I, E, D) -> (Q, I)."""
    if embeddings.ndim != 3 or text.ndim != 2 or text.shape[1] != embeddings.shape[2]:
        raise ValueError(f"expected text (Q, D) and embeddings (I, E, D), got "
                         f"{tuple(text.shape)} and {tuple(embeddings.shape)}")
    sims = torch.einsum("qd,ied->qie", text.float(), embeddings.float())  # (Q, I, E)
    return sims.max(-1).values


NORMALISATIONS = ("hits", "min_k_r")


def average_precision_at_k(scores: torch.Tensor, relevant: torch.Tensor,
                           k: int | None = None, normalise: str = "hits") -> torch.Tensor:
    """AP@k of each row: scores and relevant (Q, I) -> (Q,). k=None means all images.

    normalise: "hits" (divide by the hits in the top k, torchmetrics) or "min_k_r" (divide
    by min(k, R_total)); the two agree when k covers the gallery.
    """
    if normalise not in NORMALISATIONS:
        raise ValueError(f"normalise must be one of {NORMALISATIONS}, got {normalise!r}")
    if scores.shape != relevant.shape or scores.ndim != 2:
        raise ValueError(f"scores {tuple(scores.shape)} and relevant {tuple(relevant.shape)} "
                         "must both be (Q, I)")
    k = scores.shape[1] if k is None else k
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    k = min(k, scores.shape[1])
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]  # (Q, k)
    hits = relevant.gather(1, order).float()  # (Q, k)
    ranks = torch.arange(1, k + 1, dtype=torch.float32)
    precision_at = hits.cumsum(1) / ranks  # (Q, k)
    n_hits = hits.sum(1) if normalise == "hits" else relevant.sum(1).float().clamp(max=k)
    return (precision_at * hits).sum(1) / n_hits.clamp(min=1)  # 0 where no hit


def object_retrieval_map(scores: torch.Tensor, relevant: torch.Tensor, names: Sequence[str],
                         groups: dict[str, Sequence[str]], ks: Sequence[int | None] = (50, None),
                         ) -> dict[str, dict[str, float]]:
    """mAP@k per group of category names (e.g. {"base": [...], "novel": [...]}).

    Returns {group: {"mAP@50": ..., "mAP": ..., "n_queries": ..., "no_positive": ...}};
    ``no_positive`` counts that group's categories with no relevant image (left out of the mean).
    """
    if len(names) != scores.shape[0]:
        raise ValueError(f"names has {len(names)} entries for {scores.shape[0]} score rows")
    index = {n: i for i, n in enumerate(names)}
    aps = {k: average_precision_at_k(scores, relevant, k) for k in ks}
    has_pos = relevant.any(1)
    out = {}
    for group, members in groups.items():
        unknown = [m for m in members if m not in index]
        if unknown:
            raise ValueError(f"group {group!r} names categories without a query: {unknown}")
        rows = torch.tensor([index[m] for m in members], dtype=torch.long)
        keep = rows[has_pos[rows]]
        res = {("mAP" if k is None else f"mAP@{k}"): (aps[k][keep].mean().item() if len(keep) else float("nan"))
               for k in ks}
        out[group] = {**res, "n_queries": int(len(keep)), "no_positive": int(len(rows) - len(keep))}
    return out


def per_category_ap(text: torch.Tensor, embeddings: torch.Tensor, relevant: torch.Tensor,
                    ) -> dict[str, torch.Tensor]:
    """AP per query under the three conventions: text (Q, D), embeddings (I, E, D),
    relevant (Q, I) -> {"AP@50": (Q,), "AP@50 min(50,R)": (Q,), "AP": (Q,)}; NaN where a
    query has no relevant image."""
    scores = max_similarity(text, embeddings)  # (Q, I)
    out = {"AP@50": average_precision_at_k(scores, relevant, 50),
           "AP@50 min(50,R)": average_precision_at_k(scores, relevant, 50, "min_k_r"),
           "AP": average_precision_at_k(scores, relevant, None)}
    empty = ~relevant.any(1)
    return {m: v.masked_fill(empty, float("nan")) for m, v in out.items()}
