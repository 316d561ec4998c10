"""The retrieval metrics against torchmetrics where the definitions are the same, and the
case where they part, with the reason (issue 35, item 9).

Already checked elsewhere: AP@k with the "hits" normalisation against RetrievalMAP(top_k)
(tests/test_ch3_retrieval.py) and R@K against RetrievalHitRate (tests/test_metrics.py).
"""
import pytest
import torch
from torchmetrics.retrieval import RetrievalMAP, RetrievalRecall

from fgclip.metrics import recall_at_k
from fgclip.metrics.object_retrieval import average_precision_at_k


def _indexes(q: int, n: int) -> torch.Tensor:
    return torch.arange(q)[:, None].expand(q, n).flatten()


def test_min_k_r_ap_is_torchmetrics_map_when_the_top_k_holds_min_k_r_hits():
    """AP@k divided by min(k, R) has no torchmetrics twin: RetrievalMAP(top_k=k) divides by the
    hits in the top k. The two are equal exactly when the top k holds min(k, R) relevant items
    (every relevant item, or k of them); elsewhere torchmetrics' value is the larger, or both are 0."""
    g = torch.Generator().manual_seed(1)
    q, n, k = 40, 30, 5
    scores = torch.rand(q, n, generator=g) + 0.01  # positive: torchmetrics reads a score <= 0 as a miss
    density = torch.linspace(0.05, 0.98, q)[:, None]  # from one relevant image in 20 to nearly all
    relevant = torch.rand(q, n, generator=g) < density
    relevant[:, 0] = True
    ours = average_precision_at_k(scores, relevant, k, normalise="min_k_r")
    top = scores.topk(k, dim=1).indices
    full = relevant.gather(1, top).sum(1) == relevant.sum(1).clamp(max=k)  # top k holds min(k, R) hits
    assert full.any() and (~full).any()
    ref = torch.stack([RetrievalMAP(top_k=k)(scores[i], relevant[i], indexes=torch.zeros(n, dtype=torch.long))
                       for i in range(q)])
    torch.testing.assert_close(ours[full], ref[full], atol=1e-6, rtol=0)
    some = relevant.gather(1, top).any(1)  # with no hit in the top k both are 0
    assert (ours[~full & some] < ref[~full & some]).all() and (ours[~some] == 0).all() and (ref[~some] == 0).all()


def test_recall_at_k_is_torchmetrics_recall_with_one_relevant_item_per_query():
    """R@K here is "some relevant item is in the top K" (torchmetrics' RetrievalHitRate);
    RetrievalRecall is the share of a query's relevant items in the top K. With one relevant
    item per query (image -> its caption after duplicates are merged) they are the same number;
    with several they part, and the book's R@K is the hit rate the CLIP papers report."""
    g = torch.Generator().manual_seed(2)
    q, n = 25, 25
    sim = torch.rand(q, n, generator=g)
    relevant = torch.eye(q, n, dtype=torch.bool)
    ours = recall_at_k(sim, relevant, ks=(1, 5, 10))
    for k, value in ours.items():
        ref = RetrievalRecall(top_k=k)(sim.flatten(), relevant.flatten(), indexes=_indexes(q, n))
        assert value == pytest.approx(ref.item(), abs=1e-6)
    two = relevant.clone()
    two[:, -1] = True  # a second relevant item for every query: a hit needs one, recall counts both
    hit = recall_at_k(sim, two, ks=(5,))[5]
    share = RetrievalRecall(top_k=5)(sim.flatten(), two.flatten(), indexes=_indexes(q, n)).item()
    assert hit > share
