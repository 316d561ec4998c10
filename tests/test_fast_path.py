"""The fast training path computes what the reference computes: explicit attention against
``nn.MultiheadAttention``, the switch on whole open_clip models, compiled steps, the allocator."""
from __future__ import annotations

import platform

import pytest
import torch
from open_clip.loss import ClipLoss
from torch import nn

from fgclip.models import create_clip
from fgclip.models.attention import capture_attention, explicit_attention, set_explicit_attention
from fgclip.train.fast import contrastive_step, keep_freed_memory, make_optimizer, prepare_model


def _mha(batch_first: bool) -> nn.MultiheadAttention:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(32, 4, batch_first=batch_first)
    nn.init.normal_(mha.in_proj_bias, std=0.1)  # torch initialises it to zero
    return mha


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask", [None, "float", "bool"])
def test_explicit_attention_matches_multihead_attention(batch_first, mask):
    mha = _mha(batch_first)
    x = torch.randn(3, 7, 32) if batch_first else torch.randn(7, 3, 32)
    causal = torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)
    attn_mask = {None: None, "bool": causal,
                 "float": torch.zeros(7, 7).masked_fill(causal, float("-inf"))}[mask]
    x_ref = x.clone().requires_grad_()
    x_new = x.clone().requires_grad_()
    ref = mha(x_ref, x_ref, x_ref, need_weights=False, attn_mask=attn_mask)[0]
    ref.square().sum().backward()
    ref_grads = [p.grad.clone() for p in mha.parameters()]
    mha.zero_grad()
    new = explicit_attention(mha, x_new, x_new, x_new, attn_mask)
    new.square().sum().backward()
    torch.testing.assert_close(new, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(x_new.grad, x_ref.grad, atol=1e-5, rtol=1e-5)
    for got, want in zip((p.grad for p in mha.parameters()), ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_explicit_cross_attention_projects_query_key_value_separately():
    mha = _mha(True)
    q, kv = torch.randn(2, 5, 32), torch.randn(2, 9, 32)
    ref = mha(q, kv, kv, need_weights=False)[0]
    torch.testing.assert_close(explicit_attention(mha, q, kv, kv), ref, atol=1e-5, rtol=1e-5)


def test_explicit_attention_reports_probabilities():
    mha = _mha(True)
    seen = []
    explicit_attention(mha, *(3 * [torch.randn(2, 6, 32)]), on_probs=seen.append)
    assert seen[0].shape == (2, 4, 6, 6)
    torch.testing.assert_close(seen[0].sum(-1), torch.ones(2, 4, 6))


@pytest.fixture(scope="module")
def toy_batch():
    torch.manual_seed(0)
    clip = create_clip("toy-vit", pretrained=None)
    images = torch.randn(6, 3, 64, 64)
    texts = clip.tokenizer(["a red circle", "two blue squares left of a star", "a green triangle",
                            "a big yellow star", "three circles", "a small purple square"])
    return clip, images, texts


def test_switching_a_whole_clip_keeps_outputs_and_checkpoint_keys(toy_batch):
    clip, images, texts = toy_batch
    model = clip.model.eval()
    keys = list(model.state_dict())
    with torch.no_grad():
        ref_img, ref_txt = model.encode_image(images), model.encode_text(texts)
        assert set_explicit_attention(model) == 6 + 4  # vision and text blocks
        new_img, new_txt = model.encode_image(images), model.encode_text(texts)
    try:
        torch.testing.assert_close(new_img, ref_img, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(new_txt, ref_txt, atol=1e-5, rtol=1e-4)
        assert list(model.state_dict()) == keys
        with capture_attention(model) as cap:  # capture still sees every text block
            model.encode_text(texts)
        assert len(cap.maps) == 4
    finally:
        assert set_explicit_attention(model, enabled=False) == 10
    assert not any("attention" in m.__dict__ for m in model.modules())


def test_prepare_model_rejects_an_unknown_attention(toy_batch):
    with pytest.raises(ValueError, match="attention"):
        prepare_model(toy_batch[0].model, attention="flash")


def _one_step(precision: str, attention: str, compile_model: bool, toy_batch) -> tuple[float, torch.Tensor]:
    _, images, texts = toy_batch
    torch.manual_seed(1)
    model = create_clip("toy-vit", pretrained=None).model.train()
    step_model = prepare_model(model, attention, compile_model)
    opt = make_optimizer(model, 1e-3, 0.1, torch.device("cpu"))
    loss = contrastive_step(step_model, ClipLoss(), opt, images, texts, torch.device("cpu"), precision)
    return loss.item(), model.visual.conv1.weight.grad.clone()  # this step's gradient


def test_explicit_attention_takes_the_same_fp32_step(toy_batch):
    ref_loss, ref_grad = _one_step("fp32", "sdpa", False, toy_batch)
    new_loss, new_grad = _one_step("fp32", "explicit", False, toy_batch)
    assert new_loss == pytest.approx(ref_loss, rel=1e-5)
    # gradients, not updated weights: Adam's first step divides by |g|, which turns
    # rounding in near-zero gradients into differences of size lr
    torch.testing.assert_close(new_grad, ref_grad, atol=1e-7, rtol=1e-3)


@pytest.mark.filterwarnings("ignore:precision=.bf16. on a device without native bf16")
def test_compiled_fast_path_step_tracks_the_fp32_reference(toy_batch):
    """The whole fast path (bf16, explicit attention, torch.compile) against plain fp32:
    bf16 keeps 8 mantissa bits, so the loss agrees to about 1%."""
    ref_loss, _ = _one_step("fp32", "sdpa", False, toy_batch)
    fast_loss, _ = _one_step("bf16", "explicit", True, toy_batch)
    assert fast_loss == pytest.approx(ref_loss, rel=0.02)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is a glibc call")
def test_keep_freed_memory_sets_the_glibc_options():
    assert keep_freed_memory() is True


# The chapters' head loops take the same `precision` switch. Tolerance: bf16 keeps 8
# mantissa bits (relative rounding 2^-8 = 0.4% per op); after a few steps of these small
# heads the per-epoch mean losses stay within 3% of fp32. A wrong autocast region (say, a
# loss computed in bf16 end to end, or a broken step) moves them by far more, or to NaN.
LOOP_RTOL = 0.03


def _maximage_losses(precision: str) -> list[float]:
    from fgclip.studies.maximage.heads import TrainConfig, train_heads
    g = torch.Generator().manual_seed(0)
    img = nn.functional.normalize(torch.randn(48, 24, 4, 4, generator=g), dim=1)  # (N, D, h, w)
    words = torch.randn(48, 5, 16, generator=g)  # (N, L, Dt)
    mask = torch.ones(48, 5, dtype=torch.bool)
    cfg = TrainConfig(epochs=3, batch_size=16, embed_dim=16, seed=0, precision=precision)
    return [h["loss"] for h in train_heads(img, words, mask, list(range(48)), cfg)[1]]


def _sumclip_losses(precision: str) -> list[float]:
    from open_clip.modified_resnet import AttentionPool2d

    from fgclip.methods.sumclip import SumClipHead, pool_memory
    from fgclip.studies.for_retrieval.head import HeadTrainConfig, train_head
    torch.manual_seed(0)
    pool = AttentionPool2d(spacial_dim=2, embed_dim=16, num_heads=2, output_dim=8)
    mem = pool_memory(pool, torch.randn(48, 16, 2, 2))
    text = nn.functional.normalize(torch.randn(3, 8), dim=-1)
    targets = [torch.tensor([i % 3]) for i in range(48)]
    head = SumClipHead(pool, n_queries=2, d_model=8, n_heads=2)
    cfg = HeadTrainConfig(epochs=3, batch_size=16, lr=1e-2, seed=0, precision=precision)
    return [h["loss"] for h in train_head(head, mem, targets, targets, text, text, 10.0, cfg)]


def _decoupling_losses(precision: str) -> list[float]:
    from fgclip.methods.decoupling import MultiLabelCLIPHead, SemanticDecoupling
    from fgclip.studies.decoupling.heads import FitConfig, fit
    torch.manual_seed(0)
    words = nn.functional.normalize(torch.randn(3, 12), dim=-1)  # x_c
    hand = torch.randn(3, 16)  # text features of the hand prompt
    head = MultiLabelCLIPHead(words, hand, None, SemanticDecoupling(16, 12, 8, 8), 0.07, "softmax")
    dense, pooled = torch.randn(48, 16, 2, 2), torch.randn(48, 16)
    targets = torch.randint(-1, 2, (48, 3)).numpy()  # -1 unknown, 0 absent, 1 present
    cfg = FitConfig(epochs=3, batch_size=16, lr=1e-2, seed=0, precision=precision)
    return [h["loss"] for h in fit(head, dense, pooled, targets, cfg)]


@pytest.mark.parametrize("losses", [_maximage_losses, _sumclip_losses, _decoupling_losses],
                         ids=["ch1-maximage", "ch3-sumclip", "ch4-decoupling"])
@pytest.mark.filterwarnings("ignore:precision='bf16' on a device without native bf16")
def test_chapter_head_loops_agree_in_bf16_and_fp32(losses):
    ref, fast = losses("fp32"), losses("bf16")
    assert len(ref) == len(fast) == 3
    assert ref != fast  # autocast really ran: bf16 rounding changes the numbers a little
    torch.testing.assert_close(torch.tensor(fast), torch.tensor(ref), rtol=LOOP_RTOL, atol=0.0)
    assert losses("fp32") == ref  # and the fp32 reference is deterministic


@pytest.mark.parametrize("losses", [_maximage_losses, _sumclip_losses, _decoupling_losses],
                         ids=["ch1-maximage", "ch3-sumclip", "ch4-decoupling"])
def test_chapter_head_loops_reject_an_unknown_precision(losses):
    with pytest.raises(ValueError, match="precision must be one of"):
        losses("fp16")


@pytest.mark.parametrize("losses", [_maximage_losses, _sumclip_losses, _decoupling_losses],
                         ids=["ch1-maximage", "ch3-sumclip", "ch4-decoupling"])
def test_chapter_head_loops_resolve_auto_from_the_cpu(losses, monkeypatch):
    """precision='auto' reaches each loop through fgclip.precision: with the CPU's flags
    faked, auto takes exactly the fp32 steps without avx512_bf16/AMX and the bf16 ones with."""
    from fgclip import precision
    monkeypatch.setattr(precision, "_ANNOUNCED", set())
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2"}))
    assert losses("auto") == losses("fp32")
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert losses("auto") == losses("bf16")
