"""Chapter 2's data: the foil captions of the validation split and of every test draw.

Nothing is trained in CLIP4DM, so the seed axis of every verdict is the draw of the test
foils: for the toy world, an independent export of test scenes and foils per seed
(``generate(..., seed=s)``); for a real FOIL file, a seeded sample of ``max_pairs`` pairs.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ...datasets import read_foil_split
from ...datasets.foil import FoilSplit
from ...methods import clip4dm as c4dm
from ...models.factory import Clip
from ...toyworld import COLORS, ToyWorldConfig, generate
from ...toyworld.cache import toy_export
from ...toyworld.export import export_foil


def sample_pairs(split: FoilSplit, max_pairs: int, rng: np.random.Generator) -> FoilSplit:
    """A seeded sample of ``max_pairs`` pairs, kept in file order (all pairs when 0)."""
    if max_pairs < 0:
        raise ValueError(f"max_pairs must be >= 0, got {max_pairs}")
    if max_pairs == 0 or max_pairs >= len(split.pairs):
        return split
    keep = np.sort(rng.choice(len(split.pairs), size=max_pairs, replace=False))
    return dataclasses.replace(split, pairs=[split.pairs[i] for i in keep])


def caption_rows(split: FoilSplit, seed: int) -> pd.DataFrame:
    """One row per foil caption and one per distinct original: caption, image, start and
    length of the foil span (NaN / 0 for originals), foil_type, foil and target words."""
    rows = [dict(caption=p.foiled, image=str(p.image_path), start=p.word_index,
                 length=len(p.foil_span.split()), foil_type=p.foil_type or "foil",
                 foil_word=p.foil_span, target_word=p.target_span, original=p.original)
            for p in split.pairs]
    seen: set[int] = set()
    for p in split.pairs:
        if p.original_annotation_id not in seen:
            seen.add(p.original_annotation_id)
            rows.append(dict(caption=p.original, image=str(p.image_path), start=np.nan, length=0,
                             foil_type="original", foil_word="", target_word="", original=p.original))
    df = pd.DataFrame(rows)
    df["seed"] = seed
    df["cluster"] = [f"{seed}:{im}" for im in df.image]
    return df


def foil_sets(root: str | Path, split: str, seeds: Sequence[int], n_scenes: int,
              max_pairs: int, world=None) -> dict[int, pd.DataFrame]:
    """Caption rows per seed. Toy world (n_scenes > 0): seed s reads
    ``foil_<split>-s<s>-n<n_scenes>`` from the toy export of (world, s, n_scenes, split) under
    ``root/toy-<digest>/`` (:func:`~fgclip.toyworld.cache.toy_export`: made once, complete or
    not at all, so another world or an interrupted export is never read). Real data
    (n_scenes = 0): every seed samples ``max_pairs`` pairs of one file."""
    root, out = Path(root), {}
    world = world or ToyWorldConfig()
    for s in seeds:
        name = split if n_scenes <= 0 else f"{split}-s{s}-n{n_scenes}"
        folder = root
        if n_scenes > 0:
            folder = toy_export(root, lambda _: False,
                                lambda f, s=s, name=name: export_foil(generate(world, n_scenes, seed=s, split=split), f, name),
                                world=world, seed=s, n_scenes=n_scenes, split=split, format="foil")
        elif not (root / f"foil_{name}.json").is_file():
            raise FileNotFoundError(f"data_root {root} has no foil_{name}.json and n_scenes = 0")
        pairs = sample_pairs(read_foil_split(folder, name), max_pairs, np.random.default_rng([s, 2]))
        out[s] = caption_rows(pairs, s)
    return out


def planted_colour_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Positive-control captions: colour foils on single-object images (the original names
    one colour), the foil colour replaced by the colour farthest in RGB from the true one,
    so the image strongly contradicts the word. Empty when there are none (real FOIL)."""
    def n_colours(text: str) -> int:
        return sum(w in COLORS for w in text.split())

    sel = df[(df.foil_type == "color") & df.original.map(n_colours).eq(1)
             & df.target_word.isin(list(COLORS))].copy()
    far = {c: max(COLORS, key=lambda o: float(np.sum((np.subtract(COLORS[o], COLORS[c])) ** 2)))
           for c in COLORS}
    words = [cap.split() for cap in sel.caption]
    for w, st, tw in zip(words, sel.start.astype(int), sel.target_word):
        w[st] = far[tw]
    sel["caption"], sel["foil_word"] = [" ".join(w) for w in words], sel.target_word.map(far)
    sel["foil_type"] = "planted colour"
    return sel.reset_index(drop=True)


@dataclass
class FoilDraws:
    """Caption rows (:func:`~fgclip.studies.clip4dm.data.caption_rows`) of the
    validation split and of each test draw, the planted positive-control rows per draw,
    and how many captions of each were skipped as longer than the text context."""

    val: pd.DataFrame
    test: dict[int, pd.DataFrame]
    planted: dict[int, pd.DataFrame]
    skipped: dict[str, int]

    def counts(self, val_split: str, test_split: str) -> pd.DataFrame:
        """Captions per foil type (rows) and split or draw (columns)."""
        counts = pd.DataFrame({f"{test_split} draw {s}": df.foil_type.value_counts() for s, df in self.test.items()})
        counts[val_split] = self.val.foil_type.value_counts()
        counts.loc["planted colour"] = [len(p) for p in self.planted.values()] + [0]
        return counts.fillna(0).astype(int)


def load_draws(clip: Clip, data_root: str, val_split: str, test_split: str, seed: int,
               seeds: Sequence[int], n_scenes: int, max_pairs: int) -> FoilDraws:
    """The validation rows (drawn with ``seed``) and one set of test rows per seed of
    ``seeds`` (:func:`~fgclip.studies.clip4dm.data.foil_sets`), captions that do not fit
    the context dropped and counted; planted colour foils built from each test draw."""
    val = foil_sets(data_root, val_split, [seed], n_scenes, max_pairs)[seed]
    test = foil_sets(data_root, test_split, seeds, n_scenes, max_pairs)
    fits = {k: c4dm.caption_fits(clip, df.caption.tolist()) for k, df in [("val", val), *test.items()]}
    val = val[fits["val"]].reset_index(drop=True)
    test = {s: df[fits[s]].reset_index(drop=True) for s, df in test.items()}
    return FoilDraws(val, test, {s: planted_colour_rows(df) for s, df in test.items()},
                     {str(k): int((~f).sum()) for k, f in fits.items()})
