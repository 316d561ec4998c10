"""Chapter 1's figures: word heatmaps with their argmax, the caption widget, the bias sweep.

The versions bound to a split of the chapter's data are in :mod:`fgclip.studies.maximage.figures`."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from ..metrics.pointing import resized_argmax_point
from .heatmaps import overlay_heatmap
from .style import COLUMN_WIDTH

Box = tuple[float, float, float, float]


def plot_word_maps(image: np.ndarray, words: Sequence[str], maps: torch.Tensor | np.ndarray,
                   boxes: Sequence[Sequence[Box]] | None = None, ncols: int = 6,
                   title: str | None = None,
                   point_of: Callable[[np.ndarray, tuple[int, int]], tuple[float, float]] = resized_argmax_point
                   ) -> plt.Figure:
    """One panel per word: its map m_{:,:,d} over the image, the point the pointing rule reads
    off it (x; ``point_of(map, (H, W))``, by default MultiGrounding's
    :func:`~fgclip.metrics.pointing.resized_argmax_point`, the chapter's rule, drawn where it is
    scored), the word's ground-truth boxes (white) when given. maps: (L, h, w), L == len(words)."""
    if len(maps) != len(words):
        raise ValueError(f"{len(words)} words but {len(maps)} maps")
    if boxes is not None and len(boxes) != len(words):
        raise ValueError(f"{len(words)} words but {len(boxes)} box lists")
    maps = maps.detach().cpu().numpy() if isinstance(maps, torch.Tensor) else np.asarray(maps)
    vmin, vmax = float(maps.min()), float(maps.max())  # one colour scale for all words
    ncols = min(ncols, len(words))
    nrows = -(-len(words) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(COLUMN_WIDTH, 1.35 * nrows + 0.3),
                             squeeze=False)
    hw = image.shape[:2]
    for k, ax in enumerate(axes.flat):
        if k >= len(words):
            ax.axis("off")
            continue
        overlay_heatmap(ax, image, maps[k], boxes=boxes[k] if boxes else (),
                        point=point_of(maps[k], hw), colorbar=k % ncols == ncols - 1,
                        vmin=vmin, vmax=vmax, title=words[k], label="cosine")
    if title:
        fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    return fig


def caption_map_widget(images: np.ndarray, choices: Sequence[tuple[int, str]],
                       word_maps: Callable[[int, list[str]], torch.Tensor],
                       boxes_of: Callable[[int, list[str]], list[list[Box]]] | None = None):
    """The chapter's widget: pick an (image, caption) pair or type a caption.

    ``choices``: (image index, caption) pairs for the dropdown; ``word_maps(i, words)``
    returns the (L, h, w) maps of those words on image i (L may be shorter than the words
    when the caption was cut to the text context); ``boxes_of(i, words)`` the ground-truth
    boxes per word (not asked for a typed caption). A non-empty text box
    overrides the dropdown's caption on the dropdown's image.
    """
    from .widgets import InteractiveFigure

    if not choices:
        raise ValueError("caption_map_widget needs at least one (image, caption) choice")
    options = [(f"image {i}: {c}", k) for k, (i, c) in enumerate(choices)]
    controls = {"pick": widgets.Dropdown(options=options, value=0, description="caption"),
                "typed": widgets.Text(value="", placeholder="or type a caption",
                                      description="typed")}

    def draw(pick: int, typed: str) -> plt.Figure:
        i, caption = choices[pick]
        words = (typed.strip() or caption).split()  # case kept: the tokenizer lowercases
        maps = word_maps(i, words)
        words = words[:len(maps)]  # a caption longer than the text context is cut
        boxes = boxes_of(i, words) if boxes_of and not typed.strip() else None
        return plot_word_maps(images[i], words, maps, boxes,
                              title=f"image {i}: " + " ".join(words))

    return InteractiveFigure(draw, controls)




def plot_bias_sweep(df: pd.DataFrame) -> plt.Figure:
    """Margin over the centre baseline against center-bias strength, with 95% intervals.

    df columns: center_bias, stratum ("all" / "non-center"), baseline, diff, low, high.
    """
    need = {"center_bias", "stratum", "baseline", "diff", "low", "high"}
    if not need <= set(df.columns):
        raise KeyError(f"plot_bias_sweep needs columns {sorted(need - set(df.columns))}")
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH * 0.6, 2.4))
    for (stratum, baseline), g in df.groupby(["stratum", "baseline"], sort=False):
        g = g.sort_values("center_bias")
        ax.errorbar(g["center_bias"], g["diff"], yerr=[g["diff"] - g["low"], g["high"] - g["diff"]],
                    marker="o", capsize=3, label=f"{stratum} phrases, vs {baseline}")
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_xlabel("toy-world center_bias")
    ax.set_ylabel("model − baseline\n(pointing accuracy)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def plot_bias_accuracy(df: pd.DataFrame, x: str = "train_bias") -> plt.Figure:
    """Accuracy against the toy world's centre bias: one line per numeric column of ``df``
    other than ``x`` (mean over seeds; the model, its non-centre stratum, the floors)."""
    if x not in df.columns:
        raise KeyError(f"plot_bias_accuracy needs the column {x!r}")
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH * 0.6, 2.4))
    g = df.sort_values(x)
    for col in [c for c in g.columns if c != x and pd.api.types.is_numeric_dtype(g[c])]:
        ax.plot(g[x], g[col], marker="o", label=col)
    ax.set_xlabel("toy-world center_bias (training world)")
    ax.set_ylabel("pointing accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=5)
    fig.tight_layout()
    return fig
