"""Multi-label metrics: macro mAP through torchmetrics, unknown labels ignored."""
from __future__ import annotations

import numpy as np
import torch
from torchmetrics.classification import MultilabelAveragePrecision

from ..partial_labels import UNKNOWN


def _as_tensors(scores, targets) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.as_tensor(np.asarray(scores), dtype=torch.float32)
    t = torch.as_tensor(np.asarray(targets), dtype=torch.long)
    if s.ndim != 2 or s.shape != t.shape:
        raise ValueError(f"scores {tuple(s.shape)} and targets {tuple(t.shape)} must both "
                         "be (N, C)")
    if s.shape[1] < 2:  # torchmetrics' multilabel metrics need at least two labels
        raise ValueError(f"need at least 2 categories (columns), got {s.shape[1]}")
    return s, t


def per_class_ap(scores, targets) -> np.ndarray:
    """AP_c = Σ_n (R_n - R_{n-1}) P_n over the ranking of category c's scores (known entries
    only; targets -1 are ignored), one value per category, (C,)."""
    s, t = _as_tensors(scores, targets)
    metric = MultilabelAveragePrecision(num_labels=s.shape[1], average="none",
                                        ignore_index=UNKNOWN)
    return metric(s, t).numpy()


def mean_average_precision(scores, targets) -> float:
    """Macro mAP = (1/C) Σ_c AP_c. A category with no known positive has no AP: error."""
    _, t = _as_tensors(scores, targets)
    empty = torch.nonzero((t == 1).sum(0) == 0).flatten()
    if len(empty):
        raise ValueError(f"categories {empty.tolist()} have no positive label: AP undefined")
    return float(per_class_ap(scores, targets).mean())


def known_map(scores, targets) -> float:
    """Macro mAP over the categories with at least one known positive (targets -1 ignored);
    for validation splits whose partial labels leave some category without a positive."""
    s, t = _as_tensors(scores, targets)
    has_pos = ((t == 1).sum(0) > 0).numpy()  # (C,)
    if not has_pos.any():
        raise ValueError("no category has a known positive: mAP undefined")
    if has_pos.sum() >= 2:  # AP is per column: score only those (no "no positive" warnings)
        return float(per_class_ap(s[:, has_pos], t[:, has_pos]).mean())
    # one scorable column: torchmetrics' multilabel AP needs two, and the other columns may be
    # entirely unknown, so take the binary AP of that column's known entries (same definition)
    from sklearn.metrics import average_precision_score

    c = int(np.flatnonzero(has_pos)[0])
    known = t[:, c] != UNKNOWN
    return float(average_precision_score(t[known, c].numpy(), s[known, c].numpy()))
