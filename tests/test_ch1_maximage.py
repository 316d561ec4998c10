import pytest
import torch

from fgclip.methods.maximage import (MaxImageHeads, aggregate, colocalization_volume, pair_scores, phrase_map,
                                     word_maps, word_token_spans)
from fgclip.models.tokens import average_spans


def _toy_batch():
    # two images with a 1x2 map (positions p0, p1), E = 2; two captions of up to 2 words
    v = torch.tensor([[[[1.0, 0.0]], [[0.0, 1.0]]],     # image 0: p0 = (1, 0), p1 = (0, 1)
                      [[[2.0, 1.0]], [[0.0, 0.0]]]])    # image 1: p0 = (2, 0), p1 = (1, 0)
    t = torch.tensor([[[1.0, 0.0], [0.0, 1.0]],          # caption 0: words (1,0), (0,1)
                      [[1.0, 1.0], [9.0, 9.0]]])         # caption 1: one word, then padding
    mask = torch.tensor([[True, True], [True, False]])
    return v, t, mask


def test_volume_is_every_dot_product():
    v, t, _ = _toy_batch()
    m = colocalization_volume(v, t)
    assert m.shape == (2, 2, 2, 2)  # (Bi, Bt, positions, words)
    for i in range(2):
        for j in range(2):
            for p in range(2):
                for d in range(2):
                    assert m[i, j, p, d] == pytest.approx(float(v[i, :, 0, p] @ t[j, d]))


def test_aggregators_hand_computed():
    v, t, mask = _toy_batch()
    m = colocalization_volume(v, t)
    # image 0 x caption 0: word maps (1, 0) and (0, 1): MaxImage (1 + 1)/2 = 1,
    # average ((0.5) + (0.5))/2 = 0.5, max-over-tokens mean(max(1,0), max(0,1)) = 1
    # image 1 x caption 0: word maps (2, 1) and (0, 0): MaxImage (2 + 0)/2 = 1,
    # average (1.5 + 0)/2 = 0.75, max-tokens mean(2, 1) = 1.5
    # image 0 x caption 1 (one word (1,1), padding ignored): maps (1, 1): 1, 1, 1
    # image 1 x caption 1: maps (2, 1): MaxImage 2, average 1.5, max-tokens 1.5
    expected = {"maximage": [[1.0, 1.0], [1.0, 2.0]],
                "average": [[0.5, 1.0], [0.75, 1.5]],
                "max-tokens": [[1.0, 1.0], [1.5, 1.5]]}
    for name, want in expected.items():
        torch.testing.assert_close(aggregate(m, mask, name), torch.tensor(want))
        torch.testing.assert_close(pair_scores(v, t, mask, name), torch.tensor(want))


def test_average_pooling_equals_dot_of_means():
    g = torch.Generator().manual_seed(0)
    v, t = torch.randn(3, 4, 2, 3, generator=g), torch.randn(5, 6, 4, generator=g)
    mask = torch.ones(5, 6, dtype=torch.bool)
    ref = v.mean(dim=(2, 3)) @ t.mean(dim=1).T
    torch.testing.assert_close(pair_scores(v, t, mask, "average"), ref)


def test_maximage_gradient_reaches_only_the_argmax_position():
    v = torch.tensor([[[[0.2, 0.9, 0.1]], [[0.0, 0.0, 0.0]]]], requires_grad=True)  # (1,2,1,3)
    t = torch.tensor([[[1.0, 0.0]]])
    pair_scores(v, t, torch.tensor([[True]]), "maximage").sum().backward()
    assert v.grad[0, 0, 0].tolist() == [0.0, 1.0, 0.0]


