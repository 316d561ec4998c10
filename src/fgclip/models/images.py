"""Images from files to model inputs to encoded rows: the one loader, the one input
pipeline and the one batched encoder every chapter uses.

:func:`load_images` decodes files to pixel arrays with their geometry stated;
:func:`load_image_batch` gives photos of any size their model inputs (for figures and
single examples); :func:`model_input_batches` turns pixel arrays, model inputs or file
paths into batches of model inputs; :func:`encode_image_rows` runs a function of the
frozen model over those batches and stacks its rows. What each chapter computes from a
batch (pooled embeddings, dense maps, pooling memories) is its own ``per_batch``.

A chapter that draws on its images, or reads a dense map position by position, needs to
know where a map cell falls in the original picture. Two geometries map an H x W image to
the model's S x S input:

* ``"resize"``: stretch the whole image to S x S (aspect ratio not kept). Every labelled
  object stays in view, and a map cell covers the same share of the original image in
  both directions; boxes scale by (S / W, S / H).
* ``"crop"``: resize the short side to S, then cut the centre S x S, as open_clip's eval
  transform does. Objects near the long side's edges may be cut away while their labels
  stay.

``size=None`` keeps square images of one size as they are (the toy world at its native
resolution; the model's transform upsamples them later).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from PIL import Image, ImageOps

from ..progress import progress
from .dense import collect_rows
from .factory import Clip, images_to_tensor

GEOMETRIES = ("resize", "crop")


@dataclass
class ImageBatch:
    """Pixels of several images, and how they were fitted to one size."""

    pixels: np.ndarray  # (N, S, S, 3) uint8
    original_sizes: list[tuple[int, int]]  # (height, width) of each file
    geometry: str  # "resize", "crop" or "as is" (size=None)

    def __len__(self) -> int:
        return len(self.pixels)


def load_images(paths: Sequence[str | Path], size: int | None = None, geometry: str = "resize") -> ImageBatch:
    """Decode ``paths`` to one uint8 (N, S, S, 3) array fitted by ``geometry`` (module docstring).

    With ``size=None`` every image must already be square and of one size.
    """
    if geometry not in GEOMETRIES:
        raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")
    if not paths:
        raise ValueError("load_images: no image paths")
    pixels, sizes = [], []
    for path in paths:
        if not Path(path).is_file():
            raise FileNotFoundError(f"image not found: {path}")
        img = Image.open(path).convert("RGB")
        sizes.append((img.height, img.width))
        if size is None:
            if img.width != img.height:
                raise ValueError(f"{path} is {img.width}x{img.height}; pass size= for non-square images")
        elif geometry == "crop":
            img = ImageOps.fit(img, (size, size), Image.Resampling.BICUBIC)
        elif img.size != (size, size):
            img = img.resize((size, size), Image.Resampling.BICUBIC)
        pixels.append(np.asarray(img))
    shapes = {a.shape for a in pixels}
    if len(shapes) > 1:
        raise ValueError(f"images have different sizes {sorted(shapes)[:3]}; pass size=")
    return ImageBatch(np.stack(pixels), sizes, "as is" if size is None else geometry)


def load_image_batch(paths: list[str], clip: Clip) -> tuple[list[np.ndarray], torch.Tensor, list[int]]:
    """The distinct images of ``paths``: (uint8 arrays, model inputs (U, 3, S, S), and for
    each path the index of its image).

    Square images of one size (the toy world) are batched through ``images_to_tensor``;
    any other set (real photos) goes through open_clip's own eval transform one by one.
    """
    if not paths:
        raise ValueError("load_image_batch: no image paths")
    unique = sorted(set(paths))
    pil = []
    for p in unique:
        if not Path(p).is_file():
            raise FileNotFoundError(f"image not found: {p}")
        pil.append(Image.open(p).convert("RGB"))
    raw = [np.asarray(im) for im in pil]  # (H, W, 3) uint8 each
    if len({im.size for im in pil}) == 1 and pil[0].size[0] == pil[0].size[1]:
        tensor = images_to_tensor(torch.from_numpy(np.stack(raw)), clip)
    else:
        tensor = torch.stack([clip.preprocess(im) for im in pil])
    position = {p: i for i, p in enumerate(unique)}
    return raw, tensor, [position[p] for p in paths]


ImageSource = np.ndarray | torch.Tensor | Sequence[str | Path]


def model_input_batches(clip: Clip, images: ImageSource, batch_size: int = 256,
                        device: str | torch.device | None = None,
                        transform: Callable | None = None) -> Iterator[torch.Tensor]:
    """Model inputs (b, 3, S, S) on ``device`` (default: the model's), ``batch_size`` images
    at a time, from any of:

    * uint8 pixel arrays (N, H, W, 3), square: ``images_to_tensor`` (bicubic to S, normalised);
    * float tensors (N, 3, S, S) that are model inputs already;
    * image file paths, decoded one batch at a time (memory holds one batch of pixels, never
      the whole set) through ``transform`` file by file, or without one by the rule of
      :func:`load_image_batch`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    device = device if device is not None else next(clip.model.parameters()).device
    if isinstance(images, np.ndarray):
        if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
            raise ValueError(f"pixel arrays must be uint8 (N, H, W, 3), got {images.dtype} {images.shape}")
        for i in range(0, len(images), batch_size):
            yield images_to_tensor(torch.from_numpy(images[i:i + batch_size]).to(device), clip)
    elif isinstance(images, torch.Tensor):
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f"model inputs must be (N, 3, S, S), got {tuple(images.shape)}")
        for i in range(0, len(images), batch_size):
            yield images[i:i + batch_size].to(device)
    else:
        paths = list(images)
        for i in range(0, len(paths), batch_size):
            chunk = paths[i:i + batch_size]
            if transform is None:
                _, x, index = load_image_batch(chunk, clip)
                x = x[index]  # one row per path, duplicates included
            else:
                missing = [p for p in chunk if not Path(p).is_file()]
                if missing:
                    raise FileNotFoundError(f"image not found: {missing[0]}")
                x = torch.stack([transform(Image.open(p).convert("RGB")) for p in chunk])
            yield x.to(device)


