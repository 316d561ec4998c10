"""Attention capture: same outputs as the plain model, maps in the graph, model restored."""
import pytest
import torch
from torch import nn

from fgclip.models import create_clip
from fgclip.models.attention import capture_attention

CAPTIONS = ["a small red circle to the left of a blue star", "two shapes on a gray background",
            "a large green teddy-bear, next to a ring."]


@pytest.fixture(scope="module")
def toy_vit():
    return create_clip("toy-vit", pretrained="toy")


@pytest.fixture(scope="module")
def toy_rn():
    torch.manual_seed(0)
    return create_clip("toy-rn", pretrained=None)  # equivalence does not need trained weights


@pytest.mark.parametrize("name", ["toy_vit", "toy_rn"])
def test_text_outputs_equal_and_maps_are_probabilities(name, request):
    clip = request.getfixturevalue(name)
    tokens = clip.tokenizer(CAPTIONS)
    with torch.no_grad():
        ref = clip.model.encode_text(tokens)
    with capture_attention(clip.model) as cap:
        out = clip.model.encode_text(tokens)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    n_layers, heads = len(clip.model.transformer.resblocks), clip.model.transformer.resblocks[0].attn.num_heads
    assert len(cap.maps) == n_layers
    for a in cap.maps:
        assert a.shape == (3, heads, 32, 32)
        torch.testing.assert_close(a.sum(-1), torch.ones(3, heads, 32), atol=1e-5, rtol=0)
        assert a.triu(diagonal=1).abs().max() == 0  # the causal mask holds
    assert all(isinstance(b.attn, nn.MultiheadAttention) for b in clip.model.transformer.resblocks)


def test_vision_tower_of_toy_vit(toy_vit):
    images = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = toy_vit.model.encode_image(images)
        with capture_attention(toy_vit.model.visual) as cap:
            out = toy_vit.model.encode_image(images)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    assert len(cap.maps) == 6 and cap.maps[0].shape == (2, 3, 65, 65)  # 1 + 8x8 tokens


def test_gradients_reach_only_the_pooled_row_of_the_last_layer(toy_vit):
    tokens = toy_vit.tokenizer(CAPTIONS[:2])
    eos = tokens.argmax(-1)
    with capture_attention(toy_vit.model) as cap:
        score = toy_vit.model.encode_text(tokens)[:, 0]
        grads = cap.gradients(score)
    last = grads[-1]  # (B, H, L, L): only the pooled (EOT) query affects the output
    for b in range(2):
        rows = last[b].abs().sum(dim=(0, 2))
        assert rows[eos[b]] > 0
        assert rows.sum() == rows[eos[b]]
    assert all(g.abs().sum() > 0 for g in grads)


def test_pair_gradients_do_not_mix_within_a_batch(toy_vit):
    tokens = toy_vit.tokenizer(CAPTIONS)
    with capture_attention(toy_vit.model) as cap:
        g_batch = cap.gradients(toy_vit.model.encode_text(tokens)[:, 3])
    with capture_attention(toy_vit.model) as cap:
        g_one = cap.gradients(toy_vit.model.encode_text(tokens[1:2])[:, 3])
    for gb, go in zip(g_batch, g_one):
        torch.testing.assert_close(gb[1:2], go, atol=1e-6, rtol=1e-4)


def test_restored_after_an_exception_and_no_nesting(toy_vit):
    originals = [b.attn for b in toy_vit.model.transformer.resblocks]
    with pytest.raises(RuntimeError, match="boom"):
        with capture_attention(toy_vit.model):
            raise RuntimeError("boom")
    assert [b.attn for b in toy_vit.model.transformer.resblocks] == originals
    with capture_attention(toy_vit.model):
        with pytest.raises(RuntimeError, match="already"):
            with capture_attention(toy_vit.model):
                pass
    assert [b.attn for b in toy_vit.model.transformer.resblocks] == originals


def test_resnet_vision_tower_is_refused(toy_rn):
    with pytest.raises(TypeError, match="resblocks"):
        with capture_attention(toy_rn.model.visual):
            pass


def test_capturing_some_layers_keeps_the_others_fused_and_the_same_maps(toy_vit):
    from fgclip.models.attention import _CapturingAttention

    tokens = toy_vit.tokenizer(CAPTIONS[:2])
    blocks = toy_vit.model.transformer.resblocks
    with capture_attention(toy_vit.model) as every:
        out_all = toy_vit.model.encode_text(tokens)
        g_all = every.gradients(out_all[:, 0])
    last_two = [len(blocks) - 2, len(blocks) - 1]
    with capture_attention(toy_vit.model, last_two) as some:
        wrapped = [isinstance(b.attn, _CapturingAttention) for b in blocks]
        out_some = toy_vit.model.encode_text(tokens)
        g_some = some.gradients(out_some[:, 0])
    assert wrapped == [False] * (len(blocks) - 2) + [True, True]
    assert len(some.maps) == 2 and not any(isinstance(b.attn, _CapturingAttention) for b in blocks)
    torch.testing.assert_close(out_some, out_all, atol=1e-5, rtol=1e-5)
    for k, layer in enumerate(last_two):
        torch.testing.assert_close(some.maps[k], every.maps[layer], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(g_some[k], g_all[layer], atol=1e-6, rtol=1e-4)
    with pytest.raises(ValueError, match="out of range"):
        with capture_attention(toy_vit.model, [len(blocks)]):
            pass
