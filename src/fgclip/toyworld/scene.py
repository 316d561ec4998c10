"""Procedural toy scenes: objects with category, colour, size, position and a box.

The generator is a pure function of (config, seed): the same seed gives the same
scenes on every machine. Images are uint8 arrays of shape (H, W, 3).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .shapes import COLORS, DISTRACTOR_GRAY, SHAPES

SIZE_WORDS = ("small", "medium", "large")


@dataclass(frozen=True)
class ToyWorldConfig:
    """The toy world's knobs. Sizes are fractions of the image side.

    center_bias: probability that an object's centre is drawn from a tight Gaussian
        around the image centre instead of uniformly (0 = uniform, 1 = always central).
    max_overlap: the largest share of an earlier object that a later one may hide
        (0 = no occlusion).
    clutter: amplitude of the background texture, 0..1.
    distractors: number of gray unnamed marks per image (not annotated, never captioned).
    cooccur: category pairs that always co-occur (default none): a drawn category that
        belongs to a pair brings its partner, so every image that holds one member of a pair
        holds the other (a scene then holds up to 2 x max_objects objects). Pairs are
        disjoint; an empty ``cooccur`` draws exactly as a world without the option.
    """

    image_size: int = 64
    min_objects: int = 1
    max_objects: int = 3
    size_range: tuple[float, float] = (0.10, 0.22)
    center_bias: float = 0.3
    center_sigma: float = 0.12
    max_overlap: float = 0.25
    clutter: float = 0.3
    distractors: int = 0
    captions_per_image: int = 5
    categories: tuple[str, ...] = tuple(SHAPES)
    colors: tuple[str, ...] = tuple(COLORS)
    cooccur: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "cooccur", tuple(tuple(p) for p in self.cooccur))  # JSON lists back to tuples
        members = [c for p in self.cooccur for c in p]
        checks = {
            "image_size": self.image_size >= 16,
            "min_objects": 1 <= self.min_objects <= self.max_objects,
            "size_range": 0 < self.size_range[0] <= self.size_range[1] < 0.5,
            "center_bias": 0.0 <= self.center_bias <= 1.0,
            "max_overlap": 0.0 <= self.max_overlap < 1.0,
            "clutter": 0.0 <= self.clutter <= 1.0,
            "distractors": self.distractors >= 0,
            "captions_per_image": self.captions_per_image >= 1,
            "categories": len(self.categories) >= 2 and set(self.categories) <= set(SHAPES),
            "colors": len(self.colors) >= 2 and set(self.colors) <= set(COLORS),
            "cooccur": all(len(p) == 2 for p in self.cooccur) and len(members) == len(set(members))
            and set(members) <= set(self.categories),
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"ToyWorldConfig: invalid value for {', '.join(bad)}: {self}")

    def to_dict(self) -> dict:
        """The knobs as a dict; ``cooccur`` only when set, so a world without pairs keeps the
        dict (and every cache key made from it) it had before the option existed."""
        d = asdict(self)
        if not self.cooccur:
            del d["cooccur"]
        return d

    def partner(self, category: str) -> str | None:
        """The category that always co-occurs with ``category`` (:attr:`cooccur`), or None."""
        for a, b in self.cooccur:
            if category in (a, b):
                return b if category == a else a
        return None


@dataclass
class ToyObject:
    """One drawn object. box = (x0, y0, x1, y1) in pixels, tight around its visible pixels."""

    object_id: int
    category: str
    color: str
    size: str
    center: tuple[float, float]
    radius: float
    box: tuple[float, float, float, float]
    visible_fraction: float

    @property
    def area(self) -> float:
        x0, y0, x1, y1 = self.box
        return (x1 - x0) * (y1 - y0)


@dataclass
class Phrase:
    """A noun phrase of a caption: words[first_word:last_word + 1], linked to objects."""

    text: str
    first_word: int
    object_ids: list[int]
    category: str

    @property
    def last_word(self) -> int:
        return self.first_word + len(self.text.split()) - 1


@dataclass
class Caption:
    text: str
    kind: str  # "full", "relation", "count", "object", "name"
    phrases: list[Phrase] = field(default_factory=list)


@dataclass
class Foil:
    """A caption with exactly one word replaced so that it no longer matches the image."""

    caption_index: int
    text: str
    foil_type: str  # "shape", "color", "relation", "count"
    word_index: int
    target_word: str
    foil_word: str


@dataclass
class Scene:
    image_id: int
    image: np.ndarray  # (H, W, 3) uint8
    objects: list[ToyObject]
    captions: list[Caption] = field(default_factory=list)
    foils: list[Foil] = field(default_factory=list)

    @property
    def labels(self) -> set[str]:
        return {o.category for o in self.objects}


def _background(rng: np.random.Generator, size: int, clutter: float) -> np.ndarray:
    """Dark gray canvas plus low-frequency texture of amplitude ``clutter``."""
    base = rng.uniform(35, 70)
    coarse = rng.normal(0.0, 1.0, size=(size // 8 + 1, size // 8 + 1, 1))
    texture = np.kron(coarse, np.ones((8, 8, 1)))[:size, :size]
    noise = rng.normal(0.0, 1.0, size=(size, size, 1))
    img = base + clutter * (18.0 * texture + 8.0 * noise)
    return np.repeat(img, 3, axis=2)


def _sample_center(rng, cfg: ToyWorldConfig, radius: float) -> tuple[float, float]:
    s = cfg.image_size
    lo, hi = radius, s - radius
    if rng.random() < cfg.center_bias:
        c = rng.normal(s / 2, cfg.center_sigma * s, size=2)
        return tuple(np.clip(c, lo, hi).tolist())
    return tuple(rng.uniform(lo, hi, size=2).tolist())


def _size_word(radius: float, cfg: ToyWorldConfig) -> str:
    lo, hi = (f * cfg.image_size for f in cfg.size_range)
    t = (radius - lo) / max(hi - lo, 1e-6)
    return SIZE_WORDS[min(int(t * 3), 2)]


def render_scene(cfg: ToyWorldConfig, rng: np.random.Generator, image_id: int) -> Scene:
    """Draw one scene: objects are painted in order, later ones occluding earlier ones.

    With ``cfg.cooccur`` a drawn pair member's partner is painted right after it, and a scene
    where a partner found no place is drawn again from the same stream (until every pair is
    whole; an error after 100 tries names ``cooccur``)."""
    if not cfg.cooccur:
        return _render(cfg, rng, image_id)
    for _ in range(100):
        scene = _render(cfg, rng, image_id)
        if all(cfg.partner(c) is None or cfg.partner(c) in scene.labels for c in scene.labels):
            return scene
    raise RuntimeError(f"ToyWorldConfig.cooccur: no scene with every pair whole in 100 draws; cooccur={cfg.cooccur}")


def _render(cfg: ToyWorldConfig, rng: np.random.Generator, image_id: int) -> Scene:
    """One draw of :func:`render_scene`."""
    s = cfg.image_size
    ys, xs = np.mgrid[0:s, 0:s].astype(np.float32) + 0.5
    img = _background(rng, s, cfg.clutter)
    owner = np.full((s, s), -1, dtype=np.int64)  # which object each pixel shows
    n_objects = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    drawn: list[tuple[int, str, str, tuple, float, int]] = []
    todo = [None] * n_objects  # None: draw a category; a name: the partner owed by the last draw
    while todo:
        wanted = todo.pop(0)
        for _attempt in range(20):
            radius = rng.uniform(*cfg.size_range) * s
            cx, cy = _sample_center(rng, cfg, radius)
            category = str(rng.choice(cfg.categories)) if wanted is None else wanted
            mask = SHAPES[category]((xs - cx) / radius, (ys - cy) / radius)
            if not mask.any():
                continue
            hidden_ok = all(
                (mask & (owner == k)).sum() <= cfg.max_overlap * max((owner == k).sum(), 1)
                for k in range(len(drawn))
            )
            if hidden_ok:
                break
        else:
            continue  # this object found no place; the scene keeps fewer objects
        color = str(rng.choice(cfg.colors))
        img[mask] = np.asarray(COLORS[color], dtype=np.float64) * rng.uniform(0.85, 1.0)
        owner[mask] = len(drawn)
        drawn.append((len(drawn), category, color, (cx, cy), radius, int(mask.sum())))
        if wanted is None and cfg.partner(category) is not None:
            todo.insert(0, cfg.partner(category))
    for _ in range(cfg.distractors):
        r = rng.uniform(0.03, 0.06) * s
        cx, cy = rng.uniform(r, s - r, size=2)
        blob = (xs - cx) ** 2 + (ys - cy) ** 2 <= r**2
        img[blob & (owner < 0)] = DISTRACTOR_GRAY
    objects = []
    for k, category, color, center, radius, full_area in drawn:
        visible = owner == k
        if not visible.any():
            continue
        rows, cols = np.nonzero(visible)
        box = (float(cols.min()), float(rows.min()), float(cols.max() + 1), float(rows.max() + 1))
        objects.append(
            ToyObject(len(objects), category, color, _size_word(radius, cfg), center, radius,
                      box, float(visible.sum() / full_area))
        )
    image = np.clip(img, 0, 255).astype(np.uint8)
    return Scene(image_id=image_id, image=image, objects=objects)
