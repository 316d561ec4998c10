"""Chapter 1's heads trained side by side: the MaxImage heads of several training seeds
stacked along a leading seed dimension, one stack per learning rate, all trained in one
run of the one head-training loop (:func:`fgclip.train.loop.train_loop`).

Replica (lr, s) starts from the heads of seed s (:func:`~fgclip.studies.maximage.heads.make_heads`),
draws the batches of seed s (:func:`~fgclip.studies.maximage.heads.caption_batches`) and is
updated by AdamW at its own learning rate. The loss summed over replicas has, for every
replica's parameters, exactly that replica's gradient, and AdamW works element by element,
so each replica follows the run :func:`~fgclip.studies.maximage.heads.train_heads` would
give it alone (a test checks this); only the matrix products are batched.

Training is counted in *periods* of a fixed number of optimiser steps (one pass over the
training images at the chapter's batch size), so an arm with another batch size gets the
same step budget. After every period each replica's validation loss is recorded (its own
loss on fixed batches of the validation images) and, for the selection, its state is kept.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...losses.ranking import npair_loss, triplet_loss
from ...methods.maximage import MaxImageHeads, ragged_pair_scores
from ...train.loop import train_loop
from .data import Split, WordBank
from .evaluation import shuffled_caption_image
from .heads import LOSSES, TrainConfig, caption_batches, make_heads

_LAYERS = ("0_weight", "0_bias", "2_weight", "2_bias")  # MaxImageHeads' two-layer MLPs (Linear, GELU, Linear)


class StackedHeads(nn.Module):
    """S MaxImage heads with stacked parameters: each weight (S, out, in), each bias (S, out)."""

    def __init__(self, heads: Sequence[MaxImageHeads]):
        super().__init__()
        if not heads or len({h.score for h in heads}) != 1:
            raise ValueError("StackedHeads needs at least one head, all with the same score")
        self.score = heads[0].score
        states = [h.state_dict() for h in heads]
        self.params = nn.ParameterDict({f"{b}_{k}": nn.Parameter(torch.stack([s[f"{b}.{k.replace('_', '.')}"]
                                                                              for s in states]).clone())
                                        for b in ("image", "text") for k in _LAYERS})

    def __len__(self) -> int:
        return self.params["image_0_weight"].shape[0]

    def _mlp(self, branch: str, x: torch.Tensor) -> torch.Tensor:
        """(S, N, D_in) -> (S, N, E): Linear, GELU, Linear, replica by replica."""
        p = {k: self.params[f"{branch}_{k}"] for k in _LAYERS}
        x = F.gelu(torch.baddbmm(p["0_bias"].unsqueeze(1), x, p["0_weight"].transpose(1, 2)))
        return torch.baddbmm(p["2_bias"].unsqueeze(1), x, p["2_weight"].transpose(1, 2))

    def image_vectors(self, feats: torch.Tensor) -> torch.Tensor:
        """(S, B, Di, h, w) frozen features -> v (S, B, E, h, w), unit norm per position for cosine."""
        s, b, d, h, w = feats.shape
        v = self._mlp("image", feats.permute(0, 1, 3, 4, 2).reshape(s, b * h * w, d))
        v = F.normalize(v, dim=-1) if self.score == "cosine" else v
        return v.view(s, b, h, w, -1).permute(0, 1, 4, 2, 3)

    def word_vectors(self, words: torch.Tensor) -> torch.Tensor:
        """(S, W, Dt) frozen word features -> t (S, W, E), unit norm per word for cosine."""
        t = self._mlp("text", words)
        return F.normalize(t, dim=-1) if self.score == "cosine" else t

    def state(self) -> dict[str, torch.Tensor]:
        """A detached copy of the stacked parameters (one snapshot per period)."""
        return {k: p.detach().clone() for k, p in self.params.items()}

    @staticmethod
    def unstack(state: dict[str, torch.Tensor], k: int, score: str) -> MaxImageHeads:
        """Replica k of a snapshot as plain :class:`MaxImageHeads` (eval mode, on the CPU)."""
        w = state["image_0_weight"]
        heads = MaxImageHeads(w.shape[2], state["text_0_weight"].shape[2], w.shape[1], score)
        heads.load_state_dict({f"{b}.{layer.replace('_', '.')}": state[f"{b}_{layer}"][k].cpu()
                               for b in ("image", "text") for layer in _LAYERS})
        return heads.eval()


def batch_stream(caption_image: Sequence[int], batch_size: int, seed: int) -> Iterator:
    """The batches of :func:`~fgclip.studies.maximage.heads.caption_batches`, pass after pass, forever."""
    epoch = caption_batches(list(caption_image), batch_size, seed)
    while True:
        yield from epoch()


def steps_per_pass(n_images: int, batch_size: int) -> int:
    """Optimiser steps of one pass over ``n_images`` (a last batch of one image is dropped)."""
    return len([s for s in range(0, n_images - 1, batch_size) if min(batch_size, n_images - s) >= 2])


@dataclass(frozen=True)
class StackBatch:
    """One step of S replicas' batches: images (S, B), same-text mask (S, B, B) or None,
    words (S, W, Dt) of the captions caption after caption and caption_of_word (S, W), -1
    in the slots a replica with fewer words leaves empty."""
    images: torch.Tensor
    same: torch.Tensor | None
    words: torch.Tensor
    caption_of_word: torch.Tensor


def stack_batch(batches: Sequence[tuple], bank: WordBank, text_ids: torch.Tensor | None) -> StackBatch:
    """Stack one batch (image indices, caption indices) per replica into a :class:`StackBatch`."""
    images = torch.as_tensor(np.stack([bi for bi, _ in batches]))
    caps = torch.as_tensor(np.stack([bc for _, bc in batches]))  # (S, B)
    order = [bank[c].words_in_order() for c in caps]  # per replica: (caption, row) of each word
    n = max(len(c) for c, _ in order)
    words = torch.zeros(len(batches), n, bank.dim)
    owner = torch.full((len(batches), n), -1, dtype=torch.long)
    for k, (c, rows) in enumerate(order):
        words[k, :len(rows)], owner[k, :len(c)] = bank.rows[rows], c
    same = None
    if text_ids is not None:
        ids = text_ids[caps]  # (S, B)
        same = (ids[:, :, None] == ids[:, None, :]) & ~torch.eye(caps.shape[1], dtype=torch.bool)
    return StackBatch(images, same, words, owner)


def stacked_losses(heads: StackedHeads, img: torch.Tensor, batch: StackBatch, cfg: TrainConfig) -> torch.Tensor:
    """(S,) each replica's retrieval loss on its own batch (eq-npair-loss or eq-triplet-loss on
    the scores of eq-maximage-score / eq-average-pooling-score)."""
    device = next(heads.parameters()).device
    v = heads.image_vectors(img[batch.images].to(device))  # (S, B, E, h, w)
    t = heads.word_vectors(batch.words.to(device))  # (S, W, E)
    scores = ragged_pair_scores(v, t, batch.caption_of_word.to(device), batch.images.shape[1], cfg.aggregator)
    same = None if batch.same is None else batch.same.to(device)
    if cfg.loss == "npair":
        return npair_loss(scores, cfg.temperature, same)
    return triplet_loss(scores, cfg.margin, cfg.loss.removeprefix("triplet-"), same)


@dataclass
class StackRun:
    """What :func:`train_stacks` returns: per (lr, seed) the validation loss after each period
    (empty without a validation split) and the mean training loss of each period's batches,
    per period the state of every lr's stack (when kept), every lr's final state, and the
    loop's history (loss summed over replicas)."""
    lrs: tuple[float, ...]
    seeds: tuple[int, ...]
    curves: dict[tuple[float, int], list[float]]
    snapshots: list[list[dict[str, torch.Tensor]]]
    finals: list[dict[str, torch.Tensor]]  # per lr, the stacked parameters after the last period
    score: str
    history: list[dict] = field(default_factory=list)
    train_curves: dict[tuple[float, int], list[float]] = field(default_factory=dict)

    def heads(self, lr: float, period: int | None = None) -> list[MaxImageHeads]:
        """The heads of every seed at ``lr`` after ``period`` periods (1-based; None: the last)."""
        k = self.lrs.index(lr)
        state = self.finals[k] if period is None else self.snapshots[period - 1][k]
        return [StackedHeads.unstack(state, j, self.score) for j in range(len(self.seeds))]


