"""Chapter 0's targets with their bootstrap intervals over held-out scenes."""
import numpy as np
import pandas as pd
import pytest
import torch

from fgclip import evaluation as ev
from fgclip.models import create_clip
from fgclip.studies import stage_report as sr
from fgclip.toyworld import ToyWorldConfig


def _held_out(n: int = 60, c: int = 4, noise: float = 0.0, seed: int = 0) -> ev.HeldOut:
    """A hand-made reader: scene n has one category, n % c, named by a one-hot text embedding;
    its image embedding is that name's plus noise, its caption embedding the image's own
    (plus noise), the same caption text for a category; the one-object scenes are the same."""
    g = torch.Generator().manual_seed(seed)
    cls = torch.arange(n) % c
    names = torch.eye(c, 8)
    images = names[cls] + noise * torch.randn(n, 8, generator=g) + 0.01 * torch.randn(n, 8, generator=g)
    captions = images + noise * torch.randn(n, 8, generator=g)
    return ev.HeldOut(images, captions, cls, torch.nn.functional.one_hot(cls, c), names, images, cls)


KEYS = ("i2t_R@1", "zero_shot_shape_acc", "zero_shot_multilabel_mAP", "zero_shot_retrieval_AP@50")


def test_intervals_hold_the_point_value_narrow_with_more_scenes_and_are_seeded():
    h = _held_out(noise=0.5)
    point = ev.held_out_metrics(h)
    ci = ev.held_out_intervals(h, n_boot=300, seed=1)
    assert set(ci) == set(KEYS)
    assert all(ci[k][0] <= point[k] <= ci[k][1] and ci[k][0] < ci[k][1] for k in KEYS), (point, ci)
    assert ci == ev.held_out_intervals(h, n_boot=300, seed=1)
    assert ev.held_out_intervals(h, KEYS[:2], n_boot=300, seed=1) == {k: ci[k] for k in KEYS[:2]}
    with pytest.raises(ValueError, match="keys: \\['t2i_R@1'\\]"):
        ev.held_out_intervals(h, ("t2i_R@1",))
    big = ev.held_out_intervals(_held_out(n=960, noise=0.5), n_boot=300, seed=1)
    # AP@50 reads the top 50 images whatever the gallery's size, so only the other three narrow like 1/sqrt(n)
    assert all(big[k][1] - big[k][0] < (ci[k][1] - ci[k][0]) / 2 for k in KEYS[:3]), (ci, big)


def test_a_perfect_reader_has_a_degenerate_interval_at_one():
    h = _held_out(noise=0.0)
    assert ev.held_out_metrics(h)["zero_shot_multilabel_mAP"] == pytest.approx(1.0)
    ci = ev.held_out_intervals(h, n_boot=50)
    assert all(ci[k] == pytest.approx((1.0, 1.0)) for k in KEYS), ci


def test_bootstrap_ap_is_torchmetrics_ap_without_ties():
    from fgclip.metrics.multilabel import mean_average_precision
    from fgclip.metrics.object_retrieval import average_precision_at_k
    g = torch.Generator().manual_seed(3)
    scores, labels = torch.randn(200, 6, generator=g), (torch.rand(200, 6, generator=g) < 0.2).long()
    assert float(average_precision_at_k(scores.T, labels.T.bool()).mean()) == pytest.approx(
        mean_average_precision(scores, labels), abs=1e-6)


def test_held_out_metrics_are_retrieval_metrics():
    clip, world = create_clip("toy-rn", pretrained=None), ToyWorldConfig()
    whole = ev.retrieval_metrics(clip, world, n=16, seed=2)
    assert ev.held_out_metrics(ev.held_out(clip, world, n=16, seed=2)) == {
        k: v for k, v in whole.items() if k not in ("n", "chance_shape_acc")}


def test_target_status_reads_the_interval():
    assert sr.target_status(0.95, 0.90, (0.92, 0.97)) == "met"
    assert sr.target_status(0.91, 0.90, (0.88, 0.93)) == "too close to call"
    assert sr.target_status(0.80, 0.90, (0.78, 0.85)) == "missed"
    assert sr.target_status(0.91, 0.90, None) == "met (no interval)"


def test_target_rows_and_sentence_carry_each_interval():
    metrics = {"toy-rn": {"zero_shot_shape_acc": 0.96, "i2t_R@1": 0.97, "zero_shot_multilabel_mAP": 0.69,
                          "zero_shot_retrieval_AP@50": 0.61}}
    ci = {"toy-rn": {"zero_shot_shape_acc": (0.95, 0.97), "i2t_R@1": (0.96, 0.98),
                     "zero_shot_multilabel_mAP": (0.67, 0.71), "zero_shot_retrieval_AP@50": (0.58, 0.63)}}
    rows = pd.DataFrame(sr.target_rows(metrics, [], ci))
    assert rows.set_index("what")["status"].to_dict() == {
        "zero_shot_shape_acc": "met", "i2t_R@1": "met", "zero_shot_multilabel_mAP": "too close to call",
        "zero_shot_retrieval_AP@50": "too close to call"}
    text = sr.target_sentence(rows)
    assert text.startswith("The stage meets 3 of its 4 targets (2 with the whole 95% interval")
    assert "zero_shot_multilabel_mAP 0.690 [0.670, 0.710] (target >= 0.70: too close to call)" in text
    assert "shape_acc" not in text
    assert np.isnan(pd.DataFrame(sr.target_rows(metrics, [])).loc[0, "low"])


