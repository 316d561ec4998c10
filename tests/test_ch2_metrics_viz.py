"""Misalignment metrics against hand-computed values; the word widget redraws."""
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from fgclip.metrics.misalignment import (foil_ap, localization_accuracy, threshold_f1,
                                         threshold_localization, tune_threshold, word_auc,
                                         word_labels)
from fgclip.viz.words import caption_widget, draw_words


def test_localization_accuracy():
    assert localization_accuracy([1, 2, 3, 0], [1, 2, 0, 0]) == 0.75
    with pytest.raises(ValueError):
        localization_accuracy([1], [1, 2])


def test_foil_ap_by_hand():
    # ranking: orig, foil, orig, foil -> AP = (1/1 + 2/3) / 2
    assert foil_ap([0.9, 0.8, 0.7, 0.6], [True, False, True, False]) == pytest.approx(5 / 6)
    with pytest.raises(ValueError, match="both"):
        foil_ap([0.1, 0.2], [True, True])


def test_word_auc_by_hand():
    w = [np.array([-1.0, 0.5, 0.2]), np.array([0.1, 0.3])]
    y = [word_labels(3, 0), word_labels(2, None)]
    assert word_auc(w, y) == 1.0
    # the foil word 0.15 beats 0.2 and 0.3 but not 0.1: AUC = 3/4 over the 4 aligned words
    w2 = [np.array([0.15, 0.5, 0.2]), np.array([0.1, 0.3])]
    assert word_auc(w2, y) == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="outside"):
        word_labels(2, 5)


def test_threshold_metrics_by_hand():
    w = [np.array([-1.0, 0.5, -0.2]), np.array([0.1, -0.3])]
    y = [word_labels(3, 0), word_labels(2, 1)]
    # eps 0: flags -1.0, -0.2, -0.3 -> TP 2, FP 1, FN 0 -> F1 = 0.8
    assert threshold_f1(w, y, 0.0) == pytest.approx(0.8)
    assert threshold_f1(w, y, -0.25) == pytest.approx(1.0)
    assert threshold_localization(w, [0, 1], -0.25) == 1.0
    assert threshold_localization(w, [0, 1], -0.5) == 0.5
    eps = tune_threshold(w, y)
    assert threshold_f1(w, y, eps) == 1.0


def test_draw_words_and_widget_redraws():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    flagged = draw_words(ax, ["a", "red", "star"], np.array([0.1, -0.2, 0.05]), eps=-0.1)
    np.testing.assert_array_equal(flagged, [False, True, False])
    plt.close(fig)
    calls = []

    def attribute(caption):
        calls.append(caption)
        words = caption.split()
        return words, np.linspace(-1, 1, len(words))

    image = np.zeros((8, 8, 3), dtype=np.uint8)
    w = caption_widget(image, "a red star", attribute, eps=-0.5, eps_range=(-1.0, 1.0))
    first = w.redraw()
    w.controls["eps"].value = 0.5
    assert w.figure is not first and w.n_draws == 2
    assert "red" in w.figure.axes[1].get_title(loc="left")
    assert calls == ["a red star"]  # cached: moving the slider does not recompute
    w.controls["caption"].value = "two blue rings"
    assert calls[-1] == "two blue rings" and "blue" in w.figure.axes[1].get_title(loc="left")
    plt.close("all")


def test_evaluate_attributions_by_hand():
    from fgclip.metrics.misalignment import evaluate_attributions
    w = [np.array([-1.0, 0.5, 0.2]), np.array([0.1, -0.3]), np.array([0.4, 0.3])]
    out = evaluate_attributions(w, [0, 0, None], pair_scores=[0.2, 0.1, 0.9])
    assert out["LA"] == 0.5  # caption 1's most negative word is 1, not its foil 0
    # foil words -1.0 and 0.1 against aligned 0.5, 0.2, -0.3, 0.4, 0.3: 5 + 4 wins of 10
    assert out["word AUC"] == pytest.approx(9 / 10)
    assert out["AP"] == 1.0


def test_score_binned_thresholds_by_hand():
    from fgclip.metrics.misalignment import binned_threshold_f1, binned_thresholds
    # low-score captions have large attributions, high-score captions tiny ones
    w = [np.array([-1.0, -0.5, 0.2]), np.array([-0.01, -0.005, 0.002])]
    y = [word_labels(3, 0), word_labels(3, 0)]
    eps = binned_thresholds(w, y, scores=[0.1, 0.9], edges=[0.5])
    assert eps[0] > -1.0 and eps[0] <= -0.5 and eps[1] > -0.01 and eps[1] <= -0.005
    assert binned_threshold_f1(w, y, [0.1, 0.9], [0.5], eps) == 1.0
    # one global ε cannot do both: it either misses the small foil or flags -0.5
    assert max(threshold_f1(w, y, e) for e in (-0.75, -0.0075, -0.003)) < 1.0
    with pytest.raises(ValueError, match="empty"):
        binned_thresholds(w, y, scores=[0.1, 0.2], edges=[0.5])


def test_threshold_transfer_tunes_on_one_type_and_scores_every_type():
    from fgclip.metrics.misalignment import threshold_f1, threshold_transfer, tune_threshold
    # type "a": the foil sits at -1 (clean words at +1); type "b": foil at -5, clean words at -3
    w = [np.array([1.0, -1.0, 1.0]), np.array([-3.0, -5.0]), np.array([1.0, 1.0])]
    y = [np.array([0, 1, 0]), np.array([0, 1]), np.array([0, 0])]
    types = ["a", "b", "original"]
    table, eps = threshold_transfer((w, y, types), (w, y, types))
    assert set(table) == set(eps) == {"a", "b"}
    assert eps["a"] == tune_threshold([w[0]], [y[0]])
    assert table["a"]["a"] == 1.0 and table["b"]["b"] == 1.0
    # ε tuned on "a" (just above -1) flags both words of "b": F1 2/3, not 1
    assert table["a"]["b"] == threshold_f1([w[1]], [y[1]], eps["a"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="absent"):
        threshold_transfer((w, y, types), (w[:1], y[:1], ["a"]))