def _joined(runs: Sequence[StackRun]) -> StackRun:
    """One :class:`StackRun` from runs over disjoint chunks of seeds (same lrs and periods):
    states concatenated along the seed dimension, curves merged, losses of the history summed."""
    if len(runs) == 1:
        return runs[0]

    def cat(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        return {k: torch.cat([st[k] for st in states]) for k in states[0]}

    first = runs[0]
    snapshots = [[cat([r.snapshots[p][k] for r in runs]) for k in range(len(first.lrs))]
                 for p in range(len(first.snapshots))]
    history = [{k: (v if k == "epoch" else sum(r.history[e][k] for r in runs)) for k, v in row.items()}
               for e, row in enumerate(first.history)]
    return StackRun(first.lrs, tuple(s for r in runs for s in r.seeds), {k: c for r in runs for k, c in r.curves.items()},
                    snapshots, [cat([r.finals[k] for r in runs]) for k in range(len(first.lrs))], first.score,
                    history, {k: c for r in runs for k, c in r.train_curves.items()})


# Seeds per stack: one product over 25 seeds holds a (25, B, positions, words) score tensor of
# about 160 MB whose every pass goes through memory; stacks of 4 keep it near 25 MB. Measured
# on the 2-core AMD EPYC, one thread, nothing beside it, 25 seeds x 8 periods of the main arm:
# 31-34 s in one stack, 24.5-26 s in stacks of 4 (2026-12-06). With two threads it is no faster.
STACK_SIZE = 4


def train_stacks(fit: Split, val: Split | None, cfg: TrainConfig, lrs: Sequence[float], seeds: Sequence[int],
                 periods: int, period: int, shuffled: bool = False, keep_states: bool = False,
                 stack_size: int = STACK_SIZE) -> StackRun:
    """:func:`train_stack` over chunks of at most ``stack_size`` seeds, one after another, joined
    into one run. A seed's run is its own whatever its chunk (its heads, batches and AdamW
    state are its own); only the rounding of the batched products may differ with the chunk."""
    if stack_size < 1:
        raise ValueError(f"stack_size must be at least 1, got {stack_size}")
    seeds = tuple(seeds)
    return _joined([train_stack(fit, val, cfg, lrs, seeds[i:i + stack_size], periods, period, shuffled, keep_states)
                    for i in range(0, len(seeds), stack_size)])


def train_stack(fit: Split, val: Split | None, cfg: TrainConfig, lrs: Sequence[float], seeds: Sequence[int],
                periods: int, period: int, shuffled: bool = False, keep_states: bool = False) -> StackRun:
    """Train the heads of every (lr, seed) side by side for ``periods`` periods of ``period``
    optimiser steps, with ``cfg``'s loss, aggregator, score, batch size and precision.

    ``shuffled``: each seed's captions are dealt to the images at random
    (:func:`~fgclip.studies.maximage.evaluation.shuffled_caption_image`, in the validation
    split too), the no-grounding arm. With ``val`` each replica's loss on fixed validation
    batches is recorded after every period (a non-finite loss, a diverged run, is recorded
    as the largest finite one of the run so that it is never chosen).
    """
    if cfg.loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {cfg.loss!r}")
    if cfg.mask_same_text and not fit.text_ids:
        raise ValueError("mask_same_text=True needs the split's text_ids")
    device = torch.device(cfg.device)
    lrs, seeds = tuple(lrs), tuple(seeds)

    def links(split: Split, s: int) -> list[int]:
        return shuffled_caption_image(split.corpus.caption_image, s) if shuffled else split.corpus.caption_image

    def ids(split: Split) -> torch.Tensor | None:
        return torch.as_tensor(split.text_ids) if cfg.mask_same_text else None

    stacks = [StackedHeads([make_heads(fit.img.shape[1], fit.words.dim, cfg.embed_dim, s, cfg.score, cfg.bias_init)
                            for s in seeds]).to(device) for _ in lrs]
    streams = [batch_stream(links(fit, s), cfg.batch_size, s) for s in seeds]
    fit_ids = ids(fit)
    val_batches = []
    if val is not None:  # fixed: every image once, one caption each, the same after every period
        firsts = [caption_batches(links(val, s), cfg.batch_size, 0)() for s in seeds]
        val_batches = [stack_batch(group, val.words, ids(val)) for group in zip(*firsts)]
    curves: dict[tuple[float, int], list[float]] = {(lr, s): [] for lr in lrs for s in seeds}
    train_curves: dict[tuple[float, int], list[float]] = {(lr, s): [] for lr in lrs for s in seeds}
    snapshots: list[list[dict[str, torch.Tensor]]] = []
    running: list[torch.Tensor] = []  # this period's per-replica training losses, (len(lrs), S) per step

    def batch_loss(batch: StackBatch) -> dict[str, torch.Tensor]:
        losses = [stacked_losses(h, fit.img, batch, cfg) for h in stacks]
        running.append(torch.stack([x.detach().float() for x in losses]))
        return {"loss": sum(x.sum() for x in losses)}

    @torch.no_grad()
    def after_period(row: dict) -> bool:
        mean = torch.stack(running).mean(dim=0).tolist()  # (len(lrs), S)
        running.clear()
        for i, lr in enumerate(lrs):
            for j, s in enumerate(seeds):
                train_curves[(lr, s)].append(mean[i][j])
        for lr, h in zip(lrs, stacks):
            if val_batches:
                n = sum(b.images.shape[1] for b in val_batches)
                loss = sum(stacked_losses(h, val.img, b, cfg) * b.images.shape[1] for b in val_batches) / n
                for s, x in zip(seeds, loss.tolist()):
                    curves[(lr, s)].append(x)
        if keep_states:
            snapshots.append([h.state() for h in stacks])
        return False

    groups = [{"params": list(h.parameters()), "lr": lr} for lr, h in zip(lrs, stacks)]
    history = train_loop(groups, lambda: [stack_batch([next(st) for st in streams], fit.words, fit_ids)
                                          for _ in range(period)],
                         batch_loss, replace(cfg, epochs=periods, steps=None), modules=stacks,
                         desc=f"{cfg.loss}/{cfg.aggregator} x{len(lrs) * len(seeds)}", after_epoch=after_period)
    finite = [x for c in curves.values() for x in c if np.isfinite(x)]
    worst = max(finite) if finite else 0.0
    curves = {k: [x if np.isfinite(x) else worst for x in c] for k, c in curves.items()}
    return StackRun(lrs, seeds, curves, snapshots, [h.state() for h in stacks], stacks[0].score, history, train_curves)
