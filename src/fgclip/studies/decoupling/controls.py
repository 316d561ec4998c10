"""Chapter 4's controls for the softmax-vs-sigmoid falsification: planted multi-label worlds where
the answer is known, and the loss's gradients at unknown entries at initialisation."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from ... import verdicts
from ...losses.asymmetric import partial_asymmetric_loss
from ...methods.decoupling import MultiLabelCLIPHead, score_probabilities
from ...metrics.multilabel import per_class_ap
from ...partial_labels import UNKNOWN, known_masks, partial_targets
from .heads import FitConfig, fit_early_stopping, predict

WORLDS = ("paired", "independent", "single", "null")


def planted_world(kind: str, n: int, n_classes: int = 16, dim: int = 32, noise: float = 0.6,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features x (n, dim) and labels y (n, C) of a planted multi-label world.

    x_i = sum_c y_ic mu_c / sqrt(k_i) + noise * eps_i / sqrt(dim), mu_c fixed random unit
    prototypes (seeded by ``seed``, the same for every call with that seed), k_i = sum_c y_ic.

    * ``"paired"``: categories come in fixed pairs (2j, 2j+1) that always co-occur, and an
      image holds either 1 pair or 4 pairs (probability 1/2 each), so the number of
      categories present varies between 2 and 8 and a category is present mostly in
      crowded images. A softmax over categories shares its mass among the present ones,
      so it must rank a category lower on crowded images: coupling must change mAP.
    * ``"independent"``: each image holds 2 categories drawn uniformly without replacement
      (the number present never varies).
    * ``"single"``: each image holds exactly one category, drawn uniformly: no category
      co-occurs with another, so a shared denominator has no second positive to take mass
      from, but it can explain a category away when another one scores higher.
    * ``"null"``: independent categories (each present with probability 2/C, at least one
      per image) and features that carry no label information (x_i is noise only): every
      ranking is chance, so no scoring rule can beat another.
    """
    if kind not in WORLDS:
        raise ValueError(f"kind must be one of {WORLDS}, got {kind!r}")
    if n_classes % 2 or n_classes < 8:
        raise ValueError(f"n_classes must be even and >= 8, got {n_classes}")
    proto_rng = np.random.default_rng(seed)
    mu = proto_rng.standard_normal((n_classes, dim))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)  # (C, dim)
    rng = np.random.default_rng([seed, n, WORLDS.index(kind)])
    y = np.zeros((n, n_classes), dtype=np.int64)
    for i in range(n):
        if kind == "paired":
            pairs = rng.choice(n_classes // 2, size=1 if rng.random() < 0.5 else 4, replace=False)
            y[i, np.concatenate([2 * pairs, 2 * pairs + 1])] = 1
        elif kind == "null":
            y[i] = rng.random(n_classes) < 2 / n_classes
            if not y[i].any():
                y[i, rng.integers(n_classes)] = 1
        else:
            y[i, rng.choice(n_classes, size=2 if kind == "independent" else 1, replace=False)] = 1
    x = (y @ mu) / np.sqrt(y.sum(1, keepdims=True)) * (kind != "null")
    x += noise * rng.standard_normal((n, dim)) / np.sqrt(dim)
    return x.astype(np.float32), y


class FreeText(nn.Module):
    """Learnable category vectors f^t (C, D), a stand-in for the prompts in planted worlds."""

    def __init__(self, n_classes: int, dim: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = nn.Parameter(torch.randn(n_classes, dim, generator=g) * 0.1)

    def forward(self) -> torch.Tensor:
        return self.weight  # (C, D)


def planted_control(kind: str, scorings: tuple[str, str], seeds: list[int], tau: float,
                    cfg: FitConfig, lr_candidates: list[float], proportion: float = 0.5,
                    n_train: int = 800, n_val: int = 200, n_test: int = 500, world_seed: int = 0,
                    noise: float = 0.6) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Train the same cosine head under each scoring rule on a planted world, each rule with
    its own learning rate chosen on the planted validation split (first seed), every run
    early-stopped there. Returns per-category test AP on log p, {scoring: (n_seeds, C)},
    and the chosen learning rates. Masks, initialisation and batches follow each seed; the
    world (prototypes and images) follows ``world_seed``."""
    x, y = planted_world(kind, n_train + n_val + n_test, noise=noise, seed=world_seed)
    xt = torch.as_tensor(x)
    dense = torch.zeros(len(x), 1, 1, 1)  # unused: the head scores the global feature
    tr, va, te = (slice(0, n_train), slice(n_train, n_train + n_val),
                  slice(n_train + n_val, None))

    def run(scoring: str, sd: int, lr: float):
        known = known_masks(y[:n_train + n_val].shape, [proportion], sd)[proportion]
        targets = partial_targets(y[:n_train + n_val], known)
        torch.manual_seed(sd)
        head = MultiLabelCLIPHead(None, None, FreeText(y.shape[1], x.shape[1], sd), None, tau,
                                  scoring)
        res = fit_early_stopping(head, dense[tr], xt[tr], targets[tr], FitConfig(
            **{**cfg.__dict__, "seed": sd, "lr": lr}), dense[va], xt[va], targets[n_train:])
        return per_class_ap(predict(head, dense[te], xt[te])[1], y[te]), max(res.val_map)

    out, chosen = {}, {}
    for scoring in scorings:
        first = {lr: run(scoring, seeds[0], lr) for lr in lr_candidates}
        chosen[scoring] = max(lr_candidates, key=lambda lr: first[lr][1])
        out[scoring] = np.stack([first[chosen[scoring]][0]] + [
            run(scoring, sd, chosen[scoring])[0] for sd in seeds[1:]])
    return out, chosen


def planted_verdicts(kinds: tuple[str, ...], seeds: list[int], tau: float, cfg: FitConfig,
                     lr_candidates: list[float], seed: int, noise: float = 1.5
                     ) -> tuple[dict, list[dict]]:
    """:func:`planted_control` (softmax vs sigmoid+affine) on each planted world, read as
    ``fgclip.verdicts.compare`` over seeds x categories; also the 'chosen on which split'
    rows of the learning rates picked on each world's validation split."""
    out, rows = {}, []
    for kind in kinds:
        ap, lrs = planted_control(kind, ("softmax", "sigmoid+affine"), seeds, tau, cfg,
                                  lr_candidates, noise=noise, world_seed=seed)
        out[kind] = verdicts.compare(ap["softmax"], ap["sigmoid+affine"],
                                     claim=f"planted world '{kind}'",
                                     arms=("softmax (paper)", "sigmoid+affine"),
                                     unit="categories", seed=seed)
        rows += [{"hyperparameter": f"lr (planted '{kind}', {sc})", "candidates": str(lr_candidates),
                  "chosen": lr, "criterion": f"best validation mAP on p, seed {seeds[0]}",
                  "split": "the planted world's validation split"} for sc, lr in lrs.items()]
    return out, rows


def init_gradients(make: Callable, scorings: tuple[str, ...], dense: torch.Tensor,
                   pooled: torch.Tensor, targets: np.ndarray, seed: int, cfg: FitConfig
                   ) -> pd.DataFrame:
    """Mean |dL/ds| on known positives, known negatives and unknown entries of one batch
    (the first cfg.batch_size images of dense/pooled/targets), for the full head at its
    initialisation under each scoring rule (controls calibrated on all given images)."""
    n, rows = min(cfg.batch_size, len(dense)), {}
    for scoring in scorings:
        head = make("full", scoring, seed)
        head.calibrate(dense, pooled)
        with torch.no_grad():
            s = head(dense[:n], pooled[:n]).scores  # (n, C)
        rows[scoring] = score_gradients(s, targets[:n], scoring, cfg.gamma_pos, cfg.gamma_neg,
                                        cfg.clip)
    return pd.DataFrame(rows).T.rename_axis("mean |dL/ds| per entry")


def score_gradients(scores: torch.Tensor, targets: torch.Tensor, scoring: str,
                    gamma_pos: float = 1.0, gamma_neg: float = 2.0,
                    clip: float = 0.05) -> dict[str, float]:
    """Mean |dL/ds_ic| of P-ASL over known positives, known negatives and unknown entries.

    scores s (B, C) (the head's scores, detached here), targets (B, C) in {1, 0, -1};
    p = softmax_c(s) or σ(s) by ``scoring`` (``fgclip.methods.decoupling.SCORINGS``).
    Under a sigmoid the unknown entries get exactly zero; under the softmax they do not.
    """
    s = scores.detach().float().clone().requires_grad_(True)  # (B, C)
    t = torch.as_tensor(targets, dtype=torch.long)
    loss = partial_asymmetric_loss(score_probabilities(s, scoring), t, gamma_pos, gamma_neg, clip)
    (grad,) = torch.autograd.grad(loss, s)  # (B, C)
    out = {}
    for name, value in (("known positive", 1), ("known negative", 0), ("unknown", UNKNOWN)):
        sel = t == value
        out[name] = float(grad[sel].abs().mean()) if sel.any() else float("nan")
    return out
