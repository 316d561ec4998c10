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


def _rotated(mask: MaskFn, angle: float) -> MaskFn:
    """The same mask turned by ``angle`` radians (counter-clockwise on the screen)."""
    c, s = np.cos(angle), np.sin(angle)
    return lambda u, v: mask(c * u - s * v, s * u + c * v)


def _disc(cx: float, cy: float, r: float) -> MaskFn:
    return lambda u, v: (u - cx) ** 2 + (v - cy) ** 2 <= r * r


def _hourglass(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (np.abs(v) <= 0.9) & (np.abs(u) <= 0.85 * np.abs(v) + 0.08)


def _tee(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    top = (v >= -0.9) & (v <= -0.4) & (np.abs(u) <= 0.9)
    stem = (np.abs(u) <= 0.27) & (v >= -0.9) & (v <= 0.9)
    return top | stem


def _corner(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    upright = (u >= -0.8) & (u <= -0.25) & (np.abs(v) <= 0.9)
    foot = (v >= 0.35) & (v <= 0.9) & (u >= -0.8) & (u <= 0.8)
    return upright | foot


def _arch(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    r = np.hypot(u, v + 0.35)
    dome = (v <= -0.35) & (r <= 0.9) & (r >= 0.4)
    legs = (v > -0.35) & (v <= 0.9) & (np.abs(u) >= 0.4) & (np.abs(u) <= 0.9)
    return dome | legs


def _stripes(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    inside = np.abs(u) <= 0.9
    return inside & ((np.abs(v) <= 0.17) | (np.abs(np.abs(v) - 0.7) <= 0.17))


def _checker(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    square = np.maximum(np.abs(u), np.abs(v)) <= 0.85
    return square & ((u < 0) == (v < 0))


def _wedge(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    # a quarter disc with its corner at the lower left, centred on its own area
    x, y = u + 0.55, -(v - 0.55)
    return (x >= 0) & (y >= 0) & (x**2 + y**2 <= 1.55**2)


def _dumbbell(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    bar = (np.abs(u) <= 0.6) & (np.abs(v) <= 0.14)
    return bar | _disc(-0.62, 0, 0.36)(u, v) | _disc(0.62, 0, 0.36)(u, v)


def _pinwheel(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    r, theta = _polar(u, v)
    blade = np.mod(theta, np.pi / 2) / (np.pi / 2)  # 0 .. 1 within each quarter turn
    return (r <= 0.95) & (r <= 0.2 + 0.85 * blade)


def _stairs(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    # three steps rising to the right: column k (of three) filled from the bottom to height k + 1
    col = np.clip(((u + 0.9) / 0.6).astype(int), 0, 2)
    inside = (np.abs(u) <= 0.9) & (v <= 0.9)
    return inside & (v >= 0.9 - 0.6 * (col + 1))


def _asterisk(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    r, theta = _polar(u, v)
    spokes = np.abs(np.sin(3 * (theta + np.pi / 2)))  # zero on six directions
    return (r <= 0.95) & (r * spokes <= 0.24) | (r <= 0.3)


def _bullseye(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    r2 = u**2 + v**2
    return (r2 <= 0.16) | ((r2 <= 1) & (r2 >= 0.5))


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
    "hourglass": _hourglass,
    "frame": lambda u, v: (np.maximum(np.abs(u), np.abs(v)) <= 0.85) & (np.maximum(np.abs(u), np.abs(v)) >= 0.5),
    "tee": _tee,
    "corner": _corner,
    "arch": _arch,
    "x": _rotated(lambda u, v: ((np.abs(u) <= 0.24) & (np.abs(v) <= 1)) | ((np.abs(v) <= 0.24) & (np.abs(u) <= 1)),
                  np.pi / 4),
    "stripes": _stripes,
    "clover": lambda u, v: _disc(0, -0.45, 0.45)(u, v) | _disc(-0.45, 0.35, 0.45)(u, v) | _disc(0.45, 0.35, 0.45)(u, v),
    "checker": _checker,
    "wedge": _wedge,
    "dumbbell": _dumbbell,
    "pinwheel": _pinwheel,
    "stairs": _stairs,
    "asterisk": _asterisk,
    "slash": _rotated(lambda u, v: (np.abs(u) <= 1) & (np.abs(v) <= 0.3), -np.pi / 4),
    "bullseye": _bullseye,
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
