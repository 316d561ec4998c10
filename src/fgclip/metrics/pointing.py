"""The pointing game: does the argmax of a localization map fall on the named object?

Geometry follows :mod:`fgclip.datasets.boxes`: an image of height H and width W spans the
continuous square ``[0, W] x [0, H]``, boxes are ``(x0, y0, x1, y1)`` and points ``(x, y)``
in those pixel coordinates. Pixel column ``i`` covers ``[i, i + 1)`` and has its centre
at ``i + 0.5``.

Two protocols are in use in the literature, and both are here:

* **per phrase** (Flickr30K Entities, as in the MaxImage paper): one trial per phrase; a
  hit when the point lies inside any ground-truth box of the phrase; phrases whose boxes
  (their union) cover less than ``min_box_area`` of the image (default 5%) are left out
  and counted as skipped; accuracy = hits / evaluated trials.
* **per class** (TorchRay's ``PointingGame``): one trial per (image, class present); a hit
  when some pixel of the class's boxes lies closer than ``tolerance`` pixels (default 15)
  to the point; accuracy per class = hits / trials of that class, reported as the mean
  over the classes that have at least one trial.

Baselines share the same scoring: the image centre and a uniform random point.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

Box = tuple[float, float, float, float]
Point = tuple[float, float]
ImageHW = tuple[int, int]

TORCHRAY_TOLERANCE = 15.0


def _check_hw(image_hw: ImageHW, name: str = "image_hw") -> tuple[int, int]:
    if len(image_hw) != 2 or min(image_hw) <= 0:
        raise ValueError(f"{name} must be a positive (height, width), got {image_hw!r}")
    return int(image_hw[0]), int(image_hw[1])


def _check_boxes(boxes: Sequence[Box], name: str = "boxes") -> list[Box]:
    if len(boxes) == 0:
        raise ValueError(f"{name} is empty: a pointing trial needs at least one box")
    out = []
    for box in boxes:
        if len(box) != 4:
            raise ValueError(f"{name}: box {box!r} is not (x0, y0, x1, y1)")
        x0, y0, x1, y1 = (float(v) for v in box)
        if not (x1 > x0 and y1 > y0):
            raise ValueError(f"{name}: empty box {box!r}, needs x1 > x0 and y1 > y0")
        out.append((x0, y0, x1, y1))
    return out


def _as_map(heat: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(heat, torch.Tensor):
        heat = heat.detach().float().cpu().numpy()
    heat = np.asarray(heat, dtype=np.float64)
    if heat.ndim != 2 or heat.size == 0:
        raise ValueError(f"heat must be a non-empty (h, w) map, got shape {heat.shape}")
    if not np.isfinite(heat).all():
        raise ValueError("heat contains NaN or inf values")
    return heat


def argmax_point(heat: torch.Tensor | np.ndarray, image_hw: ImageHW) -> Point:
    """The centre of the map's argmax cell, in image pixels.

    With an (h, w) map stretched over an H x W image, cell (i, j) covers
    ``[j W/w, (j+1) W/w) x [i H/h, (i+1) H/h)``, so the point is
    ``(x, y) = ((j + 1/2) W/w, (i + 1/2) H/h)`` for ``(i, j) = argmax_{r,c} heat[r, c]``.
    Ties go to the first cell in row-major order (numpy's argmax).
    """
    height, width = _check_hw(image_hw)
    heat = _as_map(heat)
    i, j = np.unravel_index(int(np.argmax(heat)), heat.shape)
    return ((j + 0.5) * width / heat.shape[1], (i + 0.5) * height / heat.shape[0])


def resized_argmax_point(heat: torch.Tensor | np.ndarray, image_hw: ImageHW) -> Point:
    """MultiGrounding's read-out: the (h, w) map resized to the H x W image (bilinear, pixel
    centres aligned as in ``align_corners=False``), and the argmax pixel (i, j) returned as
    the point ``(x, y) = (j, i)``, its integer pixel index, to be scored with inclusive box
    edges (``pointing_hit(..., inclusive=True)``). Ties go to the first pixel in row-major
    order. Unlike :func:`argmax_point` the point need not be a cell's centre: inside the
    argmax cell's plateau it moves toward the neighbour cells that score high.
    """
    height, width = _check_hw(image_hw)
    heat = torch.from_numpy(_as_map(heat))[None, None]  # (1, 1, h, w) float64
    big = torch.nn.functional.interpolate(heat, size=(height, width), mode="bilinear",
                                          align_corners=False)[0, 0]  # (H, W)
    i, j = np.unravel_index(int(torch.argmax(big)), (height, width))
    return (float(j), float(i))


def box_distance(point: Point, box: Box) -> float:
    """Euclidean distance from ``point`` to the nearest pixel centre of ``box``.

    The box's pixel centres fill ``[x0 + 1/2, x1 - 1/2] x [y0 + 1/2, y1 - 1/2]`` (collapsed
    to the midpoint along an axis where the box is under one pixel wide), so
    ``d = || p - clamp(p, that rectangle) ||_2``. For integral boxes and a point on a pixel
    centre this is TorchRay's ``min_{u,v in mask} sqrt((u - x)^2 + (v - y)^2)``.
    """
    x, y = point
    x0, y0, x1, y1 = box
    lo_x, hi_x = min(x0 + 0.5, (x0 + x1) / 2), max(x1 - 0.5, (x0 + x1) / 2)
    lo_y, hi_y = min(y0 + 0.5, (y0 + y1) / 2), max(y1 - 0.5, (y0 + y1) / 2)
    dx = x - min(max(x, lo_x), hi_x)
    dy = y - min(max(y, lo_y), hi_y)
    return float(np.hypot(dx, dy))


def pointing_hit(heat_or_point: torch.Tensor | np.ndarray | Point, boxes: Sequence[Box],
                 image_hw: ImageHW, tolerance: float = 0.0, inclusive: bool = False) -> bool:
    """One pointing trial: hit = 1[p in some box b] or 1[min_b d(p, b) < tolerance].

    ``heat_or_point`` is an (h, w) map (its :func:`argmax_point` is used) or an ``(x, y)``
    point. "Inside" is half-open, ``x0 <= x < x1`` and ``y0 <= y < y1``; ``d`` is
    :func:`box_distance`. ``tolerance=0`` is the plain inside-a-box rule (eq-pointing-hit);
    TorchRay uses 15. ``inclusive=True`` closes the far edges, ``x0 <= x <= x1`` and
    ``y0 <= y <= y1`` (MultiGrounding's rule, with :func:`resized_argmax_point`).
    """
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    height, width = _check_hw(image_hw)
    boxes = _check_boxes(boxes)
    shape = tuple(heat_or_point.shape) if isinstance(heat_or_point, torch.Tensor) \
        else np.shape(heat_or_point)
    if len(shape) == 2:
        x, y = argmax_point(heat_or_point, (height, width))
    elif shape == (2,):
        x, y = (float(v) for v in heat_or_point)
    else:
        raise ValueError("heat_or_point must be an (h, w) map or an (x, y) point, got shape "
                         f"{np.shape(heat_or_point)}")
    for box in boxes:
        x0, y0, x1, y1 = box
        if (x0 <= x <= x1 and y0 <= y <= y1) if inclusive else (x0 <= x < x1 and y0 <= y < y1):
            return True
        if tolerance > 0 and box_distance((x, y), box) < tolerance:
            return True
    return False


def union_area(boxes: Sequence[Box]) -> float:
    """Area of the union of axis-aligned boxes, exactly, by coordinate compression.

    Written here because no installed library computes it (shapely is not a dependency);
    area = sum over grid cells (x_k, x_{k+1}) x (y_l, y_{l+1}) covered by some box.
    """
    boxes = _check_boxes(boxes)
    xs = np.unique([v for b in boxes for v in (b[0], b[2])])
    ys = np.unique([v for b in boxes for v in (b[1], b[3])])
    cx, cy = (xs[:-1] + xs[1:]) / 2, (ys[:-1] + ys[1:]) / 2  # cell midpoints
    covered = np.zeros((len(cy), len(cx)), dtype=bool)  # (ny - 1, nx - 1)
    for x0, y0, x1, y1 in boxes:
        covered |= ((cy >= y0) & (cy < y1))[:, None] & ((cx >= x0) & (cx < x1))[None, :]
    cell_area = np.diff(ys)[:, None] * np.diff(xs)[None, :]
    return float((covered * cell_area).sum())


def box_coverage(boxes: Sequence[Box], image_hw: ImageHW) -> float:
    """Fraction of the image covered by the union of the boxes (boxes clipped to the image)."""
    height, width = _check_hw(image_hw)
    clipped = [(max(b[0], 0.0), max(b[1], 0.0), min(b[2], width), min(b[3], height))
               for b in _check_boxes(boxes)]
    clipped = [b for b in clipped if b[2] > b[0] and b[3] > b[1]]
    if not clipped:
        raise ValueError(f"boxes {list(boxes)!r} lie outside the {width}x{height} image")
    return union_area(clipped) / (height * width)


def hull_coverage(boxes: Sequence[Box], image_hw: ImageHW) -> float:
    """Fraction of the image covered by the enclosing box of all the boxes, clipped to the
    image: (max x1 - min x0)(max y1 - min y0) / (H W). The public MultiGrounding code applies
    the 5% filter to this hull of a phrase's boxes (eq-hull-filter); :func:`box_coverage` is
    the exact union."""
    height, width = _check_hw(image_hw)
    b = np.array(_check_boxes(boxes))  # (n, 4)
    x0, y0 = max(b[:, 0].min(), 0.0), max(b[:, 1].min(), 0.0)
    x1, y1 = min(b[:, 2].max(), width), min(b[:, 3].max(), height)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"boxes {list(boxes)!r} lie outside the {width}x{height} image")
    return float((x1 - x0) * (y1 - y0) / (height * width))


AREA_RULES = {"union": box_coverage, "hull": hull_coverage}


def center_point(image_hw: ImageHW) -> Point:
    """The centre baseline's point: (W/2, H/2)."""
    height, width = _check_hw(image_hw)
    return (width / 2.0, height / 2.0)


def random_points(image_hws: Sequence[ImageHW], seed: int) -> list[Point]:
    """The random baseline: one point per image, uniform on [0, W) x [0, H), seeded."""
    rng = np.random.default_rng(seed)
    out = []
    for hw in image_hws:
        height, width = _check_hw(hw)
        out.append((float(rng.uniform(0, width)), float(rng.uniform(0, height))))
    return out


@dataclass
class PhrasePointing:
    """Per-phrase protocol result. ``hits[k]`` is None for a skipped phrase k."""
    accuracy: float  # hits / evaluated
    hits: list[bool | None]
    n_evaluated: int
    n_skipped: int
    min_box_area: float
    tolerance: float

    def evaluated_hits(self) -> np.ndarray:
        """0/1 hits of the evaluated phrases, in input order, for bootstraps."""
        return np.array([h for h in self.hits if h is not None], dtype=float)


def _point(point: Point) -> Point:
    if np.shape(point) != (2,):
        raise ValueError(f"a point must be (x, y), got {point!r}")
    return (float(point[0]), float(point[1]))


def _check_lengths(**named: Sequence) -> int:
    lengths = {k: len(v) for k, v in named.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"lengths differ: {lengths}")
    return next(iter(lengths.values()))


def phrase_pointing(points: Sequence[Point], boxes: Sequence[Sequence[Box]],
                    image_hws: Sequence[ImageHW], min_box_area: float = 0.05,
                    tolerance: float = 0.0, area_rule: str = "union") -> PhrasePointing:
    """Per-phrase pointing accuracy: (1/|K|) sum_{k in K} hit(p_k, B_k).

    K = {k : area(B_k) / (H_k W_k) >= min_box_area} (phrases with smaller boxes are
    skipped, and counted in ``n_skipped``), area(B_k) the exact union of the boxes
    (``area_rule="union"``) or their enclosing hull (``"hull"``, the public MultiGrounding
    code); hit as in :func:`pointing_hit`. Raises when no phrase is left.
    """
    n = _check_lengths(points=points, boxes=boxes, image_hws=image_hws)
    if not 0.0 <= min_box_area <= 1.0:
        raise ValueError(f"min_box_area must be a fraction in [0, 1], got {min_box_area}")
    if area_rule not in AREA_RULES:
        raise ValueError(f"area_rule must be one of {tuple(AREA_RULES)}, got {area_rule!r}")
    hits: list[bool | None] = []
    for k in range(n):
        if AREA_RULES[area_rule](boxes[k], image_hws[k]) < min_box_area:
            hits.append(None)
            continue
        hits.append(pointing_hit(_point(points[k]), boxes[k], image_hws[k], tolerance))
    evaluated = [h for h in hits if h is not None]
    if not evaluated:
        raise ValueError(f"all {n} phrases cover less than min_box_area={min_box_area}")
    return PhrasePointing(float(np.mean(evaluated)), hits, len(evaluated), n - len(evaluated),
                          min_box_area, tolerance)


@dataclass
class ClassPointing:
    """TorchRay-protocol result: mean over classes of per-class accuracy."""
    mean_accuracy: float
    per_class: dict[Hashable, float]
    trials: dict[Hashable, int]
    hits: list[bool]
    tolerance: float


def class_pointing(points: Sequence[Point], boxes: Sequence[Sequence[Box]],
                   image_hws: Sequence[ImageHW], classes: Sequence[Hashable],
                   tolerance: float = TORCHRAY_TOLERANCE) -> ClassPointing:
    """TorchRay's pointing game: mean_c (hits_c / (hits_c + misses_c)).

    Trial k is one (image, class present) pair: ``points[k]`` is the map's argmax for class
    ``classes[k]`` and ``boxes[k]`` all boxes of that class in the image; a hit when some
    box pixel lies closer than ``tolerance`` px (:func:`pointing_hit`). The mean runs over
    the classes with at least one trial (TorchRay's own mean would be NaN otherwise).
    """
    n = _check_lengths(points=points, boxes=boxes, image_hws=image_hws, classes=classes)
    if n == 0:
        raise ValueError("no pointing trials given")
    hits = [pointing_hit(_point(p), b, hw, tolerance) for p, b, hw in zip(points, boxes, image_hws)]
    per_hits: dict[Hashable, list[bool]] = {}
    for c, h in zip(classes, hits):
        per_hits.setdefault(c, []).append(h)
    per_class = {c: float(np.mean(v)) for c, v in per_hits.items()}
    trials = {c: len(v) for c, v in per_hits.items()}
    return ClassPointing(float(np.mean(list(per_class.values()))), per_class, trials, hits,
                         tolerance)


def contains_center(boxes: Sequence[Box], image_hw: ImageHW) -> bool:
    """1[the image centre (W/2, H/2) lies inside some box]: the falsification's stratum."""
    return pointing_hit(center_point(image_hw), boxes, image_hw, tolerance=0.0)
