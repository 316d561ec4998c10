"""Chapter 1's word-map figures on a split: every word's map of one caption, and the caption
widget over a split's images (the generic figures are in :mod:`fgclip.viz.localization`)."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch

from ...viz.localization import Box, caption_map_widget, plot_word_maps
from .data import word_features
from .heads import caption_word_maps, word_boxes


def plot_caption_maps(heads, v: torch.Tensor, data, caption: int) -> plt.Figure:
    """Every word's map m_{:,:,d} of one caption of a split on its own image, with the boxes
    of the phrase each word belongs to. v: (N, E, h, w) the split's projected features."""
    c = data.corpus
    i, words = c.caption_image[caption], c.captions[caption]
    maps = caption_word_maps(heads, v, data.words, i, caption, len(words))  # (L, h, w)
    return plot_word_maps(data.images[i], words, maps,
                          word_boxes(c, caption, len(words), to_hw=data.images.shape[1:3]))


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
