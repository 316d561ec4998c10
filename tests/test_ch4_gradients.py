"""Chapter 4's gradient reading on a hand-sized batch: signed shares per entry type, the known
negatives under the margin, the coupling part of their gradient; and the sigmoid controls'
calibrated start from the known labels' prevalence."""
import math

import numpy as np
import pytest
import torch

from fgclip.methods.decoupling import MultiLabelCLIPHead
from fgclip.studies.decoupling.controls import score_gradients
from fgclip.studies.decoupling.heads import known_prevalence

# Two images, three categories, every score 0 (so every softmax p = 1/3). Image 0: a known
# positive, a known negative, an unknown; image 1: a known negative and two unknowns.
S, Y = torch.zeros(2, 3), torch.tensor([[1, 0, -1], [0, -1, -1]])


def test_signed_gradients_by_hand_under_the_softmax():
    """Plain partial BCE (γ± = m = 0), |K| = 3. By hand, dL/ds (rows = images):
    image 0: d(-log p0) = (-2/3, 1/3, 1/3), d(-log(1 - p1)) = (-1/6, 1/3, -1/6);
    image 1: d(-log(1 - p0)) = (1/3, -1/6, -1/6); each divided by 3."""
    g = score_gradients(S, Y, "softmax", 0.0, 0.0, 0.0)
    assert g["known positive"] == pytest.approx(5 / 18) and g["known positive up"] == 1.0
    assert g["known negative"] == pytest.approx((2 / 9 + 1 / 9) / 2)  # both pushed down
    assert (g["known negative up"], g["known negative down"]) == (0.0, 1.0)
    # the unknown of image 0 goes down (its positive's term), those of image 1 go UP (its negative's)
    assert g["unknown"] == pytest.approx(1 / 18)
    assert g["unknown up"] == pytest.approx(2 / 3) and g["unknown down"] == pytest.approx(1 / 3)
    assert g["negatives under m"] == 0.0
    # negatives' own terms deleted: only the positive's term is left, (-2/3, 1/3, 1/3)/3 on image 0
    assert g["negatives, own terms deleted"] == pytest.approx((1 / 9 + 0) / 2)
    assert g["coupling share"] == pytest.approx(1 / 3)


def test_negatives_under_the_margin_have_only_coupling():
    g = score_gradients(S, Y, "softmax", 0.0, 0.0, 0.5)  # m = 0.5 > p = 1/3: own terms are zero
    assert g["negatives under m"] == 1.0 and g["m"] == 0.5
    assert g["coupling share"] == pytest.approx(1.0)
    # only image 0's positive pushes now: its unknown goes down, image 1's get nothing
    assert g["unknown up"] == 0.0 and g["unknown down"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("scoring", ["sigmoid", "sigmoid+bias", "sigmoid+affine"])
def test_under_a_sigmoid_nothing_couples(scoring):
    g = score_gradients(S, Y, scoring, 0.0, 0.0, 0.0)
    assert g["unknown"] == 0.0 and g["unknown up"] == 0.0 and g["unknown down"] == 0.0
    assert g["negatives, own terms deleted"] == 0.0 and g["coupling share"] == 0.0
    assert g["known negative down"] == 1.0


def test_known_prevalence_counts_known_entries_only():
    assert known_prevalence(np.array([[1, 0, -1], [0, -1, -1], [0, 0, 1]])) == pytest.approx(2 / 6)
    with pytest.raises(ValueError, match="both a positive and a negative"):
        known_prevalence(np.array([[0, -1], [0, 0]]))


def test_calibrate_starts_at_the_prevalence():
    g = torch.Generator().manual_seed(0)
    text, x = torch.randn(4, 8, generator=g), torch.randn(50, 8, generator=g)
    dense = torch.zeros(50, 1, 1, 1)
    for scoring in ("sigmoid+bias", "sigmoid+affine"):
        head = MultiLabelCLIPHead(None, text, None, None, 0.1, scoring)
        head.calibrate(dense, x, 0.06)
        s = head(dense, x).scores
        assert s.mean().item() == pytest.approx(math.log(0.06 / 0.94), abs=1e-4)  # the average entry at p = π
        with pytest.raises(ValueError, match="prevalence"):
            head.calibrate(dense, x, 1.0)
