"""Dense (per-position) image features in CLIP's joint space, next to the pooled embedding.

ViT: the patch tokens after the last block go through the same ``ln_post`` and ``proj``
as the class token, v_{r,c} = LN(z_{r,c}) W_proj, so they live in the text space.
ModifiedResNet: the layer-4 map f_{r,c} feeds the attention pooling; its projected form
is the MaskCLIP value path, v_{r,c} = W_c (W_v (f_{r,c} + p_{r,c}) + b_v) + b_c, i.e. what
the pooling would output if it attended to position (r, c) alone.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from open_clip.modified_resnet import ModifiedResNet
from open_clip.transformer import VisionTransformer


@dataclass
class DenseFeatures:
    pooled: torch.Tensor  # (B, D) equals model.encode_image(images)
    dense: torch.Tensor  # (B, D, h, w) per-position features in the joint space
    feature_map: torch.Tensor  # (B, C, h, w) the backbone's map before pooling/projection


def _vit_dense(visual: VisionTransformer, images: torch.Tensor) -> DenseFeatures:
    x = visual.transformer(visual._embeds(images))  # (B, 1 + h*w, width)
    pooled, tokens = visual._pool(x)  # (B, width), (B, h*w, width)
    if visual.final_ln_after_pool:
        tokens = visual.ln_post(tokens)
    if visual.proj is not None:
        pooled, projected = pooled @ visual.proj, tokens @ visual.proj
    else:
        projected = tokens
    h, w = visual.grid_size
    feature_map = tokens.transpose(1, 2).reshape(tokens.shape[0], -1, h, w)
    dense = projected.transpose(1, 2).reshape(projected.shape[0], -1, h, w)
    return DenseFeatures(pooled, dense, feature_map)


def _resnet_dense(visual: ModifiedResNet, images: torch.Tensor) -> DenseFeatures:
    x = visual.stem(images)
    for layer in (visual.layer1, visual.layer2, visual.layer3, visual.layer4):
        x = layer(x)
    feature_map = x  # (B, C, h, w)
    pool = visual.attnpool
    pooled = pool(feature_map)
    b, c, h, w = feature_map.shape
    flat = feature_map.flatten(2).transpose(1, 2)  # (B, h*w, C)
    flat = flat + pool.positional_embedding[1:].to(flat.dtype)
    dense = pool.c_proj(pool.v_proj(flat))  # (B, h*w, D)
    return DenseFeatures(pooled, dense.transpose(1, 2).reshape(b, -1, h, w), feature_map)


def encode_image_dense(model: torch.nn.Module, images: torch.Tensor) -> DenseFeatures:
    """Pooled and per-position image features of an open_clip CLIP, in one forward pass."""
    visual = model.visual
    if isinstance(visual, VisionTransformer):
        return _vit_dense(visual, images)
    if isinstance(visual, ModifiedResNet):
        return _resnet_dense(visual, images)
    raise TypeError(f"dense features need a VisionTransformer or ModifiedResNet tower, "
                    f"got {type(visual).__name__}")


def collect_rows(n: int, batches) -> dict[str, torch.Tensor]:
    """Stack consecutive batches of rows (each a dict name -> (b, ...) tensor) into (n, ...)
    tensors allocated at the first batch, with its dtype and device. The peak memory is the
    result plus one batch, where ``torch.cat`` over a list of batches holds both in full:
    at real-data sizes that is tens of GB (ch3's pooling memory at gpu-full is ~35 GB)."""
    out: dict[str, torch.Tensor] = {}
    row = 0
    for batch in batches:
        b = len(next(iter(batch.values())))
        if not out:
            out = {k: torch.empty((n, *v.shape[1:]), dtype=v.dtype, device=v.device) for k, v in batch.items()}
        if row + b > n or set(batch) != set(out):
            raise ValueError(f"batches do not fill {n} rows of {sorted(out)} (row {row}, batch of {b}, "
                             f"names {sorted(batch)})")
        for k, v in batch.items():
            out[k][row:row + b] = v
        row += b
    if row != n:
        raise ValueError(f"batches gave {row} rows, expected {n}")
    return out
