"""Chapter 4's heads on cached frozen-CLIP features: the variants of the framework, trained with
the partial-label loss through the one loop (early-stopped on validation), and their predictions."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ...losses.asymmetric import partial_asymmetric_loss
from ...methods.decoupling import (LinearProbe, MultiLabelCLIPHead, SemanticDecoupling, clip_word_vectors, load_glove,
                                   score_log_probabilities)
from ...metrics.multilabel import known_map
from ...models.prompts import PromptLearner
from ...partial_labels import UNKNOWN
from ...train.loop import HeadTraining, seeded_batches, train_loop


@dataclass(frozen=True)
class FitConfig(HeadTraining):
    """One multi-label head-training run: the shared loop settings (``HeadTraining``), P-ASL's
    focusing parameters and the calibration scalars' own optimiser settings."""
    gamma_pos: float = 1.0
    gamma_neg: float = 2.0
    clip: float = 0.05
    scalar_lr: float = 0.1  # own AdamW lr (no weight decay) of the calibration scalars β, log t
    calibrate: bool = True  # start β at logit(π) - mean(s) on the training features and labels (head.calibrate)
    patience: int = 0  # fit_early_stopping: stop after this many epochs without a new best (0: never)


@dataclass
class FitResult:
    """What :func:`fit_early_stopping` did: its history (loss and validation mAP per epoch)
    and the best epoch."""

    history: list[dict]
    best_epoch: int  # 1-based; the head holds the parameters of this epoch

    @property
    def val_map(self) -> list[float]:
        return [row["val_map"] for row in self.history]


def known_prevalence(targets) -> float:
    """Share of positives among the known entries of ``targets`` (values 1, 0, -1): the label
    prevalence a sigmoid control's threshold starts from (``calibrate``)."""
    t = np.asarray(targets)
    known = t != UNKNOWN
    if not (t[known] == 1).any() or known.sum() == (t == 1).sum():
        raise ValueError("known_prevalence: the known entries need both a positive and a negative")
    return float((t[known] == 1).mean())


