import pytest
import torch
from torchmetrics.retrieval import RetrievalHitRate

from fgclip.metrics import accuracy, recall_at_k


def test_recall_at_k_hand_computed():
    sim = torch.tensor([[0.9, 0.1, 0.5],
                        [0.8, 0.7, 0.1],
                        [0.2, 0.3, 0.1]])
    relevant = torch.eye(3, dtype=torch.bool)
    # query 0: best is 0 (hit@1); query 1: order 0,1,2 -> hit@2; query 2: order 1,0,2 -> hit@3
    r = recall_at_k(sim, relevant, ks=(1, 2, 3))
    assert r == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3), 3: pytest.approx(1.0)}


def test_recall_with_duplicate_relevant_items():
    sim = torch.tensor([[0.1, 0.9, 0.5]])
    relevant = torch.tensor([[True, True, False]])  # item 1 duplicates item 0's caption
    assert recall_at_k(sim, relevant, ks=(1,))[1] == 1.0


def test_recall_matches_torchmetrics_hit_rate():
    g = torch.Generator().manual_seed(0)
    sim = torch.rand(20, 30, generator=g)
    relevant = torch.rand(20, 30, generator=g) > 0.85
    relevant[torch.arange(20), torch.arange(20)] = True
    ours = recall_at_k(sim, relevant, ks=(1, 5))
    indexes = torch.arange(20)[:, None].expand(20, 30)
    for k in (1, 5):
        ref = RetrievalHitRate(top_k=k)(sim.flatten(), relevant.flatten(), indexes=indexes.flatten())
        assert ours[k] == pytest.approx(ref.item(), abs=1e-6)


def test_recall_rejects_query_without_relevant_item_and_shape_mismatch():
    with pytest.raises(ValueError, match="no relevant"):
        recall_at_k(torch.rand(2, 2), torch.tensor([[True, False], [False, False]]))
    with pytest.raises(ValueError, match="same shape"):
        recall_at_k(torch.rand(2, 3), torch.ones(2, 2, dtype=torch.bool))


def test_accuracy():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, 1.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)
