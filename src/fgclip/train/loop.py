"""The one training loop of every head on cached frozen features (chapters 1, 3 and 4).

Each chapter says what a batch is and what its loss is; this module does the rest the same
way for all: AdamW, seeded batches, precision, a step budget, train/eval modes and the
per-epoch history. With θ the head's parameters and B_e the batches of epoch e it takes

    θ <- AdamW(θ, ∇_θ L(b))  for each b in B_e,   history_e = mean_{b in B_e} L(b)

(each further term the loss reports, e.g. L_sup and L_pl, is averaged the same way).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence, TypeVar

import torch
from torch import nn

from ..precision import autocast_context, check_precision
from ..progress import progress

Batch = TypeVar("Batch")


@dataclass(frozen=True)
class HeadTraining:
    """The settings every head-training run shares; each chapter's config adds its loss's
    (frozen, so an arm can be keyed by its config)."""
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4  # AdamW's decoupled weight decay
    steps: int | None = None  # total optimiser steps over as many passes as it takes; None: `epochs` passes
    seed: int = 0
    device: str = "cpu"
    precision: str = "fp32"  # "bf16": forward and loss under bf16 autocast (fgclip.precision)

    def __post_init__(self):
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be >= 1 or None, got {self.steps}")
        check_precision(self.precision)  # before any work


def seeded_batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch's batches: a random permutation of range(n) cut into pieces of batch_size."""
    return list(torch.randperm(n, generator=generator).split(batch_size))


def train_loop(groups: Sequence[dict] | Iterable[nn.Parameter],
               epoch_batches: Callable[[], Iterable[Batch]],
               batch_loss: Callable[[Batch], dict[str, torch.Tensor]], cfg: HeadTraining,
               modules: Sequence[nn.Module] = (), desc: str = "epoch",
               after_epoch: Callable[[dict], bool] | None = None) -> list[dict[str, float]]:
    """Minimise ``batch_loss(b)["loss"]`` over the batches ``epoch_batches()`` yields, one
    call per epoch, for ``cfg.epochs`` epochs or until ``cfg.steps`` optimiser steps.

    ``groups``: AdamW parameters or parameter groups (lr and weight decay from ``cfg``
    unless a group sets its own); the precision context is opened on their device. ``modules`` go to train mode for an epoch and back to eval
    mode after it. ``after_epoch(row)`` may return True to stop early. Returns the history:
    per epoch {"epoch": e, "loss": ..., other terms of batch_loss: ...}, each the mean over
    that epoch's batches (summed on the device, read once per epoch).
    """
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    device = next(p.device for g in opt.param_groups for p in g["params"])  # where the head computes, not cfg.device
    history: list[dict[str, float]] = []
    budget = cfg.steps
    while (len(history) < cfg.epochs) if budget is None else budget > 0:
        epoch = len(history) + 1
        for m in modules:
            m.train()
        sums, names, n = None, (), 0
        for batch in progress(epoch_batches(), desc=f"{desc} {epoch}", leave=False):
            if budget == 0:
                break
            with autocast_context(device, cfg.precision):
                terms = batch_loss(batch)
            opt.zero_grad(set_to_none=True)
            terms["loss"].backward()
            opt.step()
            values = torch.stack([t.detach().float() for t in terms.values()])  # (n_terms,)
            sums, names, n = values if sums is None else sums + values, tuple(terms), n + 1
            budget = None if budget is None else budget - 1
        for m in modules:
            m.eval()
        if n == 0:
            raise ValueError(f"{desc}: epoch {epoch} had no batch to train on")
        history.append({"epoch": epoch, **dict(zip(names, (sums / n).tolist()))})
        if after_epoch is not None and after_epoch(history[-1]):
            break
    return history
