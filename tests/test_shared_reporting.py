"""The shared reporting pieces: bootstrap intervals, seed tables, heatmaps, the widget pattern."""
import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fgclip.reporting import found_box, seed_table, shown, write_results
from fgclip.stats import bootstrap_ci, mean_std, paired_bootstrap_diff
from fgclip.viz.heatmaps import overlay_heatmap
from fgclip.viz.widgets import STATIC_ENV, InteractiveFigure, static_widgets


def test_bootstrap_ci_brackets_the_mean_and_matches_scipy():
    x = np.random.default_rng(1).normal(2.0, 1.0, size=300)
    est, low, high = bootstrap_ci(x, seed=3)
    ref = stats.bootstrap((x,), np.mean, rng=np.random.default_rng(3), n_resamples=2000,
                          vectorized=False).confidence_interval
    assert est == pytest.approx(x.mean())
    assert (low, high) == pytest.approx((ref.low, ref.high))
    assert low < est < high and high - low < 0.4  # about 4 standard errors of 1/sqrt(300)


def test_paired_bootstrap_detects_a_shift_that_unpaired_noise_hides():
    rng = np.random.default_rng(0)
    difficulty = rng.normal(0, 5, size=200)  # shared by both columns: pairing removes it
    a, b = difficulty + 0.5, difficulty
    diff, low, high = paired_bootstrap_diff(a + rng.normal(0, 0.1, 200), b, seed=0)
    assert diff == pytest.approx(0.5, abs=0.05)
    assert 0.3 < low < diff < high < 0.7


def test_paired_bootstrap_of_identical_columns_is_a_point_at_zero():
    x = np.arange(10.0)
    assert paired_bootstrap_diff(x, x) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("bad", [[1.0], [[1.0, 2.0]], [1.0, np.nan]])
def test_bootstrap_rejects_bad_samples(bad):
    with pytest.raises(ValueError, match="values"):
        bootstrap_ci(bad)


def test_paired_bootstrap_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_diff([1.0, 2.0, 3.0], [1.0, 2.0])


def test_mean_std_uses_the_sample_deviation():
    assert mean_std([1.0, 2.0, 3.0]) == "2.000 ± 1.000"
    assert mean_std([0.5], digits=2) == "0.50 ± 0.00"


def test_seed_table_groups_and_counts_seeds():
    df = pd.DataFrame({"seed": [0, 1, 2, 0, 1, 2], "loss": ["npair"] * 3 + ["triplet"] * 3,
                       "acc": [0.5, 0.6, 0.7, 0.1, 0.2, 0.3]})
    table = seed_table(df, ["loss"], ["acc"])
    assert table.loc["npair", "acc"] == "0.600 ± 0.100"
    assert table.loc["triplet", "acc"] == "0.200 ± 0.100"
    assert table["n_seeds"].tolist() == [3, 3]
    with pytest.raises(KeyError, match="missing|not in"):
        seed_table(df, ["loss"], ["recall"])


def test_found_box_is_a_myst_admonition(tmp_path):
    text = found_box("What we found (seed 0)", ["a **1.5**", "b"]).data
    assert text.startswith("```{admonition} What we found (seed 0)\n:class: tip\n- a **1.5**\n- b\n```")
    with pytest.raises(ValueError):
        found_box("x", [])
    write_results("", {"x": 1})  # no path: nothing written, no error
    write_results(str(tmp_path / "r.json"), {"x": 1})
    assert (tmp_path / "r.json").read_text().strip().replace(" ", "").replace("\n", "") == '{"x":1}'


def test_overlay_heatmap_stretches_the_map_over_the_image_and_adds_a_colorbar():
    fig, ax = plt.subplots()
    heat = np.arange(16.0).reshape(4, 4)
    im = overlay_heatmap(ax, np.zeros((64, 32, 3), np.uint8), heat, boxes=[(1, 2, 10, 20)],
                         point=(5.0, 6.0), label="m")
    assert im.get_extent() == [0, 32, 64, 0]
    assert np.array_equal(im.get_array(), heat)
    assert len(ax.patches) == 1 and ax.lines[0].get_xydata().tolist() == [[5.0, 6.0]]
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "m"  # the colorbar
    with pytest.raises(ValueError, match="2-D"):
        overlay_heatmap(ax, np.zeros((8, 8, 3), np.uint8), np.zeros((2, 2, 2)))
    plt.close(fig)


