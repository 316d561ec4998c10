"""P-ASL against hand-computed values, including the partial (unknown-label) mask."""
import math

import numpy as np
import pytest
import torch

from fgclip.losses.asymmetric import (asymmetric_loss_terms, partial_asymmetric_loss,
                                      partial_bce)
from fgclip.partial_labels import known_masks, load_masks, partial_targets, save_masks


def test_asl_terms_by_hand():
    p = torch.tensor([[0.8, 0.3, 0.02, 0.6]])
    y = torch.tensor([[1, 0, 0, -1]])
    t = asymmetric_loss_terms(p, y, gamma_pos=1.0, gamma_neg=2.0, clip=0.05)
    expected = [
        -(1 - 0.8) ** 1 * math.log(0.8),  # positive: -(1-p)^γ+ log p
        -(0.25 ** 2) * math.log(1 - 0.25),  # negative, p_m = 0.3 - 0.05
        0.0,  # negative below the margin: p_m = max(0.02 - 0.05, 0) = 0
        0.0,  # unknown
    ]
    assert t[0].tolist() == pytest.approx(expected, rel=1e-5)


def test_partial_mean_ignores_unknowns_and_their_gradient():
    p = torch.tensor([[0.8, 0.3, 0.6], [0.1, 0.9, 0.5]], requires_grad=True)
    y = torch.tensor([[1, 0, -1], [-1, 1, 0]])
    loss = partial_asymmetric_loss(p, y, 0.0, 0.0, 0.0)  # = partial BCE
    known = [-math.log(0.8), -math.log(0.7), -math.log(0.9), -math.log(0.5)]
    assert loss.item() == pytest.approx(sum(known) / 4, rel=1e-6)
    assert partial_bce(p, y).item() == pytest.approx(loss.item())
    loss.backward()
    assert p.grad[0, 2] == 0 and p.grad[1, 0] == 0
    assert (p.grad[y != -1] != 0).all()


def test_bce_matches_torch_on_known_entries():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(6, 5, generator=g) * 0.9 + 0.05
    y = torch.randint(0, 2, (6, 5), generator=g)
    y[0, 0] = y[3, 2] = -1
    known = y != -1
    ref = torch.nn.functional.binary_cross_entropy(p[known], y[known].float())
    assert partial_bce(p, y).item() == pytest.approx(ref.item(), rel=1e-5)


def test_sum_reduction_and_bad_input():
    p = torch.tensor([[0.5, 0.5]])
    y = torch.tensor([[1, 0]])
    total = partial_asymmetric_loss(p, y, 1.0, 2.0, 0.0, reduction="sum").item()
    assert total == pytest.approx(0.5 * math.log(2) + 0.25 * math.log(2), rel=1e-6)
    with pytest.raises(ValueError, match="targets"):
        partial_asymmetric_loss(p, torch.tensor([[2, 0]]))
    with pytest.raises(ValueError, match="shape"):
        partial_asymmetric_loss(p, torch.tensor([[1]]))
    with pytest.raises(ValueError, match="clip"):
        partial_asymmetric_loss(p, y, clip=1.5)


def test_masks_nested_seeded_and_saved(tmp_path):
    m = known_masks((200, 10), [0.1, 0.5, 0.9], seed=3)
    assert (m[0.1] <= m[0.5]).all() and (m[0.5] <= m[0.9]).all()
    assert abs(m[0.5].mean() - 0.5) < 0.05
    again = known_masks((200, 10), [0.1, 0.5, 0.9], seed=3)
    assert all((again[r] == m[r]).all() for r in m)
    assert not (known_masks((200, 10), [0.5], seed=4)[0.5] == m[0.5]).all()
    labels = np.array([[1, 0], [0, 1]])
    known = np.array([[True, False], [True, True]])
    assert partial_targets(labels, known).tolist() == [[1, -1], [0, 1]]
    loaded, seed = load_masks(save_masks(tmp_path / "m.npz", m, 3))
    assert seed == 3 and all((loaded[r] == m[r]).all() for r in m)
    with pytest.raises(ValueError, match="proportions"):
        known_masks((2, 2), [0.0], 0)
