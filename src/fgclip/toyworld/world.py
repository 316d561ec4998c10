"""Seeded scene generation, data splits, the base/novel split and the open vocabulary."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .captions import make_captions, make_foils
from .scene import Scene, ToyWorldConfig, render_scene
from .shapes import SHAPES

SPLITS = {"train": 0, "val": 1, "test": 2}

# Names a retrieval query may use that the toy world never draws (the "open" part of the
# open vocabulary, like ImageNet-21K classes absent from COCO).
NEVER_DRAWN = (
    "trapezoid", "parallelogram", "rhombus", "kite", "spiral", "wave", "zigzag", "chevron",
    "donut", "torus", "cube", "sphere", "cone", "cylinder", "pyramid", "prism", "lens",
    "teardrop", "shield", "badge", "flag", "key", "lock", "bell", "leaf", "flower", "tree",
    "cloud", "sun", "moon", "planet", "comet", "lightning", "raindrop", "snowflake", "flame",
    "house", "tower", "bridge", "gate", "door", "window", "wheel", "gear", "bolt", "nut",
    "screw", "nail", "hammer", "anchor", "rocket", "plane", "boat", "car", "bus", "train",
    "bicycle", "kettle", "cup", "bottle", "bowl", "plate", "spoon", "fork", "knife", "chair",
    "table", "lamp", "clock", "phone", "book", "pencil", "brush", "comb", "mirror", "hat",
    "shoe", "glove", "ring binder", "button", "coin", "dice", "domino", "puzzle piece",
    "letter", "envelope", "ticket", "balloon", "kite tail", "umbrella", "fish", "bird", "cat",
    "dog", "horse", "snake", "turtle", "frog", "butterfly", "spider", "bee", "shell", "feather",
    "bone", "egg", "apple", "banana", "cherry", "grape", "lemon", "carrot", "mushroom",
    "cactus", "crown", "trophy", "medal", "candle", "gift", "box", "bag", "basket", "barrel",
)


@dataclass(frozen=True)
class CategorySplit:
    base: tuple[str, ...]
    novel: tuple[str, ...]


def category_split(categories: tuple[str, ...] = tuple(SHAPES), n_novel: int = 4,
                   seed: int = 0) -> CategorySplit:
    """Seeded base/novel partition of the drawn categories (novel ones get no training labels)."""
    if not 0 < n_novel < len(categories):
        raise ValueError(f"n_novel must be in 1..{len(categories) - 1}, got {n_novel}")
    order = np.random.default_rng(seed).permutation(len(categories))
    novel = tuple(sorted(categories[i] for i in order[:n_novel]))
    base = tuple(c for c in categories if c not in novel)
    return CategorySplit(base, novel)


def open_vocabulary(categories: tuple[str, ...] = tuple(SHAPES)) -> list[str]:
    """Every drawn category followed by names that never appear in any image."""
    return list(categories) + [n for n in NEVER_DRAWN if n not in categories]


def make_scene(cfg: ToyWorldConfig, seed: int, split: str, index: int) -> Scene:
    """Scene ``index`` of ``split``: its own RNG stream, so any scene is reproducible alone."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, got {split!r}")
    rng = np.random.default_rng([seed, SPLITS[split], index])
    image_id = SPLITS[split] * 10_000_000 + index + 1  # ids are positive, unique across splits
    scene = render_scene(cfg, rng, image_id)
    scene.captions = make_captions(scene, cfg, rng)
    scene.foils = make_foils(scene, cfg, rng)
    return scene


def generate(cfg: ToyWorldConfig, n: int, seed: int = 0, split: str = "train",
             start: int = 0) -> list[Scene]:
    """Scenes ``start .. start + n - 1`` of a split."""
    return [make_scene(cfg, seed, split, i) for i in range(start, start + n)]
