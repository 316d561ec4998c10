from dataclasses import replace

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from fgclip.evaluation import pair_retrieval, shape_classification
from fgclip.models import create_clip
from fgclip.progress import progress_disabled
from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.viz import center_density, plot_history, show_scenes


def test_show_scenes_draws_one_box_per_object():
    scenes = generate(ToyWorldConfig(), 6, seed=0)
    fig = show_scenes(scenes, ncols=3)
    axes = fig.axes[:6]
    for ax, scene in zip(axes, scenes):
        assert len(ax.patches) == len(scene.objects)
        assert ax.get_xlabel().replace("\n", " ") == scene.captions[0].text


def test_center_density_has_one_panel_per_bias():
    scenes = {b: generate(replace(ToyWorldConfig(), center_bias=b), 20, 0) for b in (0.0, 1.0)}
    fig = center_density(scenes, 64)
    assert [a.get_title() for a in fig.axes[:2]] == ["center_bias = 0.0", "center_bias = 1.0"]


def test_plot_history_plots_the_logged_values():
    history = [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.0},
               {"step": 2, "epoch": 1, "i2t_R@1": 0.1, "t2i_R@1": 0.2, "zero_shot_shape_acc": 0.3}]
    fig = plot_history(history)
    assert list(fig.axes[0].lines[0].get_ydata()) == [3.0, 2.0]
    assert [list(l.get_ydata()) for l in fig.axes[1].lines] == [[0.1], [0.2], [0.3]]


def test_pair_retrieval_of_a_random_model_is_near_chance_and_in_range():
    torch.manual_seed(0)
    clip = create_clip("toy-vit", pretrained=None)
    scenes = generate(ToyWorldConfig(), 40, seed=0, split="test")
    m = pair_retrieval(clip, np.stack([s.image for s in scenes]), [s.captions[0].text for s in scenes])
    assert set(m) == {f"{d}_R@{k}" for d in ("i2t", "t2i") for k in (1, 5, 10)}
    assert all(0.0 <= v <= 1.0 for v in m.values())
    assert m["i2t_R@1"] <= m["i2t_R@5"] <= m["i2t_R@10"]
    assert m["i2t_R@10"] < 0.7  # 10 of 40 is chance 0.25; a random model cannot be far above


def test_committed_toy_clip_beats_chance_by_far():
    clip = create_clip("toy-vit", pretrained="toy")
    world = replace(ToyWorldConfig(), min_objects=1, max_objects=1)
    acc = shape_classification(clip, generate(world, 100, seed=5, split="test"), world.categories)
    assert acc > 4 / len(world.categories)


def test_shape_classification_rejects_multi_object_scenes():
    clip = create_clip("toy-vit", pretrained=None)
    scenes = generate(ToyWorldConfig(min_objects=2, max_objects=2), 2, 0)
    with pytest.raises(ValueError, match="single-object"):
        shape_classification(clip, scenes, ToyWorldConfig().categories)


def test_progress_off_in_ci(monkeypatch):
    monkeypatch.delenv("TESTING", raising=False)
    monkeypatch.setenv("CI", "true")
    assert progress_disabled()
    monkeypatch.setenv("CI", "false")
    assert not progress_disabled()
