"""Words coloured by their attribution w_j, and the chapter's caption widget.

Each word is a box filled from a diverging colour map centred at zero (blue: supports the
image, red: against it); words with w_j < ε get a black frame and are listed as flagged.
"""
from __future__ import annotations

from typing import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import TwoSlopeNorm

from .widgets import InteractiveFigure

Attribute = Callable[[str], tuple[list[str], np.ndarray]]  # caption -> (words, w_j)


def draw_words(ax: plt.Axes, words: Sequence[str], w: np.ndarray, eps: float, *,
               cmap: str = "RdBu", colorbar: bool = True) -> np.ndarray:
    """Draw the words left to right, coloured by w; returns the flagged mask [w_j < eps]."""
    w = np.asarray(w, dtype=np.float64)
    if len(words) != len(w):
        raise ValueError(f"draw_words: {len(words)} words but {len(w)} attributions")
    flagged = w < eps
    bound = float(np.abs(w).max()) if len(w) and np.abs(w).max() > 0 else 1.0
    norm = TwoSlopeNorm(vmin=-bound, vcenter=0.0, vmax=bound)
    colours = plt.get_cmap(cmap)
    x = 0.0
    for word, value, flag in zip(words, w, flagged):
        width = 0.3 + 0.12 * len(word)
        dark = abs(norm(value) - 0.5) > 0.3  # white text on the saturated ends of the map
        ax.text(x + width / 2, 0.5, word, ha="center", va="center", fontsize=11,
                color="white" if dark else "black",
                bbox=dict(boxstyle="round,pad=0.3", facecolor=colours(norm(value)),
                          edgecolor="black" if flag else "none", linewidth=2 if flag else 0))
        x += width + 0.15
    ax.set_xlim(-0.2, max(x, 1.0))
    ax.set_ylim(0, 1)
    ax.axis("off")
    if colorbar:
        sm = plt.cm.ScalarMappable(norm=norm, cmap=colours)
        bar = ax.figure.colorbar(sm, ax=ax, orientation="horizontal", fraction=0.25, pad=0.05)
        bar.set_label("word attribution $w_j$ (red: against the image)")
    return flagged


def attribution_figure(image: np.ndarray, words: Sequence[str], w: np.ndarray, eps: float,
                       score: float | None = None) -> plt.Figure:
    """The image on the left, the coloured caption and the flagged words on the right."""
    fig, (ax_img, ax_txt) = plt.subplots(1, 2, figsize=(9, 2.6), width_ratios=(1, 4))
    ax_img.imshow(image)
    ax_img.axis("off")
    flagged = draw_words(ax_txt, words, w, eps)
    names = ", ".join(wd for wd, f in zip(words, flagged) if f) or "none"
    extra = f", CLIPScore {score:.3f}" if score is not None else ""
    ax_txt.set_title(f"flagged at ε = {eps:.2g}: {names}{extra}", loc="left")
    fig.tight_layout()
    return fig


def caption_widget(image: np.ndarray, caption: str, attribute: Attribute, eps: float,
                   eps_range: tuple[float, float], score_of: Callable[[str], float] | None = None,
                   ) -> InteractiveFigure:
    """Type a caption for ``image``; see w_j per word and the words below the ε slider.

    ``attribute(caption)`` returns (words, w_j); results are cached per caption so moving
    the slider only redraws.
    """
    cache: dict[str, tuple[list[str], np.ndarray]] = {}

    def draw(caption: str, eps: float) -> plt.Figure:
        text = " ".join(caption.split())
        if not text:
            raise ValueError("caption_widget: the caption is empty")
        if text not in cache:
            cache[text] = attribute(text)
        words, w = cache[text]
        return attribution_figure(image, words, w, eps, score_of(text) if score_of else None)

    lo, hi = eps_range
    controls = {
        "caption": widgets.Text(value=caption, description="caption", continuous_update=False,
                                layout=widgets.Layout(width="60%")),
        "eps": widgets.FloatSlider(value=eps, min=lo, max=hi, step=(hi - lo) / 100,
                                   description="ε", readout_format=".2e", continuous_update=False),
    }
    return InteractiveFigure(draw, controls)
