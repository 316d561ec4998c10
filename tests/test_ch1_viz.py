import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from fgclip.metrics.pointing import argmax_point, resized_argmax_point  # noqa: E402
from fgclip.viz.localization import (caption_map_widget, plot_bias_sweep,  # noqa: E402
                                     plot_word_maps)


def _maps(i, words):
    g = torch.Generator().manual_seed(i * 100 + len(words))
    return torch.rand(len(words), 8, 8, generator=g)


def test_plot_word_maps_draws_one_panel_per_word_with_its_argmax():
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    maps = torch.zeros(2, 8, 8)
    maps[0, 0, 7] = 1.0  # top-right cell: argmax at (60, 4)
    fig = plot_word_maps(image, ["a", "star"], maps, [[], [(0, 0, 8, 8)]])
    panels = [ax for ax in fig.axes if ax.get_title() in ("a", "star")]
    assert [ax.get_title() for ax in panels] == ["a", "star"]
    x, y = panels[0].lines[0].get_data()
    assert (x[0], y[0]) == resized_argmax_point(maps[0], (64, 64)) == (60, 0)  # the chapter's rule, as scored
    assert len(panels[1].patches) == 1  # the box
    plt.close(fig)
    cell = plot_word_maps(image, ["a", "star"], maps, point_of=argmax_point)  # the cell-centre rule: (60, 4)
    x, y = [ax for ax in cell.axes if ax.get_title() == "a"][0].lines[0].get_data()
    assert (x[0], y[0]) == (60.0, 4.0)
    plt.close(cell)
    with pytest.raises(ValueError, match="words"):
        plot_word_maps(image, ["a"], maps)


def test_widget_redraws_for_a_new_pick_and_a_typed_caption():
    images = np.zeros((3, 64, 64, 3), dtype=np.uint8)
    w = caption_map_widget(images, [(0, "a red star"), (2, "a blue moon above a star")], _maps)
    first = w.redraw()
    assert "image 0" in first.texts[0].get_text()
    w.controls["pick"].value = 1
    assert w.figure is not first and "image 2" in w.figure.texts[0].get_text()
    w.controls["typed"].value = "a green square"
    assert "a green square" in w.figure.texts[0].get_text()
    assert w.n_draws == 3
    plt.close("all")


def test_bias_sweep_plot_needs_its_columns():
    df = pd.DataFrame(dict(center_bias=[0.0, 0.5], stratum="all", baseline="center",
                           diff=[0.1, 0.05], low=[0.0, -0.02], high=[0.2, 0.1]))
    fig = plot_bias_sweep(df)
    assert fig.axes[0].get_xlabel() == "toy-world center_bias"
    plt.close(fig)
    with pytest.raises(KeyError):
        plot_bias_sweep(df.drop(columns="low"))