def fit(head: nn.Module, dense: torch.Tensor, pooled: torch.Tensor, targets: np.ndarray,
        cfg: FitConfig, after_epoch=None) -> list[dict]:
    """Minimise P-ASL (γ+, γ-, clip from cfg) over the known entries of ``targets`` (N, C)
    through the one loop (:func:`fgclip.train.loop.train_loop`); returns its history.

    AdamW on the head's trainable parameters (lr ``cfg.lr``; the calibration scalars of a
    sigmoid control at ``cfg.scalar_lr``, started at logit(π) - mean(s) when ``cfg.calibrate``,
    π the known positives' share, :func:`known_prevalence`);
    batches drawn with a generator seeded by cfg.seed. ``after_epoch(row)`` may add to the
    epoch's history row and return True to stop.
    """
    if len(dense) != len(targets) or len(pooled) != len(targets):
        raise ValueError(f"dense ({len(dense)}), pooled ({len(pooled)}) and targets "
                         f"({len(targets)}) must have the same number of images")
    params = [p for p in head.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the head has no trainable parameters")
    device = torch.device(cfg.device)
    scalars = list(head.scalar_parameters()) if hasattr(head, "scalar_parameters") else []
    if scalars and cfg.calibrate:
        head.calibrate(dense.to(device), pooled.to(device), known_prevalence(targets))
    ids = {id(p) for p in scalars}
    groups = [{"params": [p for p in params if id(p) not in ids]}]
    if scalars:
        groups.append({"params": scalars, "lr": cfg.scalar_lr, "weight_decay": 0.0})
    y = torch.as_tensor(targets, dtype=torch.long)
    gen = torch.Generator().manual_seed(cfg.seed)

    def batch_loss(idx: torch.Tensor) -> dict[str, torch.Tensor]:
        out = head(dense[idx].to(device), pooled[idx].to(device))
        return {"loss": partial_asymmetric_loss(out.probs.float(), y[idx].to(device), cfg.gamma_pos,
                                                cfg.gamma_neg, cfg.clip)}

    return train_loop(groups, lambda: seeded_batches(len(y), cfg.batch_size, gen), batch_loss, cfg,
                      modules=(head,), desc="fit epoch", after_epoch=after_epoch)


def fit_early_stopping(head: nn.Module, dense: torch.Tensor, pooled: torch.Tensor,
                       targets: np.ndarray, cfg: FitConfig, val_dense: torch.Tensor,
                       val_pooled: torch.Tensor, val_targets: np.ndarray) -> FitResult:
    """:func:`fit` for up to cfg.epochs, scoring validation mAP (on log p, known validation
    entries only) after every epoch, stopping early after ``cfg.patience`` epochs without
    a new best (when > 0); the head ends with its best epoch's parameters."""
    maps, best_state = [], None

    def score(row: dict) -> bool:
        nonlocal best_state
        _, log_p, _ = predict(head, val_dense, val_pooled, device=cfg.device)
        row["val_map"] = known_map(log_p, val_targets)
        maps.append(row["val_map"])
        if maps[-1] > max(maps[:-1], default=-1.0):
            best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
            return False
        return bool(cfg.patience) and len(maps) - 1 - int(np.argmax(maps)) >= cfg.patience

    history = fit(head, dense, pooled, targets, cfg, after_epoch=score)
    head.load_state_dict(best_state)
    return FitResult(history, int(np.argmax(maps)) + 1)


class Prediction(NamedTuple):
    """What a head says about N images (:func:`predict`)."""

    scores: np.ndarray  # (N, C) s_c
    log_p: np.ndarray  # (N, C) log p_c, the paper's prediction
    attention: np.ndarray | None  # (N, C, h, w) a_c for a decoupling head, else None


@torch.no_grad()
def predict(head: nn.Module, dense: torch.Tensor, pooled: torch.Tensor, batch_size: int = 256,
            device: str = "cpu") -> Prediction:
    """Scores s (N, C), the paper's prediction log p (N, C) (log-softmax or log-sigmoid of s
    by the head's scoring) and, for a decoupling head, attention maps (N, C, h, w)."""
    head.eval()
    scores, maps = [], []
    for start in range(0, len(dense), batch_size):
        out = head(dense[start:start + batch_size].to(device),
                   pooled[start:start + batch_size].to(device))
        scores.append(out.scores.float().cpu())
        if out.attention is not None:
            maps.append(out.attention.float().cpu())
    s = torch.cat(scores)
    log_p = score_log_probabilities(s, getattr(head, "scoring", "sigmoid"))
    return Prediction(s.numpy(), log_p.numpy(), torch.cat(maps).numpy() if maps else None)


VARIANTS = ("zero-shot", "linear probe", "prompts only", "decoupling only", "full")


def category_word_vectors(clip, class_names: list[str], glove_path: str = "") -> torch.Tensor:
    """x_c (C, d_x): GloVe vectors from ``glove_path`` when given, else the frozen CLIP's text
    embedding of each bare class name."""
    return load_glove(glove_path, class_names) if glove_path else \
        clip_word_vectors(clip.model, clip.tokenizer, class_names)


def head_maker(clip, glove_path: str, hand_prompt: str, tau: float, rank: int, n_ctx: int):
    """class names -> make(variant, scoring, seed): :func:`make_head` on the frozen ``clip`` for
    those categories, their word vectors from :func:`category_word_vectors`."""
    def for_names(class_names: list[str]):
        x_c = category_word_vectors(clip, class_names, glove_path)
        return lambda variant, scoring, seed: make_head(variant, clip.model, clip.tokenizer, class_names, x_c,
                                                        hand_prompt, tau, rank, scoring, seed, n_ctx)
    return for_names


def make_head(variant: str, clip_model: nn.Module, tokenizer, class_names: list[str],
              word_vectors: torch.Tensor, hand_prompt: str, tau: float, rank: int = 32,
              scoring: str = "softmax", seed: int = 0, n_ctx: int = 0) -> nn.Module:
    """One of :data:`VARIANTS` on the frozen CLIP; trainable parts initialised from ``seed``.

    zero-shot: hand-prompt text features "<hand_prompt> <name>." vs the global feature;
    linear probe: σ(W f + b) on the global feature; prompts only: category-specific CoOp
    context (initialised to the hand prompt's words) vs the global feature; decoupling
    only: decoupled features vs the hand-prompt text; full: decoupling + prompts.
    ``n_ctx``: M, the context tokens per category prompt; 0 (or the hand prompt's word count)
    starts them at the hand prompt's words, any other M at seeded random vectors (CoOp's).
    """
    if n_ctx < 0:
        raise ValueError(f"n_ctx must be >= 0 (0: the word count of hand_prompt), got {n_ctx}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    torch.manual_seed(seed)
    device = next(clip_model.parameters()).device
    dim = clip_model.text_projection.shape[-1] if not isinstance(
        clip_model.text_projection, nn.Linear) else clip_model.text_projection.out_features
    if variant == "linear probe":
        return LinearProbe(dim, len(class_names)).to(device)
    with torch.no_grad():
        hand = clip_model.encode_text(tokenizer(
            [f"{hand_prompt} {n}." for n in class_names]).to(device)).float()  # (C, D)
    words = len(hand_prompt.split())
    m = n_ctx or words
    prompts = PromptLearner(clip_model, tokenizer, class_names, m, True, hand_prompt if m == words else None, seed) \
        if variant in ("prompts only", "full") else None
    decoupling = SemanticDecoupling(dim, word_vectors.shape[1], rank, rank) \
        if variant in ("decoupling only", "full") else None
    return MultiLabelCLIPHead(word_vectors, None if prompts is not None else hand, prompts,
                              decoupling, tau, scoring).to(device)
