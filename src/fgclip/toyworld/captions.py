"""A small caption grammar over toy scenes, with phrase links and FOIL-style negatives.

Words are whitespace tokens: ``caption.text.split()[i]`` is word i, and every Phrase
and Foil index refers to that list. No caption contains punctuation.
"""
from __future__ import annotations

import numpy as np

from .scene import Caption, Foil, Phrase, Scene, ToyObject, ToyWorldConfig

COUNT_WORDS = ("one", "two", "three", "four", "five", "six")
RELATIONS = {"left": "right", "right": "left", "above": "below", "below": "above",
             "top": "bottom", "bottom": "top"}


def noun_phrase(obj: ToyObject, with_size: bool = True, with_color: bool = True) -> str:
    words = ["a"] + ([obj.size] if with_size else []) + ([obj.color] if with_color else [])
    return " ".join(words + [obj.category])


def relation_word(a: ToyObject, b: ToyObject) -> str:
    """Where a is with respect to b, by the dominant axis of their centre offset."""
    dx, dy = a.center[0] - b.center[0], a.center[1] - b.center[1]
    if abs(dx) >= abs(dy):
        return "left" if dx < 0 else "right"
    return "above" if dy < 0 else "below"


def position_words(obj: ToyObject, image_size: int) -> str:
    cx, cy = (c / image_size for c in obj.center)
    col = "left" if cx < 1 / 3 else ("right" if cx > 2 / 3 else "")
    row = "top" if cy < 1 / 3 else ("bottom" if cy > 2 / 3 else "")
    if row and col:
        return f"at the {row} {col}"
    if row:
        return f"at the {row}"
    if col:
        return f"on the {col}"
    return "in the middle"


class _Builder:
    """Accumulates words and records where each noun phrase starts."""

    def __init__(self, scene_objects: list[ToyObject]) -> None:
        self.scene_objects = scene_objects
        self.words: list[str] = []
        self.phrases: list[Phrase] = []

    def add(self, text: str) -> None:
        self.words.extend(text.split())

    def add_object(self, obj: ToyObject, **kw) -> None:
        text = noun_phrase(obj, **kw)
        # the phrase refers to every object it describes (the named one first)
        twins = [o.object_id for o in self.scene_objects
                 if o is not obj and noun_phrase(o, **kw) == text]
        self.phrases.append(Phrase(text, len(self.words), [obj.object_id] + twins, obj.category))
        self.add(text)

    def add_relation(self, a: ToyObject, b: ToyObject) -> None:
        rel = relation_word(a, b)
        self.add(f"to the {rel} of" if rel in ("left", "right") else rel)

    def build(self, kind: str) -> Caption:
        return Caption(" ".join(self.words), kind, self.phrases)


def _full_caption(objs: list[ToyObject], image_size: int) -> Caption:
    b = _Builder(objs)
    b.add_object(objs[0])
    if len(objs) == 1:
        b.add(position_words(objs[0], image_size))
        return b.build("full")
    b.add_relation(objs[0], objs[1])
    b.add_object(objs[1])
    for extra in objs[2:]:
        b.add("and")
        b.add_object(extra)
    return b.build("full")


def _relation_caption(objs: list[ToyObject], rng, image_size: int) -> Caption:
    b = _Builder(objs)
    if len(objs) == 1:
        b.add_object(objs[0], with_size=False)
        b.add(position_words(objs[0], image_size))
        return b.build("relation")
    i, j = rng.choice(len(objs), size=2, replace=False)
    b.add_object(objs[i], with_size=False)
    b.add_relation(objs[i], objs[j])
    b.add_object(objs[j], with_size=False)
    return b.build("relation")


def make_captions(scene: Scene, cfg: ToyWorldConfig, rng: np.random.Generator) -> list[Caption]:
    """Caption 0 names every object with size, colour and a relation; later ones are partial."""
    objs = [scene.objects[k] for k in rng.permutation(len(scene.objects))]
    n = len(objs)
    captions = [_full_caption(objs, cfg.image_size)]
    count = _Builder(objs)
    count.add(f"{COUNT_WORDS[n - 1]} {'shape' if n == 1 else 'shapes'} on a gray background")
    pick = objs[int(rng.integers(n))]
    single = _Builder(objs)
    single.add_object(pick)
    name = _Builder(objs)
    name.add_object(pick, with_size=False, with_color=False)
    pool = [_relation_caption(objs, rng, cfg.image_size), count.build("count"),
            single.build("object"), name.build("name")]
    while len(captions) < cfg.captions_per_image:
        captions.append(pool.pop(0) if pool else _relation_caption(objs, rng, cfg.image_size))
    return captions


def _replace(caption: Caption, index: int, word: str) -> str:
    words = caption.text.split()
    words[index] = word
    return " ".join(words)


def _object_of(scene: Scene, phrase: Phrase) -> ToyObject:
    return scene.objects[phrase.object_ids[0]]


def make_foils(scene: Scene, cfg: ToyWorldConfig, rng: np.random.Generator) -> list[Foil]:
    """One negative per applicable type; each replaces one word of a caption by a wrong one.

    shape: a category absent from the image; color: a colour that no object of that
    shape has; relation: its opposite; count: a different number.
    """
    foils: list[Foil] = []
    full = scene.captions[0]
    present = scene.labels
    ph = full.phrases[int(rng.integers(len(full.phrases)))]
    obj = _object_of(scene, ph)
    absent = [c for c in cfg.categories if c not in present]
    if absent:
        idx = ph.last_word
        foil_word = str(rng.choice(absent))
        foils.append(Foil(0, _replace(full, idx, foil_word), "shape", idx, obj.category, foil_word))
    wrong_colors = [c for c in cfg.colors
                    if not any(o.category == obj.category and o.color == c for o in scene.objects)]
    if wrong_colors:
        idx = ph.last_word - 1
        foil_word = str(rng.choice(wrong_colors))
        foils.append(Foil(0, _replace(full, idx, foil_word), "color", idx, obj.color, foil_word))
    words = full.text.split()
    rel_idx = [i for i, w in enumerate(words) if w in RELATIONS]
    if rel_idx:
        idx = rel_idx[0]
        foils.append(Foil(0, _replace(full, idx, RELATIONS[words[idx]]), "relation", idx,
                          words[idx], RELATIONS[words[idx]]))
    for ci, cap in enumerate(scene.captions):
        if cap.kind == "count" and len(scene.objects) >= 2:
            # plural counts the world can draw only, so grammar and range give nothing away
            true_word = cap.text.split()[0]
            others = [w for w in COUNT_WORDS[1:cfg.max_objects] if w != true_word]
            if not others:
                break
            foil_word = str(rng.choice(others))
            foils.append(Foil(ci, _replace(cap, 0, foil_word), "count", 0, true_word, foil_word))
            break
    return foils
