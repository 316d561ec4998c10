"""FOR's two losses: Hungarian-matched set losses on base labels and on teacher pseudo-labels.

For image b with embeddings e_1..e_N and target classes y_1..y_M (from a vocabulary with
text embeddings t_1..t_V), each embedding predicts

    p_i(v) = softmax_v( lambda <e_i, t_v> ),   lambda = CLIP's logit scale,

and a one-to-one assignment sigma between targets and embeddings minimises
sum_j -log p_{sigma(j)}(y_j) (scipy's ``linear_sum_assignment``, the Hungarian method).
Deviation, named: DETR's matcher costs a pair by -p_{sigma(j)}(y_j), the probability itself
(the loss that follows is the same cross-entropy either way); we match on -log p, the very
term the loss then minimises. As in DETR, the softmax has one more logit, a learnable "no object" score, and
each embedding left unmatched is pushed to it with a small weight (DETR's eos_coef 0.1):

    L = [ sum_j -log p_{sigma(j)}(y_j) + w_0 sum_{i unmatched} -log p_i(no object) ]
        / (#matched + w_0 #unmatched).

Without it, an embedding that learned "circle" on one image keeps saying "circle" on
every image, and ranking by the max over embeddings turns that into false positives.

- Supervised loss L_sup: vocabulary = base categories, targets = the image's base labels.
- Pseudo-label loss L_pl (paper Eq. 4): vocabulary = the open vocabulary, targets = the
  names the teacher accepts. The teacher is Cluster-CLIP: with its embeddings c_k,
  score(v) = max_k softmax_v( lambda <c_k, t_v> ), and v is accepted when score(v) > tau.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment


def hungarian_match(cost: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimum-cost one-to-one assignment of an (N, M) cost matrix: (rows, cols), min(N, M) pairs."""
    if cost.ndim != 2:
        raise ValueError(f"cost must be (N, M), got shape {tuple(cost.shape)}")
    if not torch.isfinite(cost).all():
        raise ValueError("cost has NaN or infinite entries")
    rows, cols = linear_sum_assignment(cost.detach().cpu().double().numpy())
    return torch.from_numpy(rows).long(), torch.from_numpy(cols).long()


def set_loss(embeddings: torch.Tensor, text: torch.Tensor, targets: Sequence[torch.Tensor | None],
             logit_scale: float, null_logit: torch.Tensor | None = None,
             null_weight: float = 0.1) -> tuple[torch.Tensor, int]:
    """Hungarian-matched cross-entropy with DETR's "no object" class (module docstring; Eq. (eq-set-loss)).

    embeddings (B, N, D) and text (V, D), both L2-normalised; targets: per image a tensor
    of class indices in 0..V-1, empty for "labelled, none of these classes", or None for
    an unlabelled image (no loss at all). With ``null_logit`` (a scalar tensor, learnable)
    the softmax gets a (V+1)-th "no object" logit, and every embedding left unmatched in a
    labelled image is pushed to it with weight ``null_weight`` (DETR's eos_coef);
    without it, unmatched embeddings get no loss. Returns (loss, matched pairs).
    """
    if len(targets) != embeddings.shape[0]:
        raise ValueError(f"targets has {len(targets)} entries for {embeddings.shape[0]} images")
    logits = logit_scale * embeddings @ text.T  # (B, N, V)
    if null_logit is not None:
        logits = torch.cat([logits, null_logit.reshape(1, 1, 1).expand(*logits.shape[:2], 1)], -1)
    logp = logits.log_softmax(-1)  # (B, N, V [+ 1])
    cost_all = -logp.detach().cpu().double().numpy()  # one transfer for the whole batch
    null_class = logp.shape[-1] - 1
    bs, rs, cs, ws, n_matched = [], [], [], [], 0  # (image, slot, class, weight) of every term
    for b, y in enumerate(targets):
        if y is None:
            continue
        unmatched = np.ones(logp.shape[1], dtype=bool)
        if y.numel():
            if int(y.max()) >= text.shape[0] or int(y.min()) < 0:
                raise ValueError(f"targets[{b}] has a class outside 0..{text.shape[0] - 1}")
            yn = y.detach().cpu().numpy()
            cost = cost_all[b][:, yn]  # (N, M) cost of giving target j to embedding i
            if not np.isfinite(cost).all():
                raise ValueError("cost has NaN or infinite entries")
            rows, cols = linear_sum_assignment(cost)
            bs += [b] * len(rows)
            rs += rows.tolist()
            cs += yn[cols].tolist()
            ws += [1.0] * len(rows)
            unmatched[rows] = False
            n_matched += len(rows)
        if null_logit is not None and unmatched.any():
            free = np.flatnonzero(unmatched).tolist()
            bs += [b] * len(free)
            rs += free
            cs += [null_class] * len(free)
            ws += [null_weight] * len(free)
    if not bs:
        return logp.sum() * 0.0, 0
    idx = torch.tensor([bs, rs, cs], device=logp.device)  # (3, terms)
    terms = -logp[idx[0], idx[1], idx[2]]  # one gather, one backward
    w = torch.tensor(ws, dtype=terms.dtype, device=logp.device)
    return (terms * w).sum() / w.sum(), n_matched


@torch.no_grad()
def teacher_scores(teacher_embeddings: torch.Tensor, vocab_text: torch.Tensor,
                   logit_scale: float) -> torch.Tensor:
    """score_b(v) = max_k softmax_v( lambda <c_{b,k}, t_v> ): (B, K, D), (V, D) -> (B, V) (Eq. (eq-teacher))."""
    probs = (logit_scale * teacher_embeddings @ vocab_text.T).softmax(-1)  # (B, K, V)
    return probs.max(1).values


def accept(scores: torch.Tensor, threshold: float) -> list[torch.Tensor]:
    """Pseudo-labels per image: the vocabulary indices with score > threshold."""
    if not 0.0 <= threshold < 1.0:
        raise ValueError(f"threshold must be in [0, 1), got {threshold}")
    return [row.gt(threshold).nonzero().flatten() for row in scores]


def label_f1(scores: torch.Tensor, truth: torch.Tensor, threshold: float) -> dict[str, float]:
    """Precision, recall and F1 of the accepted labels against a (B, V) boolean truth."""
    pred = scores > threshold
    tp = (pred & truth).sum().item()
    precision = tp / max(pred.sum().item(), 1)
    recall = tp / max(truth.sum().item(), 1)
    f1 = 2 * precision * recall / max(precision + recall, 1e-12)
    return {"precision": precision, "recall": recall, "f1": f1,
            "accepted_per_image": pred.sum().item() / max(len(pred), 1)}


def choose_threshold(scores: torch.Tensor, truth: torch.Tensor,
                     candidates: Sequence[float]) -> tuple[float, list[dict[str, float]]]:
    """The candidate threshold with the best F1 against ``truth``; the table of all of them.

    Meant for a held-out part of the *training* set with only the labels training may use
    (the base categories' columns), never the evaluation set. Ties go to the larger threshold.
    """
    if len(candidates) == 0:
        raise ValueError("candidates is empty")
    table = [{"threshold": float(t), **label_f1(scores, truth, t)} for t in candidates]
    best = max(table, key=lambda r: (r["f1"], r["threshold"]))
    return best["threshold"], table


def log_grid(low: float, high: float, n: int) -> list[float]:
    """n thresholds evenly spaced in log10 between low and high (both > 0)."""
    if not 0 < low < high:
        raise ValueError(f"need 0 < low < high, got {low}, {high}")
    return [float(x) for x in np.logspace(np.log10(low), np.log10(high), n)]
