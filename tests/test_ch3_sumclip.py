"""SUM-CLIP head and Cluster-CLIP: exact reproduction of CLIP's pooling, shapes, errors."""
import numpy as np
import pytest
import torch
from open_clip.modified_resnet import AttentionPool2d

from fgclip.methods.cluster_clip import cluster_clip_embeddings, cluster_image
from fgclip.methods.sumclip import SumClipHead, frozen_attention_pool, pool_memory
from fgclip.models import create_clip, encode_image_dense


def _pool(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return AttentionPool2d(spacial_dim=3, embed_dim=32, num_heads=4, output_dim=16).to(dtype).eval()


def test_mean_token_reproduces_clip_pooling_exactly_in_double():
    pool = _pool(dtype=torch.float64)
    fmap = torch.randn(5, 32, 3, 3, dtype=torch.float64)
    mean = fmap.flatten(2).mean(-1)[:, None]  # (B, 1, C): CLIP's mean token
    ours, attn = frozen_attention_pool(pool, fmap, mean)
    torch.testing.assert_close(ours[:, 0], pool(fmap), rtol=0, atol=1e-12)
    torch.testing.assert_close(attn.sum(-1), torch.ones(5, 1, dtype=torch.float64))


def test_mean_token_reproduces_toy_rn_image_embedding():
    torch.manual_seed(0)
    clip = create_clip("toy-rn", pretrained=None)
    images = torch.randn(3, 3, 128, 128)
    with torch.no_grad():
        feats = encode_image_dense(clip.model, images)
        mean = feats.feature_map.flatten(2).mean(-1)[:, None]
        ours, _ = frozen_attention_pool(clip.model.visual.attnpool, feats.feature_map, mean)
        torch.testing.assert_close(ours[:, 0], clip.model.encode_image(images))


def test_other_tokens_change_the_embedding():
    pool = _pool()
    fmap = torch.randn(2, 32, 3, 3)
    tokens = torch.randn(2, 4, 32)
    emb, _ = frozen_attention_pool(pool, fmap, tokens)
    assert emb.shape == (2, 4, 16)
    assert not torch.allclose(emb[:, 0], pool(fmap), atol=1e-3)


def test_head_fast_path_equals_plain_pooling_of_its_tokens():
    pool = _pool()
    head = SumClipHead(pool, n_queries=6, n_layers=2, d_model=16, n_heads=2)
    torch.nn.init.normal_(head.up.weight, std=0.5)  # away from the zero init
    fmap = torch.randn(4, 32, 3, 3)
    mem = pool_memory(pool, fmap)
    emb, attn = head(mem)
    ref, ref_attn = frozen_attention_pool(pool, fmap, head.tokens(mem))
    torch.testing.assert_close(emb, torch.nn.functional.normalize(ref, dim=-1), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(attn, ref_attn, rtol=1e-4, atol=1e-5)
    assert emb.shape == (4, 6, 16) and attn.shape == (4, 6, 10)


def test_head_starts_at_clip_global_and_only_head_trains():
    pool = _pool()
    head = SumClipHead(pool, n_queries=3, d_model=16, n_heads=2)
    fmap = torch.randn(2, 32, 3, 3)
    emb, _ = head(pool_memory(pool, fmap))
    glob = torch.nn.functional.normalize(pool(fmap), dim=-1)
    torch.testing.assert_close(emb, glob[:, None].expand(-1, 3, -1), rtol=1e-4, atol=1e-5)
    emb.sum().backward()
    assert all(p.grad is None for p in pool.parameters())
    assert head.up.weight.grad is not None and head.up.weight.grad.abs().sum() > 0


def test_head_rejects_bad_arguments():
    with pytest.raises(TypeError, match="AttentionPool2d"):
        SumClipHead(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="n_queries"):
        SumClipHead(_pool(), n_queries=0)
    with pytest.raises(ValueError, match="positions"):
        pool_memory(_pool(), torch.randn(1, 32, 4, 4))


def test_cluster_image_separates_two_groups():
    a, b = np.eye(4)[0], np.eye(4)[1]
    dense = np.stack([a, a * 2, a + 0.01, b, b * 3, b + 0.02])
    centers = cluster_image(dense, k=2, seed=0)
    got = sorted(np.round(centers, 2).tolist())
    assert np.allclose(np.linalg.norm(centers, axis=1), 1)
    assert got[0][1] == pytest.approx(1.0, abs=0.01) and got[1][0] == pytest.approx(1.0, abs=0.01)


def test_cluster_clip_shapes_global_first_and_k_checked():
    dense = torch.randn(2, 8, 3, 3)
    pooled = torch.randn(2, 8)
    emb = cluster_clip_embeddings(dense, pooled, k=3, seed=1)
    assert emb.shape == (2, 4, 8)
    torch.testing.assert_close(emb[:, 0], torch.nn.functional.normalize(pooled, dim=-1))
    torch.testing.assert_close(emb.norm(dim=-1), torch.ones(2, 4))
    assert torch.equal(emb, cluster_clip_embeddings(dense, pooled, k=3, seed=1))  # seeded
    with pytest.raises(ValueError, match="k must be"):
        cluster_clip_embeddings(dense, pooled, k=10)
