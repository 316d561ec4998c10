"""CLIP4DM attribution rules on hand-made maps, word merging, scores and baselines."""
import numpy as np
import pytest
import torch

from fgclip.methods.clip4dm import (AttributionConfig, clip4dm, clip4dm_variants, clip_score,
                                    f_clip_score, leave_one_word_out, misalignment_penalty,
                                    most_negative_word, normalize_per_caption, random_word,
                                    threshold_words, token_relevance, word_attributions,
                                    word_token_counts)
from fgclip.models import create_clip, images_to_tensor
from fgclip.models.tokens import average_spans, spans_from_counts
from fgclip.toyworld import ToyWorldConfig, generate

# one pair, 2 heads, 3 tokens; the [EOS] is token 2
A = torch.tensor([[[[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]],
                   [[1.0, 0, 0], [0.6, 0.4, 0], [0.4, 0.4, 0.2]]]])
G = torch.tensor([[[[0.0, 0, 0], [0, 0, 0], [1.0, -2.0, 0.5]],
                   [[0.0, 0, 0], [0, 0, 0], [-1.0, 0.5, 1.0]]]])
EOS = torch.tensor([2])


def test_no_relu_keeps_negatives_that_gae_clamps():
    r = token_relevance([A], [G], EOS, AttributionConfig(layers=(0,)))
    # mean over heads of G * A on the EOS row: [(0.2 - 0.4)/2, (-0.6 + 0.2)/2, (0.25 + 0.2)/2]
    torch.testing.assert_close(r, torch.tensor([[-0.1, -0.2, 0.225]]))
    gae = token_relevance([A], [G], EOS, AttributionConfig(layers=(0,), relu=True))
    torch.testing.assert_close(gae, torch.tensor([[0.1, 0.1, 0.225]]))
    assert (r < 0).any() and (gae >= 0).all()


def test_layer_mean_and_rollout():
    a2, g2 = A.flip(-1).tril(), -G  # a second layer
    cam1 = (G * A).mean(1)[0]
    cam2 = (g2 * a2).mean(1)[0]
    mean = token_relevance([A, a2], [G, g2], EOS, AttributionConfig(layers=(0, 1)))
    torch.testing.assert_close(mean[0], ((cam1 + cam2) / 2)[2])
    roll = token_relevance([A, a2], [G, g2], EOS, AttributionConfig(layers=(0, 1), rollout=True))
    r = torch.eye(3) + cam1
    r = r + cam2 @ r
    torch.testing.assert_close(roll[0], r[2])
    last = token_relevance([A * 0, a2], [G * 7, g2], EOS, AttributionConfig(layers=(-1,)))
    torch.testing.assert_close(last[0], cam2[2])  # the first layer is not used


def test_bad_layers_are_named():
    with pytest.raises(ValueError, match="out of range"):
        token_relevance([A], [G], EOS, AttributionConfig(layers=(-2,)))
    with pytest.raises(ValueError, match="unique"):
        AttributionConfig(layers=(1, 1))


def test_merge_words_and_bpe_counts():
    spans = spans_from_counts([1, 2, 1])
    assert spans == [(0, 1), (1, 3), (3, 4)]
    np.testing.assert_allclose(average_spans(np.array([1.0, 2.0, 4.0, -3.0, 9.0]), spans), [1.0, 3.0, -3.0])
    with pytest.raises(ValueError, match="runs past"):
        average_spans(np.array([1.0]), spans_from_counts([1, 1]))
    with pytest.raises(ValueError, match="at least one token"):
        spans_from_counts([1, 0])
    clip = create_clip("toy-vit", pretrained=None)
    encode = clip.tokenizer.encode
    text = "A photo depicts an antidisestablishmentarian teddy-bear."
    counts = word_token_counts(text, encode)
    assert len(counts) == len(text.split()) + 1 and sum(counts) == len(encode(text))  # "." split off
    assert counts[4] > 1 and counts[5] > 1  # long and hyphenated words are several BPE tokens


@pytest.fixture(scope="module")
def toy():
    clip = create_clip("toy-vit", pretrained="toy")
    scenes = generate(ToyWorldConfig(), 4, seed=0, split="test")
    images = images_to_tensor(torch.from_numpy(np.stack([s.image for s in scenes])), clip)
    return clip, images, [s.captions[0].text for s in scenes]


def test_clip4dm_on_the_toy_clip(toy):
    clip, images, captions = toy
    res = clip4dm_variants(clip, images, captions, {"c4dm": AttributionConfig(),
                                                    "gae": AttributionConfig(layers=(0, 1, 2, 3), relu=True, rollout=True)},
                           batch_size=3)  # two batches
    c4dm, gae = res["c4dm"], res["gae"]
    assert c4dm.words == [c.split() for c in captions]
    assert [len(w) for w in c4dm.w] == [len(c.split()) for c in captions]
    with torch.no_grad():
        img = torch.nn.functional.normalize(clip.model.encode_image(images), dim=-1)
        txt = torch.nn.functional.normalize(clip.model.encode_text(clip.tokenizer(
            ["A photo depicts " + c for c in captions])), dim=-1)
    np.testing.assert_allclose(c4dm.cos, (img * txt).sum(-1).numpy(), atol=1e-5)
    assert min(w.min() for w in c4dm.w) < 0  # negative attributions survive
    assert min(w.min() for w in gae.w) >= 0
    alone = clip4dm(clip, images[2:3], captions[2:3])
    np.testing.assert_allclose(alone.w[0], c4dm.w[2], rtol=1e-4, atol=1e-9)


