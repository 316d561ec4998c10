"""Object retrieval metrics (checked against torchmetrics) and the FAISS / numpy index."""
import numpy as np
import pytest
import torch
from torchmetrics.retrieval import RetrievalMAP

from fgclip import index as index_module
from fgclip.index import EmbeddingIndex
from fgclip.metrics.object_retrieval import (average_precision_at_k, max_similarity,
                                             object_retrieval_map)


def test_max_similarity_takes_the_best_embedding():
    text = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    emb = torch.tensor([[[1.0, 0.0], [0.0, 0.5]], [[0.2, 0.0], [0.0, 0.9]]])  # 2 images x 2
    torch.testing.assert_close(max_similarity(text, emb), torch.tensor([[1.0, 0.2], [0.5, 0.9]]))


def test_average_precision_hand_computed():
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5]])
    relevant = torch.tensor([[True, False, True, False, True]])
    # hits at ranks 1, 3, 5: AP = (1/1 + 2/3 + 3/5) / 3; AP@2 = 1/1 (one hit in the top 2)
    assert average_precision_at_k(scores, relevant).item() == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert average_precision_at_k(scores, relevant, 2).item() == pytest.approx(1.0)
    assert average_precision_at_k(scores, ~relevant, 1).item() == 0.0


@pytest.mark.parametrize("k", [None, 3, 10])
def test_average_precision_matches_torchmetrics(k):
    g = torch.Generator().manual_seed(0)
    # positive, distinct scores: torchmetrics counts a relevant item with score <= 0 as a miss
    scores = torch.rand(7, 25, generator=g) + 0.01
    relevant = torch.rand(7, 25, generator=g) > 0.7
    relevant[:, 0] = True
    ours = average_precision_at_k(scores, relevant, k).mean()
    ref = RetrievalMAP(top_k=k)(scores.flatten(), relevant.flatten(),
                                indexes=torch.arange(7)[:, None].expand(7, 25).flatten())
    assert ours.item() == pytest.approx(ref.item(), abs=1e-6)


def test_object_retrieval_map_groups_and_reports_empty_categories():
    scores = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.4]])
    relevant = torch.tensor([[True, False], [True, False], [False, False]])
    out = object_retrieval_map(scores, relevant, ["a", "b", "c"],
                               {"base": ["a"], "novel": ["b", "c"]}, ks=(1, None))
    assert out["base"]["mAP@1"] == 1.0 and out["base"]["mAP"] == 1.0
    assert out["novel"]["mAP@1"] == 0.0 and out["novel"]["mAP"] == pytest.approx(0.5)
    assert out["novel"]["n_queries"] == 1 and out["novel"]["no_positive"] == 1
    with pytest.raises(ValueError, match="'zzz'"):
        object_retrieval_map(scores, relevant, ["a", "b", "c"], {"x": ["zzz"]})


def _data(n=60, e=3, d=16, q=5, seed=0):
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n, e, d)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=-1, keepdims=True)
    return emb, rng.standard_normal((q, d)).astype(np.float32)


@pytest.mark.parametrize("backend", ["numpy", "faiss"])
def test_index_returns_the_exact_top_images(backend):
    if backend == "faiss" and index_module.faiss is None:
        pytest.skip("faiss-cpu not installed")
    emb, queries = _data()
    scores, ids = EmbeddingIndex(emb, backend=backend).search(queries, k=7)
    brute = max_similarity(torch.from_numpy(queries), torch.from_numpy(emb)).numpy()  # (Q, n)
    expected = np.argsort(-brute, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(brute, expected, 1), rtol=1e-5, atol=1e-6)


def test_faiss_and_numpy_agree():
    if index_module.faiss is None:
        pytest.skip("faiss-cpu not installed")
    emb, queries = _data(n=200, e=5, seed=3)
    a = EmbeddingIndex(emb, backend="faiss").search(queries, 10)
    b = EmbeddingIndex(emb, backend="numpy").search(queries, 10)
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-6)


def test_index_errors_name_the_argument():
    emb, queries = _data(n=4)
    with pytest.raises(ValueError, match="backend"):
        EmbeddingIndex(emb, backend="annoy")
    with pytest.raises(ValueError, match="k must be"):
        EmbeddingIndex(emb, backend="numpy").search(queries, 5)
    with pytest.raises(ValueError, match="dim"):
        EmbeddingIndex(emb, backend="numpy").search(queries[:, :3], 2)
