"""Chapter 4's frozen features: the whole image resized to a square, encoded once by the frozen
CLIP, one cache file per (model, data, split, transform); and the zero-shot diagnostic on them."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import torch
from torchvision import transforms as T

from ...fileio import atomic_write_stream
from ...methods.decoupling import category_scores
from ...metrics.multilabel import mean_average_precision
from ...models import encode_image_dense, encode_image_rows


def encode_image_files(clip, paths: list, batch_size: int = 128, device: str = "cpu",
                       transform=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Frozen dense (N, D, h, w) and pooled (N, D) features of image files, through
    ``transform`` (default: the model's own open_clip eval transform), on the CPU."""
    def dense_and_pooled(x: torch.Tensor) -> dict[str, torch.Tensor]:
        out = encode_image_dense(clip.model, x)
        return {"dense": out.dense.float().cpu(), "pooled": out.pooled.float().cpu()}

    out = encode_image_rows(clip, paths, dense_and_pooled, batch_size, device,
                            transform=transform or clip.preprocess, desc="encode images")
    return out["dense"], out["pooled"]


class Features(NamedTuple):
    """Frozen-CLIP features of N images."""

    dense: torch.Tensor  # (N, D, h, w) the map f
    pooled: torch.Tensor  # (N, D) the global feature

    def subset(self, idx) -> "Features":
        return Features(self.dense[idx], self.pooled[idx])


def square_transform(preprocess):
    """open_clip's eval transform with Resize(short side) + CenterCrop(S) replaced by one
    Resize((S, S)): the whole image, stretched to a square, as HCP-MLR-PL and DualCoOp do.
    The feature grid then covers the full image, which is what pointing and overlays assume."""
    steps = list(preprocess.transforms)
    crops = [t for t in steps if isinstance(t, T.CenterCrop)]
    resizes = [t for t in steps if isinstance(t, T.Resize)]
    if len(crops) != 1 or len(resizes) != 1:
        raise ValueError(f"expected one Resize and one CenterCrop in {preprocess}")
    size = tuple(crops[0].size) if not isinstance(crops[0].size, int) else (crops[0].size,) * 2
    square = T.Resize(size, interpolation=resizes[0].interpolation, antialias=True)
    return T.Compose([square if t is resizes[0] else t for t in steps if t is not crops[0]])


def weights_digest(module: torch.nn.Module) -> str:
    """SHA-1 (12 hex digits) over the module's state (names, shapes, dtypes and values): two
    randomly initialised models (``pretrained: none`` under different seeds) get different
    digests, so their features never share a cache file."""
    h = hashlib.sha1()
    for name, t in module.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name}{tuple(t.shape)}{t.dtype}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:12]


def feature_cache_path(cache_dir, model: str, pretrained: str, data_root, data_format: str,
                       split: str, transform, weights: str = "") -> Path:
    """A cache file named by everything the features depend on: model, weights (the name
    ``pretrained`` and the digest ``weights`` of the values, :func:`weights_digest`), the data
    root (resolved), format, split and the image transform (hashed)."""
    key = repr((model, str(pretrained), weights, str(Path(data_root).resolve()), data_format, split,
                repr(transform)))
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{Path(model).stem}_{Path(str(pretrained)).stem}_{split}_{digest}.pt"


def files_fingerprint(paths: list) -> str:
    """SHA-1 over each file's path, size and modification time (ns): it changes when a file
    is added, removed, renamed or rewritten. Size and mtime, not a content hash: a stat per
    file costs nothing on 120k COCO images, while hashing would read every byte on every run."""
    h = hashlib.sha1()
    for p in paths:
        st = os.stat(p)
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def cached_features(path, paths: list, encode: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """(dense, pooled) from ``path`` when it holds features of exactly these image files as
    they are now (:func:`files_fingerprint`: names, sizes, mtimes), else ``encode(paths)``,
    saved to ``path``. The transform and model are in ``path`` (:func:`feature_cache_path`)."""
    path, names = Path(path), [str(p) for p in paths]
    fingerprint = files_fingerprint(names)
    if path.is_file():
        blob = torch.load(path, weights_only=True)
        if blob.get("files") == names and blob.get("fingerprint") == fingerprint:
            return blob["features"]
    feats = encode(paths)
    blob = {"files": names, "fingerprint": fingerprint, "features": feats}
    atomic_write_stream(path, lambda f: torch.save(blob, f))  # streamed to disk, no RAM copy
    return feats


def frozen_features(clip, cache_dir, model: str, pretrained: str, root, data_format: str,
                    paths: dict[str, list], device: str = "cpu") -> dict[str, Features]:
    """:class:`Features` of each split's image files (``paths[split]``) through the frozen
    CLIP and :func:`square_transform`, read from / written to a cache file per split
    (:func:`feature_cache_path` with the image encoder's :func:`weights_digest`,
    :func:`cached_features`)."""
    transform, weights = square_transform(clip.preprocess), weights_digest(clip.model.visual)
    encode = lambda files: encode_image_files(clip, files, device=device, transform=transform)  # noqa: E731
    return {s: Features(*cached_features(feature_cache_path(
        cache_dir, model, pretrained, root, data_format, s, transform, weights), files, encode))
        for s, files in paths.items()}


def zero_shot_diagnostic(text_features: torch.Tensor, test: Features, labels: np.ndarray,
                         tau: float) -> dict[str, float]:
    """Test mAP of s = cos/τ against the hand-prompt text features (C, D), for the global
    feature and for the mean of the dense features (roughly where f^v_c starts)."""
    feats = {"global feature": test.pooled, "mean of dense features": test.dense.mean((2, 3))}
    return {k: mean_average_precision(category_scores(v, text_features, tau).numpy(), labels)
            for k, v in feats.items()}
