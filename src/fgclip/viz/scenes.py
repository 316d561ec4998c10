"""Figures of toy scenes: images with boxes and captions, object-centre densities, curves."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from ..toyworld import Scene
from .style import COLUMN_WIDTH


def show_scenes(scenes: list[Scene], ncols: int = 4, caption_index: int = 0) -> plt.Figure:
    """A grid of scenes, each box labelled with its category, caption below the image."""
    nrows = int(np.ceil(len(scenes) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(COLUMN_WIDTH, COLUMN_WIDTH / ncols * nrows * 1.35))
    for ax, scene in zip(np.atleast_1d(axes).flat, scenes):
        ax.imshow(scene.image)
        for obj in scene.objects:
            x0, y0, x1, y1 = obj.box
            ax.add_patch(plt.Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False,
                                       ec="white", lw=0.8))
            ax.text(x0, y0 - 1, obj.category, color="white", fontsize=5, va="bottom")
        ax.set_xlabel("\n".join(textwrap.wrap(scene.captions[caption_index].text, 28)), fontsize=6)
        ax.set_xticks([]), ax.set_yticks([])
        ax.grid(False)
    for ax in np.atleast_1d(axes).flat[len(scenes):]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def center_density(scenes_by_bias: dict[float, list[Scene]], image_size: int) -> plt.Figure:
    """2-D histograms of object centres, one panel per center-bias setting."""
    fig, axes = plt.subplots(1, len(scenes_by_bias), figsize=(COLUMN_WIDTH, COLUMN_WIDTH / len(scenes_by_bias) + 0.4))
    for ax, (bias, scenes) in zip(np.atleast_1d(axes), scenes_by_bias.items()):
        centres = np.array([o.center for s in scenes for o in s.objects])
        ax.hist2d(centres[:, 0], centres[:, 1], bins=16, range=[[0, image_size]] * 2, cmap="magma")
        ax.set_title(f"center_bias = {bias}")
        ax.set_xlabel("x (px)"), ax.set_ylabel("y (px)")
        ax.invert_yaxis(), ax.set_aspect("equal")
    fig.tight_layout()
    return fig


def plot_history(history: list[dict], restarts: list[int] = ()) -> plt.Figure:
    """Training loss per step and held-out R@1 per epoch from a pretraining history; a dashed
    line at each step in ``restarts`` (where a continued run began: a new warmup and cosine)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(COLUMN_WIDTH, COLUMN_WIDTH * 0.38))
    steps = [h for h in history if "loss" in h]
    evals = [h for h in history if "i2t_R@1" in h]
    a.plot([h["step"] for h in steps], [h["loss"] for h in steps])
    a.set_xlabel("step"), a.set_ylabel("contrastive loss")
    for step in restarts:
        a.axvline(step, color="0.5", linestyle="--", linewidth=0.8)
    for key, label in (("i2t_R@1", "image→text R@1"), ("t2i_R@1", "text→image R@1"),
                       ("zero_shot_shape_acc", "zero-shot shape acc.")):
        b.plot([h["epoch"] for h in evals], [h[key] for h in evals], marker="o", label=label)
    b.set_xlabel("epoch"), b.set_ylabel("held-out score"), b.set_ylim(0, 1)
    b.legend(fontsize=7)
    fig.tight_layout()
    return fig
