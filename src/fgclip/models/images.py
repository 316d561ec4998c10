"""Image files to pixel arrays: the one loader, with its geometry stated.

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
from typing import Sequence

import numpy as np
from PIL import Image, ImageOps

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
