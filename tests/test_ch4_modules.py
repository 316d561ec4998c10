"""Prompts through the frozen text encoder, semantic decoupling shapes, and which
parameters train."""
import numpy as np
import pytest
import torch

from fgclip.losses.asymmetric import partial_asymmetric_loss
from fgclip.methods.decoupling import (MultiLabelCLIPHead, SemanticDecoupling, category_scores,
                                       load_glove, score_probabilities, trainable_parameters)
from fgclip.models import create_clip
from fgclip.models.prompts import PromptLearner
from fgclip.studies.decoupling.heads import VARIANTS, make_head

NAMES = ["circle", "star", "heart"]


@pytest.fixture(scope="module")
def clip():
    return create_clip("toy-vit", pretrained="toy")


@pytest.mark.parametrize("specific", [True, False])
def test_prompt_initialised_from_hand_prompt_equals_encode_text(clip, specific):
    pl = PromptLearner(clip.model, clip.tokenizer, NAMES, n_ctx=4, specific=specific,
                       init="a photo of a")
    with torch.no_grad():
        ours = pl()
        ref = clip.model.encode_text(clip.tokenizer([f"a photo of a {n}." for n in NAMES]))
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
    assert tuple(pl.ctx.shape) == ((3, 4, 128) if specific else (4, 128))


def test_prompt_context_changes_output_and_bad_init(clip):
    pl = PromptLearner(clip.model, clip.tokenizer, NAMES, n_ctx=2, specific=True, seed=1)
    with torch.no_grad():
        before = pl().clone()
        pl.ctx[0] += 1.0  # only category 0's context moves
        after = pl()
    assert not torch.allclose(before[0], after[0])
    torch.testing.assert_close(before[1:], after[1:])
    with pytest.raises(ValueError, match="n_ctx"):
        PromptLearner(clip.model, clip.tokenizer, NAMES, n_ctx=3, init="a photo")


def test_decoupling_shapes_attention_and_paper_form():
    torch.manual_seed(0)
    sd = SemanticDecoupling(feature_dim=12, word_dim=7, rank=5, out_dim=6)
    f, x = torch.randn(2, 12, 3, 4), torch.randn(4, 7)
    f_v, a = sd(f, x)
    assert f_v.shape == (2, 4, 12) and a.shape == (2, 4, 3, 4)
    torch.testing.assert_close(a.sum((2, 3)), torch.ones(2, 4))
    # the folded computation equals w_a^T f~ with f~ = P^T tanh((U^T f) ⊙ (V^T x)) + b written out
    logits = sd.w_a(sd.category_features(f, x)).squeeze(-1)  # (B, C, hw)
    torch.testing.assert_close(a.flatten(2), logits.softmax(-1))
    # f^v_c is the attention-weighted sum of the map's columns
    ref = torch.einsum("bcp,bdp->bcd", a.flatten(2), f.flatten(2))
    torch.testing.assert_close(f_v, ref)


def test_scores_and_probabilities():
    f_v = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])  # (1, 2, 2)
    f_t = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    s = category_scores(f_v, f_t, tau=0.5)
    torch.testing.assert_close(s, torch.tensor([[2.0, 0.0]]))
    torch.testing.assert_close(score_probabilities(s, "softmax").sum(-1), torch.ones(1))
    torch.testing.assert_close(score_probabilities(s, "sigmoid"), torch.sigmoid(s))
    with pytest.raises(ValueError, match="scoring"):
        score_probabilities(s, "relu")


def test_only_decoupling_and_prompts_receive_gradients(clip):
    wv = torch.randn(3, 128)
    head = MultiLabelCLIPHead(wv, None, PromptLearner(clip.model, clip.tokenizer, NAMES, 1,
                                                      True, "a"),
                              SemanticDecoupling(128, 128, 8, 8), tau=0.05)
    dense, pooled = torch.randn(4, 128, 8, 8), torch.randn(4, 128)
    out = head(dense, pooled)
    assert out.scores.shape == (4, 3) and out.attention.shape == (4, 3, 8, 8)
    partial_asymmetric_loss(out.probs, torch.tensor([[1, 0, -1]] * 4)).backward()
    with_grad = {n for n, p in head.named_parameters()
                 if p.grad is not None and p.grad.abs().sum() > 0}
    trainable = {n for n, p in head.named_parameters() if p.requires_grad}
    assert with_grad == trainable
    assert all(n.startswith(("decoupling.", "prompts.ctx")) for n in trainable)
    assert not any(p.grad is not None for p in clip.model.parameters())
    assert trainable_parameters(head) == 3 * 128 + sum(
        p.numel() for p in head.decoupling.parameters())


