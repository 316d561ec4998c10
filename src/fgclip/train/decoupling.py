"""Training a multi-label head on cached frozen-CLIP features with a partial-label loss."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ..losses.asymmetric import partial_asymmetric_loss
from ..precision import autocast_context, check_precision
from ..progress import progress


@dataclass
class FitConfig:
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    gamma_pos: float = 1.0
    gamma_neg: float = 2.0
    clip: float = 0.05
    seed: int = 0
    device: str = "cpu"
    precision: str = "fp32"  # "bf16": forward and loss under bf16 autocast (fgclip.precision)
    scalar_lr: float = 0.1  # own AdamW lr (no weight decay) of the calibration scalars β, log t
    calibrate: bool = True  # start β at -mean(s) on the training features (head.calibrate)
    patience: int = 0  # fit_early_stopping: stop after this many epochs without a new best (0: never)


@dataclass
class FitResult:
    """What :func:`fit_early_stopping` did: losses and validation mAP per epoch, the best epoch."""

    loss: list[float]
    val_map: list[float]
    best_epoch: int  # 1-based; the head holds the parameters of this epoch


def _epochs(head: nn.Module, dense: torch.Tensor, pooled: torch.Tensor, targets: np.ndarray,
            cfg: FitConfig):
    """Train with P-ASL; yield the mean loss after each epoch (see :func:`fit`)."""
    if len(dense) != len(targets) or len(pooled) != len(targets):
        raise ValueError(f"dense ({len(dense)}), pooled ({len(pooled)}) and targets "
                         f"({len(targets)}) must have the same number of images")
    params = [p for p in head.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the head has no trainable parameters")
    device = torch.device(cfg.device)
    check_precision(cfg.precision)  # before any work
    scalars = list(head.scalar_parameters()) if hasattr(head, "scalar_parameters") else []
    if scalars and cfg.calibrate:
        head.calibrate(dense.to(device), pooled.to(device))
    ids = {id(p) for p in scalars}
    groups = [{"params": [p for p in params if id(p) not in ids]}]
    if scalars:
        groups.append({"params": scalars, "lr": cfg.scalar_lr, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    y = torch.as_tensor(targets, dtype=torch.long)
    g = torch.Generator().manual_seed(cfg.seed)
    for _ in progress(range(cfg.epochs), desc="epochs", leave=False):
        head.train()
        order, total = torch.randperm(len(y), generator=g), torch.zeros((), device=device)
        for start in range(0, len(y), cfg.batch_size):
            idx = order[start:start + cfg.batch_size]
            with autocast_context(device, cfg.precision):
                out = head(dense[idx].to(device), pooled[idx].to(device))
                loss = partial_asymmetric_loss(out.probs.float(), y[idx].to(device), cfg.gamma_pos,
                                               cfg.gamma_neg, cfg.clip)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach().float() * len(idx)
        head.eval()
        yield total.item() / len(y)  # one host sync per epoch


def fit(head: nn.Module, dense: torch.Tensor, pooled: torch.Tensor, targets: np.ndarray,
        cfg: FitConfig) -> list[float]:
    """Minimise P-ASL (γ+, γ-, clip from cfg) over the known entries of ``targets`` (N, C).

    AdamW on the head's trainable parameters (lr ``cfg.lr``; the calibration scalars of a
    sigmoid control at ``cfg.scalar_lr``, started at -mean(s) when ``cfg.calibrate``);
    batches drawn with a generator seeded by cfg.seed. Returns the mean loss of each epoch.
    """
    return list(_epochs(head, dense, pooled, targets, cfg))


def fit_early_stopping(head: nn.Module, dense: torch.Tensor, pooled: torch.Tensor,
                       targets: np.ndarray, cfg: FitConfig, val_dense: torch.Tensor,
                       val_pooled: torch.Tensor, val_targets: np.ndarray) -> FitResult:
    """:func:`fit` for up to cfg.epochs, scoring validation mAP (on log p, known validation
    entries only) after every epoch, stopping early after ``cfg.patience`` epochs without
    a new best (when > 0); the head ends with its best epoch's parameters."""
    from ..metrics.multilabel import known_map

    losses, maps, best, best_state = [], [], -1.0, None
    for loss in _epochs(head, dense, pooled, targets, cfg):
        losses.append(loss)
        _, log_p, _ = predict(head, val_dense, val_pooled, device=cfg.device)
        maps.append(known_map(log_p, val_targets))
        if maps[-1] > best:
            best = maps[-1]
            best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
        elif cfg.patience and len(maps) - 1 - int(np.argmax(maps)) >= cfg.patience:
            break
    head.load_state_dict(best_state)
    return FitResult(losses, maps, int(np.argmax(maps)) + 1)


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
    from ..methods.decoupling import score_log_probabilities

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


def make_head(variant: str, clip_model: nn.Module, tokenizer, class_names: list[str],
              word_vectors: torch.Tensor, hand_prompt: str, tau: float, rank: int = 32,
              scoring: str = "softmax", seed: int = 0) -> nn.Module:
    """One of :data:`VARIANTS` on the frozen CLIP; trainable parts initialised from ``seed``.

    zero-shot: hand-prompt text features "<hand_prompt> <name>." vs the global feature;
    linear probe: σ(W f + b) on the global feature; prompts only: category-specific CoOp
    context (initialised to the hand prompt's words) vs the global feature; decoupling
    only: decoupled features vs the hand-prompt text; full: decoupling + prompts.
    """
    from ..methods.decoupling import LinearProbe, MultiLabelCLIPHead, SemanticDecoupling
    from ..models.prompts import PromptLearner

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
    n_ctx = len(hand_prompt.split())
    prompts = PromptLearner(clip_model, tokenizer, class_names, n_ctx, True, hand_prompt, seed) \
        if variant in ("prompts only", "full") else None
    decoupling = SemanticDecoupling(dim, word_vectors.shape[1], rank, rank) \
        if variant in ("decoupling only", "full") else None
    return MultiLabelCLIPHead(word_vectors, None if prompts is not None else hand, prompts,
                              decoupling, tau, scoring).to(device)


@torch.no_grad()
def encode_image_files(clip, paths: list, batch_size: int = 128, device: str = "cpu",
                       transform=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Frozen dense (N, D, h, w) and pooled (N, D) features of image files, through
    ``transform`` (default: the model's own open_clip eval transform)."""
    from PIL import Image

    from ..models.dense import collect_rows, encode_image_dense

    transform = transform or clip.preprocess

    def batches():
        for start in progress(range(0, len(paths), batch_size), desc="encode images", leave=False):
            batch = torch.stack([transform(Image.open(p).convert("RGB"))
                                 for p in paths[start:start + batch_size]]).to(device)
            out = encode_image_dense(clip.model, batch)
            yield {"dense": out.dense.float().cpu(), "pooled": out.pooled.float().cpu()}

    out = collect_rows(len(paths), batches())  # no second full copy, as torch.cat would make
    return out["dense"], out["pooled"]