def test_record_against_targets_names_where_the_record_stands():
    below = {"zero_shot_shape_acc": 0.80, "i2t_R@1": 0.85}
    assert sr.record_against_targets("toy-vit", below) == (
        "still below both of its targets, zero-shot shape accuracy and image-to-text R@1")
    assert sr.record_against_targets("toy-vit", {**below, "i2t_R@1": 0.90}).startswith("meets 1 of its 2 targets")
    assert sr.record_against_targets("toy-vit", {"zero_shot_shape_acc": 0.93, "i2t_R@1": 0.91}).startswith(
        "meets both of its targets")
    rn = {"zero_shot_shape_acc": 0.96, "i2t_R@1": 0.97, "zero_shot_multilabel_mAP": 0.68,
          "zero_shot_retrieval_AP@50": 0.60}
    assert sr.record_against_targets("toy-rn", rn) == (
        "meets 3 of its 4 targets, zero-shot shape accuracy, image-to-text R@1, zero-shot multi-label mAP "
        "and zero-shot retrieval AP@50")


def test_probe_target_is_read_for_the_global_and_the_pooled_probe_each_with_its_own_interval():
    task = sr.PROBE_GAIN[1]
    rows = [{"reader": "linear probe", "model": "toy-rn", task: 0.79},
            {"reader": "pooled linear probe", "model": "toy-rn", task: 0.89},
            {"reader": "zero-shot", "model": "toy-rn", task: 0.76}]
    gains = {("linear probe", "toy-rn"): (0.01, 0.05), ("pooled linear probe", "toy-rn"): (0.11, 0.15)}
    glob, pooled = sr.target_rows({}, rows, None, gains)
    assert glob["what"].startswith("linear probe minus zero-shot") and glob["value"] == pytest.approx(0.03)
    assert (glob["low"], glob["high"], glob["status"]) == (0.01, 0.05, "missed")
    assert pooled["what"].startswith("pooled linear probe minus zero-shot") and pooled["value"] == pytest.approx(0.13)
    assert (pooled["low"], pooled["high"], pooled["status"]) == (0.11, 0.15, "met")
    straddles = sr.target_rows({}, rows, None, {**gains, ("pooled linear probe", "toy-rn"): (0.08, 0.15)})[1]
    assert straddles["status"] == "too close to call"
    alone = sr.target_rows({}, rows[:1] + rows[2:], None, None)  # no pooled probe in the ceiling: one row
    assert len(alone) == 1 and alone[0]["status"] == "missed (no interval)"


def test_map_gain_interval_is_paired_over_scenes_and_brackets_the_gain():
    from fgclip.metrics.multilabel import mean_average_precision

    gen = torch.Generator().manual_seed(0)
    labels = torch.rand(300, 5, generator=gen) < 0.3
    noisy = labels.float() + torch.randn(300, 5, generator=gen)  # a fair reader
    better = labels.float() + 0.3 * torch.randn(300, 5, generator=gen)
    assert ev.map_gain_interval(noisy, noisy, labels) == (0.0, 0.0)  # the same reader: no gain in any resample
    gain = mean_average_precision(better, labels.long()) - mean_average_precision(noisy, labels.long())
    low, high = ev.map_gain_interval(better, noisy, labels, n_boot=400)
    assert 0.0 < low < gain < high
    low_w, high_w = ev.map_gain_interval(better, noisy, labels, n_boot=400, level=0.5)
    assert low <= low_w <= high_w <= high  # a narrower level, a narrower interval, from the same draws


def test_map_gain_interval_resamples_scenes_and_leaves_out_categories_without_a_positive():
    from fgclip.metrics.object_retrieval import average_precision_at_k

    gen = torch.Generator().manual_seed(1)
    labels = torch.rand(40, 4, generator=gen) < 0.4
    labels[:, 0] = False
    labels[3, 0] = True  # a rare category: absent from about a third of the resamples
    a, b = torch.randn(40, 4, generator=gen), torch.randn(40, 4, generator=gen)
    for seed in range(6):  # one resample each: its value is the draw itself
        rows = torch.randint(40, (1, 40), generator=torch.Generator().manual_seed(seed))[0]
        kept = labels[rows].any(0)
        mean_ap = lambda x: float(average_precision_at_k(x[rows][:, kept].T, labels[rows][:, kept].T).mean())
        want = mean_ap(a) - mean_ap(b)  # a duplicated scene ties with itself: the metric's own tie rule
        low, high = ev.map_gain_interval(a, b, labels, n_boot=1, seed=seed)
        assert low == pytest.approx(want, abs=1e-5) and high == pytest.approx(want, abs=1e-5)
    with pytest.raises(ValueError, match="must all be one"):
        ev.map_gain_interval(a, b, torch.cat([labels, labels]))
    with pytest.raises(ValueError, match="finite"):
        ev.map_gain_interval(a.masked_fill(labels, float("nan")), b, labels)
    with pytest.raises(ValueError, match="no positive"):
        ev.map_gain_interval(a, b, torch.zeros_like(labels))
