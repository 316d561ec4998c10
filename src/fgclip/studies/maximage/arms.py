"""Chapter 1's training arms: each arm is a named :class:`TrainConfig` (plus how its captions
are dealt), trained once per seed on the cached frozen features of the fit split.

The arms differ only in their configs, so every comparison between two arms is a
comparison of the one setting they differ in (the loss, the aggregator, the score, the
false-negative mask, the captions' links to images, or no training at all).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from ...methods.maximage import MaxImageHeads
from ...models import Clip
from .data import Split, load_split, subset_split
from .evaluation import shuffled_caption_image
from .heads import TrainConfig, make_heads, train_heads


class Splits(NamedTuple):
    """The chapter's three splits: the last ``n_val`` training images held out as ``val``."""
    fit: Split
    val: Split
    test: Split

    def sizes(self) -> dict[str, int]:
        """Images per split: {"fit": ..., "val": ..., "test": ...}."""
        return {name: len(split.images) for name, split in self._asdict().items()}


def load_splits(clip: Clip, root: str | Path, train_split: str, test_split: str, n_train: int,
                n_val: int, n_test: int, word_kind: str, device: str = "cpu") -> Splits:
    """Read ``n_train`` training images (the last ``n_val`` become the validation split, never
    trained on) and ``n_test`` test images, with their frozen features."""
    full = load_split(clip, root, train_split, n_train, word_kind, device, keep_images=False)
    n_fit = len(full.images) - n_val
    if n_fit < 2:
        raise ValueError(f"n_val={n_val} leaves {n_fit} of the {len(full.images)} images read from "
                         f"{train_split!r} for training; lower n_val or raise n_train")
    return Splits(subset_split(full, list(range(n_fit))),
                  subset_split(full, list(range(n_fit, len(full.images)))),
                  load_split(clip, root, test_split, n_test, word_kind, device))


@dataclass(frozen=True)
class Arm:
    """A training arm: its name on the page and its config. ``shuffled``: the captions are
    dealt to the training images at random (a seeded permutation per seed: the no-grounding
    control); ``trained=False``: the heads stay at their seeded initialisation."""
    name: str
    cfg: TrainConfig
    shuffled: bool = False
    trained: bool = True


class ArmSet(NamedTuple):
    """The chapter's arms: the main one, the variants compared with it, and two controls."""
    main: Arm
    variants: tuple[Arm, ...]
    shuffled: Arm
    untrained: Arm

    def all(self) -> tuple[Arm, ...]:
        return (self.main, *self.variants, self.shuffled, self.untrained)


def chapter_arms(base: TrainConfig) -> ArmSet:
    """N-Pair MaxImage (``base``) and its variants: the hardest-negative triplet, average
    pooling, the other false-negative rule, the other score; plus the shuffled-caption and
    untrained controls. Each variant changes one field of ``base``."""
    other = "dot" if base.score == "cosine" else "cosine"
    return ArmSet(Arm("N-Pair MaxImage", base),
                  (Arm("triplet (hardest)", replace(base, loss="triplet-hardest")),
                   Arm("N-Pair average pooling", replace(base, aggregator="average")),
                   Arm("N-Pair, same-text negatives kept", replace(base, mask_same_text=not base.mask_same_text)),
                   Arm(f"N-Pair, {other} score", replace(base, score=other))),
                  Arm("N-Pair, shuffled captions", base, shuffled=True),
                  Arm("untrained heads", base, trained=False))


def train_arm(arm: Arm, data: Split, seeds: Sequence[int]) -> list[MaxImageHeads]:
    """The arm's heads for each seed (on the CPU), trained on ``data``'s cached features."""
    out = []
    for s in seeds:
        cfg = replace(arm.cfg, seed=s)
        if not arm.trained:
            out.append(make_heads(data.img.shape[1], data.words.dim, cfg.embed_dim, s, cfg.score))
            continue
        links = data.corpus.caption_image
        links = shuffled_caption_image(links, s) if arm.shuffled else links
        out.append(train_heads(data.img, data.words, None, links, cfg, data.text_ids)[0].cpu())
    return out


def arm_table(arms: Sequence[Arm]) -> pd.DataFrame:
    """One row per arm: the config fields the arms differ in, and how its captions are dealt."""
    return pd.DataFrame([dict(arm=a.name, loss=a.cfg.loss, aggregator=a.cfg.aggregator, score=a.cfg.score,
                              mask_same_text=a.cfg.mask_same_text, batch_size=a.cfg.batch_size,
                              captions="shuffled" if a.shuffled else "own", trained=a.trained) for a in arms])


def selection_table(parse: str, val_acc: dict[str, float], n_val_images: int, base: TrainConfig,
                    min_box_area: float, area_rule: str, planted_rate: float) -> pd.DataFrame:
    """What was chosen on which split: the parse mode on the validation split; every other
    setting fixed beforehand (columns hyperparameter, candidates, chosen, criterion, split)."""
    return pd.DataFrame([
        ("parse mode", {m: round(a, 3) for m, a in val_acc.items()}, parse, "mean pointing accuracy "
         "over the seeds", f"validation ({n_val_images} held-out training images)"),
        ("epochs, lr, temperature, margin, embed_dim", "-", f"{base.epochs}, {base.lr}, {base.temperature}, "
         f"{base.margin}, {base.embed_dim}", "inherited from the chapter's first version, not tuned here", "none"),
        ("min_box_area, area_rule", "-", f"{min_box_area}, {area_rule}", "the public protocol", "none"),
        ("planted_rate (controls)", "-", planted_rate, "fixed before any run", "none")],
        columns=["hyperparameter", "candidates", "chosen", "criterion", "split"])
