"""FOR on cached features: encode once with the frozen CLIP, then train only the SUM-CLIP head.

The backbone and the attention pooling are frozen, so everything the head needs from an
image (:class:`fgclip.methods.sumclip.PoolMemory`) and everything Cluster-CLIP needs (the
dense features and the global embedding) is computed once by :func:`encode_frozen`.
Training minimises L = w_sup L_sup + w_pl L_pl (:mod:`fgclip.losses.matching`) with AdamW.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..losses.matching import set_loss
from ..methods.sumclip import PoolMemory, SumClipHead, pool_memory
from ..models import Clip, encode_image_dense, images_to_tensor
from ..models.dense import collect_rows
from ..precision import autocast_context, check_precision
from ..progress import progress


@dataclass
class FrozenFeatures:
    pooled: torch.Tensor  # (I, D) CLIP's global embeddings
    dense: torch.Tensor  # (I, D, h, w) MaskCLIP-style dense features
    memory: PoolMemory  # what the SUM-CLIP head reads


@torch.no_grad()
def encode_frozen(clip: Clip, images: np.ndarray, batch_size: int = 128,
                  precision: str = "fp32") -> FrozenFeatures:
    """uint8 (I, H, W, 3) images -> the frozen backbone's outputs, on the model's device."""
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 (I, H, W, 3), got {images.dtype} {images.shape}")
    device = next(clip.model.parameters()).device
    pool = clip.model.visual.attnpool

    def batches():
        for i in range(0, len(images), batch_size):
            x = images_to_tensor(torch.from_numpy(images[i:i + batch_size]).to(device), clip)
            with autocast_context(device, precision):
                f = encode_image_dense(clip.model, x)
            mem = pool_memory(pool, f.feature_map.float())
            yield {"pooled": f.pooled.float(), "dense": f.dense.float(),
                   **{k: getattr(mem, k) for k in PoolMemory.__dataclass_fields__}}

    out = collect_rows(len(images), batches())  # no second full copy, as torch.cat would make
    return FrozenFeatures(out["pooled"], out["dense"],
                          PoolMemory(*(out[k] for k in PoolMemory.__dataclass_fields__)))


@dataclass
class HeadTrainConfig:
    epochs: int = 10
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    w_sup: float = 1.0  # weight of L_sup (0 = pseudo-label only)
    w_pl: float = 1.0  # weight of L_pl (0 = supervised only)
    null_weight: float = 0.1  # DETR's eos_coef for unmatched embeddings (0 = no "no object" class)
    seed: int = 0
    precision: str = "fp32"  # "bf16": forward and losses under bf16 autocast (fgclip.precision)


def train_head(head: SumClipHead, memory: PoolMemory, sup_targets: Sequence[torch.Tensor | None],
               pl_targets: Sequence[torch.Tensor | None], base_text: torch.Tensor,
               vocab_text: torch.Tensor, logit_scale: float, cfg: HeadTrainConfig) -> list[dict]:
    """Train ``head`` in place; returns the per-epoch mean losses (the config is not touched).

    sup_targets[i]: base-category indices of image i (None when i is unlabelled);
    pl_targets[i]: accepted open-vocabulary indices of image i. Each loss has its own
    learnable "no object" logit (trained here, not part of the head).
    """
    n = len(memory)
    if len(sup_targets) != n or len(pl_targets) != n:
        raise ValueError(f"{n} images but {len(sup_targets)} supervised and {len(pl_targets)} "
                         "pseudo-label target lists")
    if cfg.w_sup <= 0 and cfg.w_pl <= 0:
        raise ValueError("at least one of w_sup and w_pl must be positive")
    device = memory.mean.device
    check_precision(cfg.precision)  # before any work
    null = torch.zeros(2, device=device, requires_grad=True)  # "no object" logits: sup, pl
    nulls = (null[0], null[1]) if cfg.null_weight > 0 else (None, None)
    params = [p for p in head.parameters() if p.requires_grad] + [null]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    gen = torch.Generator().manual_seed(cfg.seed)
    head.train()
    history = []
    for epoch in range(cfg.epochs):
        sums = torch.zeros(3, device=device)  # loss, sup, pl: summed on device, read once per epoch
        batches = torch.randperm(n, generator=gen).split(cfg.batch_size)
        for idx in progress(batches, desc=f"epoch {epoch + 1}", leave=False):
            with autocast_context(device, cfg.precision):
                emb, _ = head(memory.select(idx))  # (b, N, D)
                sup = pl = emb.sum() * 0.0
                if cfg.w_sup > 0:
                    sup, _ = set_loss(emb, base_text, [sup_targets[i] for i in idx], logit_scale,
                                      nulls[0], cfg.null_weight)
                if cfg.w_pl > 0:
                    pl, _ = set_loss(emb, vocab_text, [pl_targets[i] for i in idx], logit_scale,
                                     nulls[1], cfg.null_weight)
                loss = cfg.w_sup * sup + cfg.w_pl * pl
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sums += torch.stack([loss, sup, pl]).detach().float()
        means = (sums / len(batches)).tolist()
        history.append({"epoch": epoch + 1, **dict(zip(("loss", "sup", "pl"), means))})
    head.eval()
    return history


@torch.no_grad()
def embed(head: SumClipHead, memory: PoolMemory, batch_size: int = 256,
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """All images' SUM-CLIP embeddings (I, N, D) and attention over [self, map] (I, N, 1 + P)."""
    head.eval()
    outs = [head(memory.select(slice(i, i + batch_size))) for i in range(0, len(memory), batch_size)]
    return torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])