def test_every_variant_builds(clip):
    wv = torch.randn(3, 128)
    counts = {v: trainable_parameters(make_head(v, clip.model, clip.tokenizer, NAMES, wv, "a",
                                                0.05, rank=8)) for v in VARIANTS}
    assert counts["zero-shot"] == 0 and counts["linear probe"] == 128 * 3 + 3
    assert counts["full"] == counts["prompts only"] + counts["decoupling only"]


def test_glove_loader(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text("red 1 0 0\ncircle 0 3 0\nstar 0 0 2\nsky 4 4 4\n")
    x = load_glove(str(path), ["circle", "red star"])
    torch.testing.assert_close(x[0], torch.tensor([0.0, 1.0, 0.0]))
    torch.testing.assert_close(x[1], torch.tensor([0.5, 0.0, 1.0]) / (1.25 ** 0.5))
    with pytest.raises(KeyError, match="heart"):
        load_glove(str(path), ["heart"])


def test_fit_learns_separable_labels_and_predict_shapes():
    from fgclip.methods.decoupling import LinearProbe
    from fgclip.metrics.multilabel import mean_average_precision
    from fgclip.studies.decoupling.heads import FitConfig, fit, predict

    g = torch.Generator().manual_seed(0)
    pooled = torch.randn(120, 6, generator=g)
    labels = (pooled[:, :3] > 0).long()  # category c present iff feature c > 0
    targets = labels.clone()
    targets[torch.rand(120, 3, generator=g) < 0.5] = -1  # half the labels unknown
    head = LinearProbe(6, 3)
    history = fit(head, torch.zeros(120, 1, 1, 1), pooled, targets.numpy(),
                  FitConfig(epochs=30, batch_size=32, lr=0.05, seed=0))
    assert history[-1]["loss"] < history[0]["loss"]
    scores, log_p, att = predict(head, torch.zeros(120, 1, 1, 1), pooled)
    assert scores.shape == log_p.shape == (120, 3) and att is None
    np.testing.assert_allclose(log_p, torch.nn.functional.logsigmoid(torch.as_tensor(scores)).numpy())
    assert mean_average_precision(scores, labels.numpy()) > 0.95
    with pytest.raises(ValueError, match="same number"):
        fit(head, torch.zeros(3, 1, 1, 1), pooled, targets.numpy(), FitConfig())


def test_sigmoid_with_offset_control():
    wv = torch.randn(3, 8)
    head = MultiLabelCLIPHead(wv, torch.randn(3, 8), None, SemanticDecoupling(8, 8, 4, 4),
                              tau=0.1, scoring="sigmoid+bias")
    assert head.offset.item() == pytest.approx(-10.0)
    out = head(torch.randn(2, 8, 2, 2), torch.randn(2, 8))
    assert (out.probs < 0.5).all()  # cos <= 1, so s_c + β <= 0 at the start
    torch.testing.assert_close(out.probs, torch.sigmoid(out.scores))
    out.probs.sum().backward()
    assert head.offset.grad is not None
    with pytest.raises(ValueError, match="scoring"):
        MultiLabelCLIPHead(wv, torch.randn(3, 8), scoring="tanh")


def test_sigmoid_with_learned_scale_and_offset_starts_at_siglip_values():
    wv, text = torch.randn(3, 8), torch.randn(3, 8)
    head = MultiLabelCLIPHead(wv, text, None, None, tau=0.01, scoring="sigmoid+affine")
    pooled = torch.randn(4, 8)
    out = head(torch.randn(4, 8, 2, 2), pooled)
    cos = torch.nn.functional.normalize(pooled, dim=-1) @ torch.nn.functional.normalize(text, dim=-1).T
    torch.testing.assert_close(out.scores, 10.0 * cos - 10.0)  # t = 10, β = -10, not 1/τ = 100
    torch.testing.assert_close(out.probs, torch.sigmoid(out.scores))
    out.probs.sum().backward()
    assert head.log_scale.grad is not None and head.offset.grad is not None


def test_make_head_n_ctx(clip):
    """M = n_ctx context tokens: 0 keeps the hand prompt's words (so the prompt starts at the
    zero-shot text), another M starts from seeded random vectors, a negative M is refused."""
    x = torch.eye(3, 128)
    args = (clip.model, clip.tokenizer, NAMES, x, "a photo of a", 0.07)
    same = make_head("prompts only", *args, n_ctx=0)
    assert same.prompts.ctx.shape[1] == 4
    with torch.no_grad():
        ref = clip.model.encode_text(clip.tokenizer([f"a photo of a {n}." for n in NAMES]))
        torch.testing.assert_close(same.prompts(), ref, rtol=1e-5, atol=1e-5)
    other = make_head("full", *args, n_ctx=2, seed=3)
    assert other.prompts.ctx.shape[1] == 2
    assert torch.equal(other.prompts.ctx, make_head("full", *args, n_ctx=2, seed=3).prompts.ctx)
    with pytest.raises(ValueError, match="n_ctx"):
        make_head("full", *args, n_ctx=-1)