def test_maximage_gradient_is_amax_gradient_without_ties_and_one_position_with_them():
    from fgclip.methods.maximage import ragged_pair_scores
    g = torch.Generator().manual_seed(0)
    v0, t0 = torch.randn(2, 3, 5, 4, 4, generator=g), torch.randn(2, 7, 5, generator=g)  # (S, Bi, E, h, w), (S, W, E)
    owner = torch.tensor([[0, 0, 1, 1, 1, 2, -1], [0, 1, 1, 2, 2, 2, 2]])  # 3 captions; -1: an empty slot
    grads = []
    for dense in (False, True):  # the library's path, then the same score through amax on the padded volume
        v, t = v0.clone().requires_grad_(), t0.clone().requires_grad_()
        if dense:
            m = (v.flatten(-2).transpose(-1, -2).reshape(2, 48, 5) @ t.transpose(-1, -2)).view(2, 3, 16, 7)
            onehot = (owner[..., None] == torch.arange(3)).float()
            s = m.amax(dim=-2) @ (onehot / onehot.sum(-2, keepdim=True))
        else:
            s = ragged_pair_scores(v, t, owner, 3)
        (s * torch.randn(2, 3, 3, generator=torch.Generator().manual_seed(1))).sum().backward()
        grads.append((s.detach(), v.grad, t.grad))
    for ours, amax in zip(*grads):
        torch.testing.assert_close(ours, amax)
    # two tied positions: amax would give each half; max gives the first the whole gradient
    v = torch.tensor([[[[0.5, 0.5, 0.1]]]], requires_grad=True)  # (1 image, E=1, 1 x 3)
    pair_scores(v, torch.tensor([[[1.0]]]), torch.tensor([[True]]), "maximage").sum().backward()
    assert v.grad[0, 0, 0].tolist() == [1.0, 0.0, 0.0]


def test_aggregate_rejects_bad_input():
    v, t, mask = _toy_batch()
    m = colocalization_volume(v, t)
    with pytest.raises(ValueError, match="aggregator"):
        aggregate(m, mask, "mean")
    with pytest.raises(ValueError, match="at least one word"):
        aggregate(m, torch.tensor([[True, True], [False, False]]))
    with pytest.raises(ValueError, match="same E"):
        colocalization_volume(v, torch.zeros(2, 2, 3))


def test_phrase_parse_modes():
    torch.manual_seed(0)
    heads = MaxImageHeads(image_dim=4, word_dim=3, embed_dim=5)
    v = torch.randn(5, 2, 2)
    words = torch.randn(2, 3)
    vec = phrase_map(heads, v, words, "vector")
    ref = word_maps(v, heads.encode_words(words.mean(dim=0, keepdim=True)))[0]
    torch.testing.assert_close(vec, ref)
    maps = phrase_map(heads, v, words, "maps")
    per_word = word_maps(v, heads.encode_words(words))  # (2, 2, 2)
    std = per_word.flatten(1).std(dim=1)[:, None, None]
    z = (per_word - per_word.mean(dim=(1, 2), keepdim=True)) / std
    torch.testing.assert_close(maps, z.mean(dim=0))
    # a single word: both modes rank the positions the same way
    one = words[:1]
    assert phrase_map(heads, v, one, "vector").argmax() == \
        phrase_map(heads, v, one, "maps").argmax()
    with pytest.raises(ValueError, match="mode"):
        phrase_map(heads, v, words, "words")


def test_heads_keep_positions_apart():
    torch.manual_seed(0)
    heads = MaxImageHeads(image_dim=4, word_dim=3, embed_dim=5)
    feats = torch.randn(1, 4, 3, 3)
    out = heads.encode_image(feats)
    assert out.shape == (1, 5, 3, 3)
    changed = feats.clone()
    changed[0, :, 0, 0] += 1.0  # only position (0, 0) changes
    diff = (heads.encode_image(changed) - out).abs().sum(dim=1)[0]
    assert diff[0, 0] > 0 and diff.flatten()[1:].max() == 0


class _FakeTokenizer:
    """Splits 'blueberry' into two tokens, like a BPE that does not know the word."""
    vocab = {"a": [1], "blueberry": [2, 3], "star": [4]}

    def encode(self, text):
        return [t for w in text.split() for t in self.vocab[w]]


def test_word_token_spans_and_averaging():
    spans = word_token_spans(_FakeTokenizer(), ["a", "blueberry", "star"])
    assert spans == [(1, 2), (2, 4), (4, 5)]  # position 0 is the start token
    tokens = torch.arange(6 * 2, dtype=torch.float).view(6, 2)
    words = average_spans(tokens, spans)
    torch.testing.assert_close(words[1], (tokens[2] + tokens[3]) / 2)


def test_word_token_spans_on_the_real_tokenizer():
    import open_clip
    tok = open_clip.get_tokenizer("toy-vit")
    words = "a large purple arrow to the right of a orange crescent".split()
    spans = word_token_spans(tok, words)
    ids = tok([" ".join(words)])[0]
    assert [ids[a:b].tolist() for a, b in spans] == [tok.encode(w) for w in words]