def test_leave_one_word_out_matches_a_direct_deletion(toy):
    clip, images, captions = toy
    res = leave_one_word_out(clip, images[:2], captions[:2], batch_size=5)
    words = captions[1].split()
    shorter = " ".join(words[:2] + words[3:])
    with torch.no_grad():
        img = torch.nn.functional.normalize(clip.model.encode_image(images[1:2]), dim=-1)
        t = torch.nn.functional.normalize(clip.model.encode_text(clip.tokenizer(
            ["A photo depicts " + captions[1], "A photo depicts " + shorter])), dim=-1)
    cos = (img * t).sum(-1).numpy()
    assert res.w[1][2] == pytest.approx(cos[0] - cos[1], abs=1e-5)
    assert res.cos[1] == pytest.approx(cos[0], abs=1e-5)


def test_rules_and_scores_by_hand():
    w = np.array([-0.1, 0.2, -0.3])
    assert most_negative_word(w) == 2
    np.testing.assert_array_equal(threshold_words(w, -0.05), [True, False, True])
    np.testing.assert_allclose(clip_score([-0.2, 0.4]), [0.0, 1.0])
    assert f_clip_score(0.5, w, -0.05, "additive") == pytest.approx(1.25 + 0.5 * (-0.4))
    assert f_clip_score(0.5, w, -1.0, "additive") == pytest.approx(1.25)
    z = normalize_per_caption(w)
    assert z.mean() == pytest.approx(0) and z.std() == pytest.approx(1)
    assert np.argmin(z) == np.argmin(w)
    np.testing.assert_array_equal(normalize_per_caption(np.ones(3)), np.zeros(3))
    draws = [random_word(5, np.random.default_rng(0)) for _ in range(3)]
    assert len(set(draws)) == 1 and 0 <= draws[0] < 5
    with pytest.raises(ValueError):
        most_negative_word(np.array([]))


def test_image_index_pairs_captions_with_shared_images(toy):
    clip, images, captions = toy
    caps = [captions[0], captions[1], captions[1], captions[0]]
    index = [0, 1, 0, 1]
    shared = clip4dm(clip, images[:2], caps, image_index=index)
    direct = clip4dm(clip, images[[0, 1, 0, 1]], caps)
    for a, b in zip(shared.w, direct.w):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(shared.cos, direct.cos, atol=1e-6)
    loo = leave_one_word_out(clip, images[:2], caps, image_index=index)
    np.testing.assert_allclose(loo.cos, direct.cos, atol=1e-5)
    with pytest.raises(ValueError, match="image_index"):
        clip4dm(clip, images[:2], caps, image_index=[0, 1, 2, 0])
    with pytest.raises(ValueError, match="captions"):
        clip4dm(clip, images[:3], caps)


def test_word_attributions_average_bpe_tokens():
    # Eq. (eq-clip4dm-word): column 0 is [SOT]; words of 1, 2 and 1 tokens; the chapter's check cell
    row = np.array([0.7, 1.0, 2.0, 4.0, -3.0])
    np.testing.assert_allclose(word_attributions(row, [1, 2, 1], [0, 1, 2]), [1.0, 3.0, -3.0])
    np.testing.assert_allclose(word_attributions(row, [1, 2, 1], [1]), [3.0])  # punctuation dropped
    with pytest.raises(ValueError, match="runs past"):
        word_attributions(row, [2, 3], [0, 1])


def test_penalty_and_three_forms_by_hand():
    # Eq. (eq-fclipscore) with s = 0.5, w = (-0.1, 0.2, -0.3), ε = -0.05: P_ε = -0.4
    w = np.array([-0.1, 0.2, -0.3])
    assert misalignment_penalty(w, -0.05) == pytest.approx(-0.4)
    assert misalignment_penalty(w, -1.0) == 0.0  # nothing flagged
    assert f_clip_score(0.5, w, -0.05, "threshold") == pytest.approx(0.5 * -0.4)
    assert f_clip_score(0.5, w, -0.05, "most negative") == pytest.approx(0.5 * -0.3)
    assert f_clip_score(0.5, w, -0.05, "additive") == pytest.approx(2.5 * 0.5 + 0.5 * -0.4)


def test_attribution_config_labels():
    assert AttributionConfig(layers=(-3, -2, -1)).label == "last 3"
    assert AttributionConfig(layers=(-1,), relu=True, rollout=True).label == "last 1 + ReLU + rollout"
    assert AttributionConfig(layers=(0, 1), relu=True).label == "layers (0, 1) + ReLU"
