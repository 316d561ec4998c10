"""The procedural toy world: scenes, captions, FOIL negatives, splits and exporters."""
from .captions import COUNT_WORDS, RELATIONS, make_captions, make_foils, noun_phrase
from .scene import SIZE_WORDS, Caption, Foil, Phrase, Scene, ToyObject, ToyWorldConfig, render_scene
from .shapes import COLORS, SHAPES
from .world import (NEVER_DRAWN, SPLITS, CategorySplit, category_split, generate, make_scene,
                    open_vocabulary)

__all__ = [
    "COLORS", "COUNT_WORDS", "NEVER_DRAWN", "RELATIONS", "SHAPES", "SIZE_WORDS", "SPLITS",
    "Caption", "CategorySplit", "Foil", "Phrase", "Scene", "ToyObject", "ToyWorldConfig",
    "category_split", "generate", "make_captions", "make_foils", "make_scene", "noun_phrase",
    "open_vocabulary", "render_scene",
]
