"""Chapter 2's arms: the variant grid and the compared rules, each an
:class:`~fgclip.methods.clip4dm.AttributionConfig`, and the attributions of a test draw keyed by them."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd
import torch

from ...methods import clip4dm as c4dm
from ...methods.clip4dm import AttributionConfig, Attributions
from ...models import encode_image_paths
from ...models.factory import Clip

MAIN = "CLIP4DM"  # the arm name of the chosen rule in every table and verdict
F_NAMES = {"most negative": "F-CLIPScore as the paper's code evaluates it (most negative)",
           "threshold": "F-CLIPScore, threshold form", "additive": "F-CLIPScore, additive reading"}


def last_layers(n: int) -> AttributionConfig:
    """CLIP4DM on the last ``n`` text layers (negatives kept, plain layer mean)."""
    if n < 1:
        raise ValueError(f"last_layers: n must be >= 1, got {n}")
    return AttributionConfig(layers=tuple(range(-n, 0)))


def gae(n_layers: int) -> AttributionConfig:
    """Chefer et al.'s GAE: ReLU and rollout over all ``n_layers`` text layers."""
    return AttributionConfig(layers=tuple(range(n_layers)), relu=True, rollout=True)


def layer_grid(n_layers: int) -> list[AttributionConfig]:
    """The validation pass's variants: last n, + ReLU, + rollout for n = 1..n_layers, and GAE."""
    grid = []
    for n in range(1, n_layers + 1):
        cfg = last_layers(n)
        grid += [cfg, dataclasses.replace(cfg, relu=True), dataclasses.replace(cfg, rollout=True)]
    return grid + [gae(n_layers)]


def method_arms(main: AttributionConfig, n_layers: int) -> dict[str, AttributionConfig]:
    """The gradient arms compared on the test draws: the chosen rule, the same with a ReLU
    (the paper's change alone), with rollout, and GAE; {arm name: config}."""
    return {MAIN: main, f"{MAIN} + ReLU": dataclasses.replace(main, relu=True),
            f"{MAIN} + rollout": dataclasses.replace(main, rollout=True), "GAE": gae(n_layers)}


class ImageFeatures(NamedTuple):
    """Embeddings of the distinct images (U, D) and, per caption, the row of its image."""

    feats: torch.Tensor
    index: np.ndarray


def attribute(clip: Clip, df: pd.DataFrame, cfgs: Sequence[AttributionConfig], device: str = "cpu",
              batch_size: int = 128) -> tuple[dict[AttributionConfig, Attributions], ImageFeatures]:
    """w_j of every caption of ``df`` for each config (one backward pass per batch), keyed
    by the config; images are decoded and encoded a batch at a time, only features stay."""
    feats, index = encode_image_paths(clip, df.image.tolist(), device=device)
    attr = c4dm.clip4dm_variants(clip, feats, df.caption.tolist(), {cfg: cfg for cfg in cfgs}, device=device,
                                 batch_size=batch_size, image_index=index)
    return attr, ImageFeatures(feats, np.asarray(index))


@dataclass
class Draw:
    """One test draw: its caption rows, the attributions of every arm (keyed by config),
    leave-one-word-out on its foil captions (``foil``: (N,) bool) and its image features."""

    rows: pd.DataFrame
    attr: dict[AttributionConfig, Attributions]
    loo: Attributions
    foil: np.ndarray
    images: ImageFeatures


def attribute_draw(clip: Clip, df: pd.DataFrame, cfgs: Sequence[AttributionConfig], device: str = "cpu",
                   batch_size: int = 128) -> Draw:
    """:func:`attribute` for every arm plus leave-one-word-out on the foil captions only
    (n + 1 text passes per caption)."""
    attr, images = attribute(clip, df, cfgs, device, batch_size)
    foil = df.foil_type.ne("original").to_numpy()
    loo = c4dm.leave_one_word_out(clip, images.feats, df.caption[foil].tolist(), device=device,
                                  image_index=images.index[foil])
    return Draw(df, attr, loo, foil, images)
