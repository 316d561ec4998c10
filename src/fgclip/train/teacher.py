"""Pretraining a toy CLIP against a trained one: its text tower locked, its image embeddings distilled.

A student image tower f_S learns in the joint space a teacher CLIP (f_T, g_T) already has:
the student's text tower is the teacher's, copied and frozen (LiT's "locked" tower, with the
roles of image and text swapped), and every training image's teacher embedding f_T(I) is a
second target. With the contrastive loss L_clip of :mod:`fgclip.train.pretrain` on
(f_S(I), g_T(T)) and weight w,

    L = L_clip + w * (1/B) sum_i (1 - <f_S(I_i), f_T(I_i)>)      (both L2-normalised).

Why: on a 2-core CPU a ViT trained from scratch stays far from the regime the papers need
(its held-out curves are in benchmarks/results/pretrain_sweep_*.json), while a ResNet gets
there; regressing onto a fixed 128-d target per image is much cheaper to learn than a
contrastive signal against a moving text space.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import nn

from ..models import create_clip
from ..models.images import encode_image_rows
from .checkpoint import load_checkpoint, save_atomic


def text_tower_keys(state_dict: dict[str, torch.Tensor]) -> list[str]:
    """Everything of an open_clip CLIP that is not the image tower (``visual.*``) nor the
    logit scale: token and positional embeddings, transformer, final norm, projection."""
    return [k for k in state_dict if not k.startswith("visual.") and k not in ("logit_scale", "logit_bias")]


def lock_text_tower(model: nn.Module, teacher_state: dict[str, torch.Tensor]) -> list[str]:
    """Copy the teacher's text tower into ``model`` and freeze it; returns the keys copied."""
    keys = text_tower_keys(teacher_state)
    own = model.state_dict()
    bad = [k for k in keys if k not in own or own[k].shape != teacher_state[k].shape]
    if bad:
        raise ValueError(f"teacher's text tower does not fit the student: {bad[:5]}")
    model.load_state_dict({k: teacher_state[k].to(own[k].dtype) for k in keys}, strict=False)
    names = set(keys)
    for name, p in model.named_parameters():
        if name in names:
            p.requires_grad_(False)
    return keys


def teacher_embeddings(teacher_path: str | Path, images: torch.Tensor, device: str,
                       cache_dir: str | Path | None, data_key: str) -> torch.Tensor:
    """f_T(I) for every training image, (N, D) float32, L2-normalised; computed once and
    cached, keyed by the teacher file (size and mtime) and the data's own key."""
    path = Path(teacher_path)
    stat = path.stat()
    key = json.dumps({"teacher": str(path.resolve()), "size": stat.st_size, "mtime": stat.st_mtime_ns,
                      "data": data_key}, sort_keys=True)
    target = None
    if cache_dir is not None:
        target = Path(cache_dir) / f"teacher_{hashlib.sha1(key.encode()).hexdigest()[:16]}.pt"
        if target.is_file():
            return load_checkpoint(target)["features"]
    teacher = create_clip(load_checkpoint(path)["model_name"], pretrained=str(path), device=device)

    def pooled(x: torch.Tensor) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {"f": teacher.model.encode_image(x, normalize=True).float().cpu()}
    features = encode_image_rows(teacher, images.numpy(), pooled, batch_size=256)["f"]  # uint8 (N, H, W, 3) -> (N, D)
    if target is not None:
        save_atomic({"features": features, "key": key}, target)
    return features


class DistilledLoss(nn.Module):
    """L = base(f_S, g, lambda, *args) + w * mean_i (1 - <f_S(I_i), f_T(I_i)>) (module docstring)."""

    def __init__(self, base: nn.Module, weight: float) -> None:
        super().__init__()
        self.base, self.weight = base, weight

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor,
                teacher_features: torch.Tensor, *base_args) -> torch.Tensor:
        student = nn.functional.normalize(image_features, dim=-1)  # (B, D)
        distill = (1.0 - (student * teacher_features).sum(-1)).mean()
        return self.base(image_features, text_features, logit_scale, *base_args) + self.weight * distill
