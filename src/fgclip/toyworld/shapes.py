"""Shape masks for the toy world.

Every shape is a boolean indicator on normalised local coordinates (u, v) in [-1, 1]^2,
with v pointing down as in image coordinates. A shape of radius r centred at (cx, cy)
covers the pixel (x, y) when ``mask(u=(x - cx) / r, v=(y - cy) / r)`` is true.
We write these by hand because no library draws a vocabulary of named shapes as masks
on a shared grid in a vectorised way (PIL draws polygons one at a time, and slowly).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

MaskFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _polar(u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.hypot(u, v), np.arctan2(v, u)


def _regular_polygon(n_sides: int, rotation: float = -np.pi / 2) -> MaskFn:
    """Inside of a regular n-gon with unit circumradius: r cos(theta - theta_k) <= cos(pi/n)."""
    half = np.pi / n_sides

    def mask(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        r, theta = _polar(u, v)
        local = np.mod(theta - rotation + half, 2 * half) - half
        return r * np.cos(local) <= np.cos(half)

    return mask


def _star(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    r, theta = _polar(u, v)
    spikes = 0.55 + 0.45 * np.abs(np.cos(2.5 * (theta + np.pi / 2)))
    return r <= spikes


def _heart(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    x, y = 1.15 * u, -1.15 * v + 0.25
    return (x**2 + y**2 - 1) ** 3 - x**2 * y**3 <= 0


def _crescent(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (u**2 + v**2 <= 1) & ((u - 0.45) ** 2 + v**2 > 0.6)


def _arrow(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    shaft = (np.abs(v) <= 0.28) & (u >= -1) & (u <= 0.1)
    head = (u > 0.1) & (u <= 1) & (np.abs(v) <= (1 - u) * 1.0)
    return shaft | head


SHAPES: dict[str, MaskFn] = {
    "circle": lambda u, v: u**2 + v**2 <= 1,
    "square": lambda u, v: np.maximum(np.abs(u), np.abs(v)) <= 0.82,
    "triangle": lambda u, v: (v <= 0.8) & (np.abs(u) <= (v + 1.0) / 1.8 * 0.95),
    "diamond": lambda u, v: np.abs(u) + np.abs(v) <= 1,
    "cross": lambda u, v: ((np.abs(u) <= 0.3) & (np.abs(v) <= 1)) | ((np.abs(v) <= 0.3) & (np.abs(u) <= 1)),
    "star": _star,
    "ring": lambda u, v: (u**2 + v**2 <= 1) & (u**2 + v**2 >= 0.42),
    "hexagon": _regular_polygon(6, rotation=0.0),
    "pentagon": _regular_polygon(5),
    "crescent": _crescent,
    "heart": _heart,
    "ellipse": lambda u, v: u**2 + (v / 0.55) ** 2 <= 1,
    "arrow": _arrow,
    "octagon": _regular_polygon(8, rotation=np.pi / 8),
    "semicircle": lambda u, v: (u**2 + v**2 <= 1) & (v >= -0.15),
    "bar": lambda u, v: (np.abs(u) <= 1) & (np.abs(v) <= 0.35),
}

# RGB values chosen to be far apart in colour space so that colour words are learnable.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "orange": (245, 140, 20),
    "yellow": (240, 225, 40),
    "green": (40, 180, 60),
    "cyan": (40, 210, 220),
    "blue": (40, 70, 220),
    "purple": (140, 50, 200),
    "pink": (245, 130, 190),
    "white": (245, 245, 245),
    "brown": (130, 80, 40),
}

# Shapes per colour channel intensity never used as a category: the distractor marks.
DISTRACTOR_GRAY = (110, 110, 110)
