"""Box conventions shared by the readers.

Every reader returns boxes as ``(x0, y0, x1, y1)`` floats in *continuous pixel
coordinates*: the image spans ``[0, W] x [0, H]``, pixel column ``i`` covers
``[i, i + 1)``, so a box around pixels ``i..j`` (inclusive) is ``(i, ., j + 1, .)``.
COCO's ``[x, y, w, h]`` is already continuous: ``x1 = x + w``.

Pascal VOC and Flickr30K Entities store *1-based inclusive pixel indices*: the
top-left pixel is (1, 1) and ``xmax`` is the last covered pixel. So a VOC box converts as
``x0 = xmin - 1, y0 = ymin - 1, x1 = xmax, y1 = ymax`` (the same convention as
Detectron2's VOC loader), and a one-pixel box ``xmin == xmax`` is legal.
"""
from __future__ import annotations

import os

from .errors import DatasetFormatError

Box = tuple[float, float, float, float]


def voc_to_xyxy(xmin: float, ymin: float, xmax: float, ymax: float) -> Box:
    """1-based inclusive pixel indices -> continuous (x0, y0, x1, y1)."""
    return (float(xmin) - 1.0, float(ymin) - 1.0, float(xmax), float(ymax))


def xyxy_to_voc(box: Box) -> tuple[int, int, int, int]:
    """Continuous (x0, y0, x1, y1) with integral corners -> 1-based inclusive indices."""
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    return (x0 + 1, y0 + 1, x1, y1)


def check_box(box: Box, width: float, height: float, path: str | os.PathLike, field: str,
              tolerance: float = 1.0) -> Box:
    """Validate a continuous box against its image and return it.

    Raises DatasetFormatError when ``x1 <= x0`` or ``y1 <= y0``, or when a corner lies
    more than ``tolerance`` pixels outside ``[0, W] x [0, H]``. Corners outside by at most
    ``tolerance`` (annotation rounding noise, e.g. a VOC ``xmin`` of 0) are clipped to the
    image; ``tolerance=0`` makes any overshoot an error.
    """
    x0, y0, x1, y1 = box
    if not (x1 > x0 and y1 > y0):
        raise DatasetFormatError(path, f"empty box {box}: needs x1 > x0 and y1 > y0", field=field)
    if min(x0, y0) < -tolerance or x1 > width + tolerance or y1 > height + tolerance:
        raise DatasetFormatError(path, f"box {box} lies outside the {width}x{height} image",
                                 field=field)
    clipped = (max(x0, 0.0), max(y0, 0.0), min(x1, float(width)), min(y1, float(height)))
    if not (clipped[2] > clipped[0] and clipped[3] > clipped[1]):
        raise DatasetFormatError(path, f"box {box} lies outside the {width}x{height} image",
                                 field=field)
    return clipped


def scale_boxes(boxes: list[Box] | tuple[Box, ...], from_hw: tuple[int, int],
                to_hw: tuple[int, int]) -> list[Box]:
    """Boxes of an image of size ``from_hw = (H, W)`` in the pixels of the same image
    resized (stretched, not cropped) to ``to_hw = (H', W')``: x scales by W'/W, y by H'/H.

    Drawing a box read from the annotation file on a resized image needs this; a box drawn
    in the original pixels lands in the wrong place on any image that is not already at
    ``to_hw``.
    """
    (h, w), (h2, w2) = from_hw, to_hw
    if min(h, w, h2, w2) <= 0:
        raise ValueError(f"image sizes must be positive, got from_hw={from_hw}, to_hw={to_hw}")
    sx, sy = w2 / w, h2 / h
    return [(x0 * sx, y0 * sy, x1 * sx, y1 * sy) for x0, y0, x1, y1 in boxes]
