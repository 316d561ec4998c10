"""Macro mAP with unknown labels ignored, checked against scikit-learn."""
import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from fgclip.metrics.multilabel import mean_average_precision, per_class_ap


def test_hand_example():
    # one category, ranking: pos (0.9), neg (0.8), pos (0.7): AP = (1/1 + 2/3) / 2
    # second category: its only positive ranked last of three, AP = 1/3
    scores = np.array([[0.9, 0.9], [0.8, 0.5], [0.7, 0.1]])
    targets = np.array([[1, 0], [0, 0], [1, 1]])
    assert per_class_ap(scores, targets) == pytest.approx([(1 + 2 / 3) / 2, 1 / 3])
    assert mean_average_precision(scores, targets) == pytest.approx(((1 + 2 / 3) / 2 + 1 / 3) / 2)
    # the negative unknown: both positives first, AP = 1
    targets[1, 0] = -1
    assert per_class_ap(scores, targets)[0] == pytest.approx(1.0)


def test_matches_sklearn_with_unknowns():
    rng = np.random.default_rng(0)
    scores = rng.random((60, 5))
    y = (rng.random((60, 5)) < 0.3).astype(int)
    y[0] = 1
    targets = y.copy()
    targets[rng.random((60, 5)) < 0.3] = -1
    targets[0] = 1
    ref = [average_precision_score(y[targets[:, c] != -1, c], scores[targets[:, c] != -1, c])
           for c in range(5)]
    assert per_class_ap(scores, targets) == pytest.approx(ref, rel=1e-5)
    assert mean_average_precision(scores, targets) == pytest.approx(np.mean(ref), rel=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="no positive"):
        mean_average_precision(np.array([[0.1, 0.2], [0.3, 0.4]]), np.array([[1, 0], [0, 0]]))
    with pytest.raises(ValueError, match=r"\(N, C\)"):
        mean_average_precision(np.zeros((3, 2)), np.zeros((3, 3)))
