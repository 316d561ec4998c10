"""Chapter 4's controls for the softmax-vs-sigmoid falsification: planted multi-label worlds where
the answer is known, and the loss's gradients at unknown entries at initialisation."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import torch
from torch import nn

from ... import verdicts
from ...losses.asymmetric import asymmetric_loss_terms
from ...methods.decoupling import MultiLabelCLIPHead, score_probabilities
from ...metrics.multilabel import known_map, per_class_ap
from ...partial_labels import UNKNOWN, known_masks, partial_targets
from ...train.selection import Selection, SelectionGrid, select_lr_epochs
from .heads import FitConfig, fit, known_prevalence, predict

WORLDS = ("paired", "independent", "single", "null")
# Chapter 4's independent unit: a category. All categories of a run share one trained head, so
# the head's noise is not resampled with them: it is the between-seed term V_seed.
CLUSTER_UNIT = "categories (the trained head's noise is in V_seed)"


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
                    cfg: FitConfig, grid: SelectionGrid, proportion: float = 0.5,
                    n_train: int = 800, n_val: int = 200, n_test: int = 1000, world_seed: int = 0,
                    noise: float = 0.6) -> tuple[dict[str, np.ndarray], dict[str, Selection]]:
    """Train the same cosine head under each scoring rule on a planted world, each rule's lr and
    epochs chosen by :func:`~fgclip.train.selection.select_lr_epochs` on the planted validation
    split (the chapter's grid). Returns per-category test AP on log p, {scoring: (n_seeds, C)},
    and the selections. Masks, initialisation and batches follow each seed; the world
    (prototypes and images) follows ``world_seed``. The grid's runs keep their per-epoch
    states, so a seed of the grid is evaluated at the chosen epoch without training again."""
    x, y = planted_world(kind, n_train + n_val + n_test, noise=noise, seed=world_seed)
    xt = torch.as_tensor(x)
    dense = torch.zeros(len(x), 1, 1, 1)  # unused: the head scores the global feature
    tr, va, te = (slice(0, n_train), slice(n_train, n_train + n_val),
                  slice(n_train + n_val, None))

    def run(scoring: str, sd: int, lr: float, epochs: int):
        known = known_masks(y[:n_train + n_val].shape, [proportion], sd)[proportion]
        targets = partial_targets(y[:n_train + n_val], known)
        torch.manual_seed(sd)
        head = MultiLabelCLIPHead(None, None, FreeText(y.shape[1], x.shape[1], sd), None, tau, scoring)
        curve, states = [], []

        def score(row: dict) -> bool:
            curve.append(known_map(predict(head, dense[va], xt[va])[1], targets[n_train:]))
            states.append({k: v.detach().clone() for k, v in head.state_dict().items()})
            return False

        fit(head, dense[tr], xt[tr], targets[tr],
            FitConfig(**{**cfg.__dict__, "seed": sd, "lr": lr, "epochs": epochs}), after_epoch=score)
        return head, curve, states

    def test_ap(head: nn.Module, state: dict) -> np.ndarray:
        head.load_state_dict(state)
        return per_class_ap(predict(head, dense[te], xt[te])[1], y[te])

    out, chosen = {}, {}
    for scoring in scorings:
        done = {(lr, sd): run(scoring, sd, lr, grid.epochs) for lr in grid.lrs for sd in grid.seeds}
        sel = select_lr_epochs(f"planted '{kind}', {scoring}", lambda lr, sd, e: done[lr, sd][1][:e], grid)
        chosen[scoring] = sel
        aps = []
        for sd in seeds:
            if (sel.lr, sd) in done:
                head, _, states = done[sel.lr, sd]
                aps.append(test_ap(head, states[sel.epochs - 1]))
            else:
                head, _, states = run(scoring, sd, sel.lr, sel.epochs)
                aps.append(test_ap(head, states[-1]))
        out[scoring] = np.stack(aps)
    return out, chosen


def planted_verdicts(kinds: tuple[str, ...], seeds: list[int], tau: float, cfg: FitConfig,
                     grid: SelectionGrid, seed: int, margin: float, noise: float = 1.5
                     ) -> tuple[dict, list[Selection]]:
    """:func:`planted_control` (softmax vs sigmoid+affine) on each planted world, read as
    ``fgclip.verdicts.compare`` over seeds x categories with the chapter's ``margin``; also
    every selection made on the worlds' validation splits."""
    out, sels = {}, []
    for kind in kinds:
        ap, chosen = planted_control(kind, ("softmax", "sigmoid+affine"), seeds, tau, cfg,
                                     grid, noise=noise, world_seed=seed)
        out[kind] = verdicts.compare(ap["softmax"], ap["sigmoid+affine"],
                                     claim=f"planted world '{kind}'",
                                     arms=("softmax (paper)", "sigmoid+affine"), unit="categories",
                                     cluster_unit=CLUSTER_UNIT, seed=seed, margin=margin)
        sels += list(chosen.values())
    return out, sels


def init_gradients(make: Callable, scorings: tuple[str, ...], dense: torch.Tensor,
                   pooled: torch.Tensor, targets: np.ndarray, seed: int, cfg: FitConfig
                   ) -> pd.DataFrame:
    """:func:`score_gradients` on one batch (the first cfg.batch_size images of
    dense/pooled/targets) for the full head at its initialisation under each scoring rule
    (controls calibrated on all given images and their known labels); one row per rule."""
    n, rows = min(cfg.batch_size, len(dense)), {}
    for scoring in scorings:
        head = make("full", scoring, seed)
        head.calibrate(dense, pooled, known_prevalence(targets))
        with torch.no_grad():
            s = head(dense[:n], pooled[:n]).scores  # (n, C)
        rows[scoring] = score_gradients(s, targets[:n], scoring, cfg.gamma_pos, cfg.gamma_neg,
                                        cfg.clip)
    return pd.DataFrame(rows).T.rename_axis("P-ASL gradient on the scores")


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