def label_matrix(labels: Sequence[set[str]], vocab: Sequence[str]) -> torch.Tensor:
    """(I, V) bool: y_{i,v} = 1 when image i contains vocabulary name v. Unknown names raise."""
    col = {v: j for j, v in enumerate(vocab)}
    out = torch.zeros(len(labels), len(vocab), dtype=torch.bool)
    for i, names in enumerate(labels):
        unknown = set(names) - set(col)
        if unknown:
            raise ValueError(f"image {i} has labels {sorted(unknown)} not in the vocabulary")
        out[i, [col[n] for n in names]] = True
    return out


def targets_from(matrix: torch.Tensor) -> list[torch.Tensor]:
    """(I, V) bool -> per image the column indices that are set."""
    return [row.nonzero().flatten() for row in matrix]


def subsample_labels(targets: Sequence[torch.Tensor], fraction: float, seed: int
                     ) -> list[torch.Tensor | None]:
    """Keep the labels of a seeded ``fraction`` of images (at least one); the rest become
    unlabelled (None), which is not the same as "labelled with no object" (empty)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    n_keep = max(1, round(fraction * len(targets)))
    keep = set(np.random.default_rng(seed).permutation(len(targets))[:n_keep].tolist())
    return [t if i in keep else None for i, t in enumerate(targets)]


def _batches(clip: Clip, images: np.ndarray, batch_size: int):
    device = next(clip.model.parameters()).device
    for i in range(0, len(images), batch_size):
        yield images_to_tensor(torch.from_numpy(images[i:i + batch_size]).to(device), clip)


@torch.no_grad()
def encode_images_sumclip(clip: Clip, head: SumClipHead, images: np.ndarray,
                          batch_size: int = 128) -> torch.Tensor:
    """Visual inference with SUM-CLIP: images -> (I, N, D); backbone, pooling terms, head."""
    visual, out = clip.model.visual, []
    for x in _batches(clip, images, batch_size):
        x = visual.stem(x)
        for layer in (visual.layer1, visual.layer2, visual.layer3, visual.layer4):
            x = layer(x)  # (b, C, h, w)
        out.append(head(pool_memory(visual.attnpool, x))[0])
    return torch.cat(out)


@torch.no_grad()
def encode_images_cluster(clip: Clip, images: np.ndarray, k: int, seed: int = 0,
                          batch_size: int = 128) -> torch.Tensor:
    """Visual inference with Cluster-CLIP: images -> (I, k + 1, D); backbone, dense, k-means."""
    from ..methods.cluster_clip import cluster_clip_embeddings
    out = []
    for x in _batches(clip, images, batch_size):
        f = encode_image_dense(clip.model, x)
        out.append(cluster_clip_embeddings(f.dense, f.pooled, k, seed))
    return torch.cat(out)
