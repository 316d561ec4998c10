"""Chapter 1's word-map figures on a split: every word's map of one caption, and the caption
widget over a split's images (the generic figures are in :mod:`fgclip.viz.localization`)."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import pandas as pd
import torch

from ...viz.localization import Box, caption_map_widget, plot_bias_accuracy, plot_word_maps
from .data import word_features
from .heads import caption_word_maps, rule_of, word_boxes


def plot_caption_maps(heads, v: torch.Tensor, data, caption: int, title: str = "", rule: str = "resized") -> plt.Figure:
    """Every word's map m_{:,:,d} of one caption of a split on its own image, with the boxes
    of the phrase each word belongs to and the point the pointing ``rule`` reads off each map
    (:func:`~fgclip.studies.maximage.heads.rule_of`). v: (N, E, h, w) the split's projected
    features; ``title`` (e.g. the model and its seed) above the panels."""
    c = data.corpus
    i, words = c.caption_image[caption], c.captions[caption]
    maps = caption_word_maps(heads, v, data.words, i, caption, len(words))  # (L, h, w)
    fig = plot_word_maps(data.images[i], words, maps, word_boxes(c, caption, len(words), to_hw=data.images.shape[1:3]),
                         point_of=rule_of(rule)[0])
    if title:
        fig.suptitle(title, fontsize=7)
    return fig


def split_caption_widget(clip, heads, v: torch.Tensor, data, captions: Sequence[int],
                         word_kind: str, device: str = "cpu"):
    """:func:`caption_map_widget` on a split: the dropdown offers ``captions`` (indices into
    the split's captions) on their images; a typed caption is encoded by the frozen text
    tower (cut to the text context) and read through the heads. Boxes are drawn when the
    words are those of one of the image's own captions (any case)."""
    c = data.corpus
    caption_of = {(i, " ".join(w).lower()): k for k, (i, w) in enumerate(zip(c.caption_image, c.captions))}

    def maps(i: int, words: list[str]) -> torch.Tensor:
        feats, mask = word_features(clip, [words], word_kind, device=device, too_long="truncate")
        return torch.einsum("ehw,le->lhw", v[i], heads.word_vectors(feats[0, mask[0]])).detach()

    def boxes(i: int, words: list[str]) -> list[list[Box]]:
        k = caption_of.get((i, " ".join(words).lower()))
        return [[] for _ in words] if k is None else word_boxes(c, k, len(words), data.images.shape[1:3])

    choices = [(c.caption_image[k], " ".join(c.captions[k])) for k in captions]
    return caption_map_widget(data.images, choices, maps, boxes)


def bias_means(table: pd.DataFrame) -> pd.DataFrame:
    """The centre-bias sweep's per-seed rows averaged over seeds, one row per training bias."""
    if "train_bias" not in table.columns or "seed" not in table.columns:
        raise KeyError(f"bias_means needs the columns 'train_bias' and 'seed', got {list(table.columns)}")
    return table.groupby("train_bias", as_index=False).mean().drop(columns="seed")


def plot_bias_seeds(table: pd.DataFrame, leave_out: Sequence[str] = ("centre-cell share on bias-0 test",)
                    ) -> plt.Figure:
    """Accuracy against the training world's centre bias (:func:`plot_bias_accuracy`, the
    means over seeds as lines) with every seed's value as a point in its line's colour, so a
    mean moved by one seed shows."""
    means = bias_means(table).drop(columns=list(leave_out))
    fig = plot_bias_accuracy(means)
    ax = fig.axes[0]
    for line in ax.get_lines():
        col = line.get_label()
        if col in table.columns:
            ax.scatter(table["train_bias"], table[col], s=6, color=line.get_color(), alpha=0.5, zorder=3)
    ax.set_title(f"lines: mean over {table['seed'].nunique()} seeds; points: each seed", fontsize=6)
    return fig
