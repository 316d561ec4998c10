"""The chapter's figures and its widget's draw function."""
import ipywidgets as widgets
import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from fgclip.viz import InteractiveFigure  # noqa: E402
from fgclip.viz.multilabel import draw_prediction, plot_map_vs_proportion  # noqa: E402

NAMES = ["circle", "star", "heart"]


def test_map_plot_has_one_line_per_variant():
    table = pd.DataFrame([[0.3, 0.4], [0.5, 0.6]], index=["a", "b"], columns=[0.1, 0.5])
    fig = plot_map_vs_proportion(table)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2 and list(lines[1].get_ydata()) == [0.5, 0.6]
    assert list(lines[0].get_xdata()) == [10.0, 50.0]
    with pytest.raises(ValueError, match="empty"):
        plot_map_vs_proportion(pd.DataFrame())


def test_widget_redraws_with_image_and_proportion():
    rng = np.random.default_rng(0)
    runs = {0.1: (rng.random((2, 3)), rng.random((2, 3, 4, 4))),
            0.5: (rng.random((2, 3)), rng.random((2, 3, 4, 4)))}
    images = rng.integers(0, 255, (2, 16, 16, 3), dtype=np.uint8)

    def draw(image_index=0, known=0.1):
        scores, att = runs[known]
        return draw_prediction(images[image_index], scores[image_index], att[image_index],
                               NAMES, ["star"], {"star": [(1, 1, 8, 8)]}, title="t")

    w = InteractiveFigure(draw, {"image_index": widgets.IntSlider(value=0, min=0, max=1),
                                 "known": widgets.SelectionSlider(options=[0.1, 0.5], value=0.1)})
    first = w.redraw()
    assert len(first.axes) == 1 + 3  # the bar chart and one map per category
    bars = [p.get_height() for p in first.axes[0].patches]
    assert bars == pytest.approx(runs[0.1][0][0].tolist())
    w.controls["known"].value = 0.5
    assert w.figure is not first
    assert [p.get_height() for p in w.figure.axes[0].patches] == pytest.approx(runs[0.5][0][0].tolist())
    w.controls["image_index"].value = 1
    assert [p.get_height() for p in w.figure.axes[0].patches] == pytest.approx(runs[0.5][0][1].tolist())


def test_draw_prediction_checks_shapes():
    with pytest.raises(ValueError, match="scores"):
        draw_prediction(np.zeros((8, 8, 3), np.uint8), np.zeros(2), None, NAMES, [], {})


def test_draw_image_file_prediction_reads_present_categories_and_boxes(tmp_path):
    from PIL import Image

    from fgclip.viz.multilabel import draw_image_file_prediction

    path = tmp_path / "img.png"
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(path)
    objects = [("star", (1, 1, 8, 8)), ("circle", (2, 2, 6, 6)), ("star", (9, 9, 15, 15))]
    fig = draw_image_file_prediction(path, np.array([0.1, 0.9, 0.2]), np.ones((3, 4, 4)), objects, NAMES, "t")
    colors = [p.get_facecolor() for p in fig.axes[0].patches]
    assert colors[0] == colors[1] != colors[2]  # circle and star present, heart not
    star_ax = fig.axes[2]
    assert len(star_ax.patches) == 2  # both star boxes drawn on the star map