def _titled(k: int, word: str) -> plt.Figure:
    fig, ax = plt.subplots()
    ax.set_title(f"{word} {k}")
    return fig


def test_interactive_figure_redraws_when_a_control_changes(monkeypatch):
    monkeypatch.delenv(STATIC_ENV, raising=False)
    w = InteractiveFigure(_titled, {"k": widgets.IntSlider(value=1, min=0, max=5),
                                    "word": widgets.Text(value="cat")})
    box = w.widget()
    assert isinstance(box, widgets.VBox) and w.figure.axes[0].get_title() == "cat 1"
    w.controls["k"].value = 4
    assert w.figure.axes[0].get_title() == "cat 4" and w.n_draws == 2
    w.controls["word"].value = "dog"
    assert w.figure.axes[0].get_title() == "dog 4" and w.n_draws == 3


def test_static_mode_draws_the_default_values(monkeypatch):
    monkeypatch.setenv(STATIC_ENV, "1")
    assert static_widgets()
    w = InteractiveFigure(_titled, {"k": widgets.IntSlider(value=2), "word": widgets.Text(value="x")})
    w.show()
    assert w.n_draws == 1 and w.figure.axes[0].get_title() == "x 2"
    monkeypatch.setenv(STATIC_ENV, "0")
    assert not static_widgets()


def test_interactive_figure_rejects_non_value_controls():
    with pytest.raises(TypeError, match="button"):
        InteractiveFigure(_titled, {"button": widgets.Button()})
    with pytest.raises(ValueError):
        InteractiveFigure(_titled, {})


def test_show_source_shows_the_running_code():
    from fgclip.models.tokens import average_spans, spans_from_counts
    from fgclip.reporting import show_source
    md = show_source(spans_from_counts, average_spans).data
    assert md.startswith("```python\ndef spans_from_counts(") and md.endswith("\n```")
    assert "def average_spans(" in md and "np.cumsum(counts" in md
    with pytest.raises(ValueError, match="at least one"):
        show_source()


def test_glue_findings_glues_markdown_under_the_chapter_prefix(monkeypatch):
    import myst_nb
    from fgclip import reporting
    glued = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display: glued.append((name, value.data, display)))
    names = reporting.glue_findings("ch9", {"headline": "A **beats** B", "data-size": "12 images"})
    assert glued == [("ch9-headline", "A **beats** B", False), ("ch9-data-size", "12 images", False)]
    assert names == {"ch9-headline": "A **beats** B", "ch9-data-size": "12 images"}
    with pytest.raises(ValueError, match="lower-case"):
        reporting.glue_findings("ch9", {"Bad Key": "x"})


def test_shown_paths_keep_the_machine_out(tmp_path, monkeypatch):
    """What the chapters print for data roots, checkpoints and output folders: the runner
    passes them absolute, and the book must not show where the build machine keeps them."""
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    monkeypatch.chdir(project / "notebooks")  # where a chapter runs
    assert shown("toy") == "toy" and shown("../data/ch0") == "../data/ch0"  # names and relative paths as given
    assert shown(project / "data" / "ch0" / "toy-1a2b") == "../data/ch0/toy-1a2b"
    assert shown(f"{project}/runs/ch4/20260101/../20260102") == "../runs/ch4/20260102"
    assert shown(project / "notebooks" / "x.pt") == "x.pt"
    elsewhere = shown("/opt/weights/team/ckpt/vit.pt")
    assert elsewhere == ".../ckpt/vit.pt" and str(tmp_path) not in shown(tmp_path / "other" / "a.pt")
    monkeypatch.chdir("/")  # no parent to be relative to: last parts only
    assert shown("/srv/data/coco") == ".../data/coco"
