import math

import pytest
import torch

from fgclip.losses.ranking import npair_loss, triplet_loss

# rows: images, columns: captions, positives on the diagonal
S = torch.tensor([[0.9, 0.5, 0.1],
                  [0.6, 0.4, 0.3],
                  [0.2, 0.8, 0.7]])


def _npair_by_hand(s, tau):
    b = len(s)
    total = 0.0
    for i in range(b):
        row = sum(math.exp((s[i][j] - s[i][i]) / tau) for j in range(b) if j != i)
        col = sum(math.exp((s[j][i] - s[i][i]) / tau) for j in range(b) if j != i)
        total += math.log1p(row) + math.log1p(col)
    return total / (2 * b)


@pytest.mark.parametrize("tau", [1.0, 0.1])
def test_npair_matches_the_hand_written_sum(tau):
    assert npair_loss(S, tau).item() == pytest.approx(_npair_by_hand(S.tolist(), tau), rel=1e-5)


def test_npair_numbers_for_tau_one():
    # image 0: log(1 + e^-0.4 + e^-0.8) = 0.75125; caption 0: log(1 + e^-0.3 + e^-0.7) = 0.80532
    # image 1: log(1 + e^0.2 + e^-0.1) = 1.13983; caption 1: log(1 + e^0.1 + e^0.4) = 1.28010
    # image 2: log(1 + e^-0.5 + e^0.1) = 0.99758; caption 2: log(1 + e^-0.6 + e^-0.4) = 0.79712
    expected = (0.75125 + 0.80532 + 1.13983 + 1.28010 + 0.99758 + 0.79712) / 6
    assert npair_loss(S).item() == pytest.approx(expected, abs=1e-4)


def test_triplet_hardest_hand_computed():
    # margin 0.2; image anchors (rows): i0: max(0.2-0.9+0.5, 0.2-0.9+0.1)+ = 0
    # i1: max(0.2-0.4+0.6, 0.2-0.4+0.3) = 0.4;  i2: max(0.2-0.7+0.2, 0.2-0.7+0.8) = 0.3
    # caption anchors (columns): c0: max(0.2-0.9+0.6, 0.2-0.9+0.2)+ = 0
    # c1: max(0.2-0.4+0.5, 0.2-0.4+0.8) = 0.6;  c2: max(0.2-0.7+0.1, 0.2-0.7+0.3)+ = 0
    expected = 0.5 * ((0 + 0.4 + 0.3) / 3 + (0 + 0.6 + 0) / 3)
    assert triplet_loss(S, 0.2, "hardest").item() == pytest.approx(expected, abs=1e-6)


def test_triplet_all_hand_computed():
    # rows: i0: 0 + 0; i1: 0.4 + 0.1; i2: 0 + 0.3 ; columns: c0: 0 + 0; c1: 0.3 + 0.6; c2: 0 + 0
    expected = 0.5 * ((0.5 + 0.3) / 3 + 0.9 / 3)
    assert triplet_loss(S, 0.2, "all").item() == pytest.approx(expected, abs=1e-6)


def test_triplet_semi_hard_hand_computed():
    # image anchors: i0 (pos 0.9): negatives below it 0.5, 0.1 -> hardest of them 0.5:
    #   [0.2 - 0.9 + 0.5]+ = 0;  i1 (pos 0.4): negatives 0.6, 0.3 -> 0.3 is below: 0.1
    #   i2 (pos 0.7): negatives 0.2, 0.8 -> 0.2: [0.2 - 0.7 + 0.2]+ = 0
    # caption anchors: c0 (pos 0.9): 0.6, 0.2 -> 0.6: 0;  c1 (pos 0.4): 0.5, 0.8 -> none below,
    #   take the least similar 0.5: 0.3;  c2 (pos 0.7): 0.1, 0.3 -> 0.3: 0
    expected = 0.5 * ((0 + 0.1 + 0) / 3 + (0 + 0.3 + 0) / 3)
    assert triplet_loss(S, 0.2, "semi-hard").item() == pytest.approx(expected, abs=1e-6)


def test_losses_vanish_or_shrink_when_positives_dominate():
    good = torch.eye(4) * 10.0
    assert triplet_loss(good, 0.2, "hardest").item() == 0.0
    assert npair_loss(good).item() < 1e-3
    assert npair_loss(good).item() < npair_loss(torch.zeros(4, 4)).item()
    assert npair_loss(torch.zeros(4, 4)).item() == pytest.approx(math.log(4))


def test_gradients_flow_and_bad_input_is_rejected():
    s = S.clone().requires_grad_(True)
    (npair_loss(s) + triplet_loss(s, 0.2, "semi-hard")).backward()
    assert s.grad is not None and s.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="square"):
        npair_loss(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="mining"):
        triplet_loss(S, 0.2, "soft")
    with pytest.raises(ValueError, match="temperature"):
        npair_loss(S, 0.0)
