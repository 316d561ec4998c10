"""FOR on cached features: encode once with the frozen CLIP, then train only the SUM-CLIP head.

The backbone and the attention pooling are frozen, so everything the head needs from an
image (:class:`fgclip.methods.sumclip.PoolMemory`) and everything Cluster-CLIP needs (the
dense features and the global embedding) is computed once by :func:`encode_frozen`.
Training minimises L = w_sup L_sup + w_pl L_pl (:mod:`fgclip.losses.matching`) with AdamW.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from ...losses.matching import set_loss
from ...methods.cluster_clip import cluster_clip_embeddings
from ...methods.sumclip import PoolMemory, SumClipHead, pool_memory
from ...models import Clip, encode_image_dense, encode_image_rows
from ...precision import autocast_context
from ...train.loop import HeadTraining, seeded_batches, train_loop


@dataclass
class FrozenFeatures:
    pooled: torch.Tensor  # (I, D) CLIP's global embeddings
    dense: torch.Tensor  # (I, D, h, w) MaskCLIP-style dense features
    memory: PoolMemory  # what the SUM-CLIP head reads


def encode_frozen(clip: Clip, images: np.ndarray, batch_size: int = 128,
                  precision: str = "fp32") -> FrozenFeatures:
    """uint8 (I, H, W, 3) images -> the frozen backbone's outputs, on the model's device."""
    device = next(clip.model.parameters()).device
    pool = clip.model.visual.attnpool

    def frozen(x: torch.Tensor) -> dict[str, torch.Tensor]:
        with autocast_context(device, precision):
            f = encode_image_dense(clip.model, x)
        mem = pool_memory(pool, f.feature_map.float())
        return {"pooled": f.pooled.float(), "dense": f.dense.float(),
                **{k: getattr(mem, k) for k in PoolMemory.__dataclass_fields__}}

    out = encode_image_rows(clip, images, frozen, batch_size)
    return FrozenFeatures(out["pooled"], out["dense"],
                          PoolMemory(*(out[k] for k in PoolMemory.__dataclass_fields__)))


@dataclass(frozen=True)
class HeadTrainConfig(HeadTraining):
    """One SUM-CLIP head-training run: the shared loop settings (``HeadTraining``) and the
    weights of the two set losses."""
    w_sup: float = 1.0  # weight of L_sup (0 = pseudo-label only)
    w_pl: float = 1.0  # weight of L_pl (0 = supervised only)
    null_weight: float = 0.1  # DETR's eos_coef for unmatched embeddings (0 = no "no object" class)


def train_head(head: SumClipHead, memory: PoolMemory, sup_targets: Sequence[torch.Tensor | None],
               pl_targets: Sequence[torch.Tensor | None], base_text: torch.Tensor,
               vocab_text: torch.Tensor, logit_scale: float, cfg: HeadTrainConfig,
               after_epoch: Callable[[dict], bool] | None = None) -> list[dict]:
    """Train ``head`` in place through the one loop (:func:`fgclip.train.loop.train_loop`);
    returns the history, per epoch the mean of L, L_sup and L_pl over its batches.
    ``after_epoch(row)`` runs after every epoch (e.g. a validation score; True stops).

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
    null = torch.zeros(2, device=device, requires_grad=True)  # "no object" logits: sup, pl
    nulls = (null[0], null[1]) if cfg.null_weight > 0 else (None, None)
    gen = torch.Generator().manual_seed(cfg.seed)

    def batch_loss(idx: torch.Tensor) -> dict[str, torch.Tensor]:
        emb, _ = head(memory.select(idx))  # (b, N, D)
        sup = pl = emb.sum() * 0.0
        if cfg.w_sup > 0:
            sup, _ = set_loss(emb, base_text, [sup_targets[i] for i in idx], logit_scale,
                              nulls[0], cfg.null_weight)
        if cfg.w_pl > 0:
            pl, _ = set_loss(emb, vocab_text, [pl_targets[i] for i in idx], logit_scale,
                             nulls[1], cfg.null_weight)
        return {"loss": cfg.w_sup * sup + cfg.w_pl * pl, "sup": sup, "pl": pl}

    params = [p for p in head.parameters() if p.requires_grad] + [null]
    return train_loop(params, lambda: seeded_batches(n, cfg.batch_size, gen), batch_loss,
                      cfg, modules=(head,), after_epoch=after_epoch)


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


@torch.no_grad()
def encode_images_sumclip(clip: Clip, head: SumClipHead, images: np.ndarray,
                          batch_size: int = 128) -> torch.Tensor:
    """Visual inference with SUM-CLIP: images -> (I, N, D); backbone, pooling terms, head."""
    visual = clip.model.visual

    def embeddings(x: torch.Tensor) -> dict[str, torch.Tensor]:
        x = visual.stem(x)
        for layer in (visual.layer1, visual.layer2, visual.layer3, visual.layer4):
            x = layer(x)  # (b, C, h, w)
        return {"e": head(pool_memory(visual.attnpool, x))[0]}  # (b, N, D)
    return encode_image_rows(clip, images, embeddings, batch_size)["e"]


@torch.no_grad()
def encode_images_cluster(clip: Clip, images: np.ndarray, k: int, seed: int = 0,
                          batch_size: int = 128) -> torch.Tensor:
    """Visual inference with Cluster-CLIP: images -> (I, k + 1, D); backbone, dense, k-means."""
    def clusters(x: torch.Tensor) -> dict[str, torch.Tensor]:
        f = encode_image_dense(clip.model, x)
        return {"e": cluster_clip_embeddings(f.dense, f.pooled, k, seed)}  # (b, k + 1, D)
    return encode_image_rows(clip, images, clusters, batch_size)["e"]