@torch.no_grad()
def encode_image_rows(clip: Clip, images: ImageSource,
                      per_batch: Callable[[torch.Tensor], dict[str, torch.Tensor]],
                      batch_size: int = 256, device: str | torch.device | None = None,
                      transform: Callable | None = None, desc: str | None = None,
                      ) -> dict[str, torch.Tensor]:
    """The one batched image encoder: ``per_batch(x)`` for each batch of
    :func:`model_input_batches`, its named (b, ...) rows stacked into (N, ...) tensors
    allocated once (``collect_rows``: no second full copy). ``per_batch`` runs the frozen
    model (and its own precision context, where it wants one)."""
    n = len(images)
    if n == 0:
        raise ValueError("encode_image_rows: no images")
    batches = model_input_batches(clip, images, batch_size, device, transform)
    if desc is not None:
        batches = progress(batches, desc=desc, total=-(-n // batch_size), leave=False)
    return collect_rows(n, (per_batch(x) for x in batches))


def encode_image_paths(clip: Clip, paths: list[str], batch_size: int = 256,
                       device: str = "cpu") -> tuple[torch.Tensor, list[int]]:
    """Image embeddings (U, D), not normalised, of the distinct images of ``paths``, and for
    each path the index of its image; decoded, transformed (as :func:`load_image_batch`)
    and encoded ``batch_size`` at a time (20,000 FOIL pairs would need about 9 GB of model
    inputs at once)."""
    unique = sorted(set(paths))
    if not unique:
        raise ValueError("encode_image_paths: no image paths")
    rows = encode_image_rows(clip, unique, lambda x: {"f": clip.model.encode_image(x)}, batch_size, device)
    position = {p: i for i, p in enumerate(unique)}
    return rows["f"], [position[p] for p in paths]
