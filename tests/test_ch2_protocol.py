"""Chapter 2 protocol: F-CLIPScore forms, official word splitting, per-caption units, controls,
and an independent reimplementation of the published rule on the toy CLIP."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import average_precision_score

from fgclip.datasets.foil import FoilPair, FoilSplit
from fgclip.methods.clip4dm import (AttributionConfig, caption_fits, clip4dm, f_clip_score,
                                    leave_one_word_out, official_words, word_token_counts)
from fgclip.metrics.misalignment import (ap_contributions, caption_auc, caption_f1, group_contrast,
                                         most_negative, span_labels)
from fgclip.models import create_clip, images_to_tensor
from fgclip.studies.clip4dm.data import caption_rows, planted_colour_rows, sample_pairs
from fgclip.studies.clip4dm.units import compare_units, random_content_hit, seed_matrix, word_role
from fgclip.toyworld import ToyWorldConfig, generate


def test_f_clip_score_forms_by_hand():
    w = np.array([-0.2, 0.1, -0.05, 0.3])
    # threshold: (1 - 0.4) * (-0.2 - 0.05) = -0.15 at eps = 0; only -0.2 at eps = -0.1
    assert f_clip_score(0.4, w, 0.0, "threshold") == pytest.approx(-0.15)
    assert f_clip_score(0.4, w, -0.1, "threshold") == pytest.approx(0.6 * -0.2)
    # most negative: (1 - 0.4) * -0.2, whatever eps is
    assert f_clip_score(0.4, w, None, "most negative") == pytest.approx(-0.12)
    assert f_clip_score(0.4, w, 5.0, "most negative") == pytest.approx(-0.12)
    # additive: 2.5 * 0.4 + (1 - 0.4) * (-0.25) = 1.0 - 0.15
    assert f_clip_score(0.4, w, 0.0, "additive") == pytest.approx(0.85)
    # a negative cosine: max(s, 0) = 0 in the official forms, (1 - s) = 1.2 in the additive one
    assert f_clip_score(-0.2, w, 0.0, "threshold") == pytest.approx(-0.25)
    assert f_clip_score(-0.2, w, None, "most negative") == pytest.approx(-0.2)
    assert f_clip_score(-0.2, w, 0.0, "additive") == pytest.approx(0.0 + 1.2 * -0.25)
    with pytest.raises(ValueError, match="needs eps"):
        f_clip_score(0.4, w, None, "threshold")
    with pytest.raises(ValueError, match="form"):
        f_clip_score(0.4, w, 0.0, "sum")


def test_official_words_split_punctuation():
    assert official_words("a dog, on grass.") == [("a", 0), ("dog", 1), (",", 1), ("on", 2),
                                                  ("grass", 3), (".", 3)]
    assert official_words("a teddy-bear") == [("a", 0), ("teddy-bear", 1)]
    clip = create_clip("toy-vit", pretrained=None)
    text = "A photo depicts a dog, on grass."
    counts = word_token_counts(text, clip.tokenizer.encode)
    assert len(counts) == 9 and sum(counts) == len(clip.tokenizer.encode(text))


def test_span_ties_auc_f1():
    np.testing.assert_array_equal(span_labels(np.array([0, 1, 2, 2, 3]), 2, 1), [0, 0, 1, 1, 0])
    np.testing.assert_array_equal(span_labels(np.array([0, 1, 2, 3]), 1, 2), [0, 1, 1, 0])
    np.testing.assert_array_equal(span_labels(np.array([0, 1]), None), [0, 0])
    w = np.array([0.0, -1.0, -1.0, 2.0])
    picks = {most_negative(w, np.random.default_rng(k)) for k in range(20)}
    assert picks == {(1, True), (2, True)}
    assert most_negative(np.array([3.0, -1.0]), np.random.default_rng(0)) == (1, False)
    # foil word -1 vs others (0, 2, -1): less than 2 of 3, tied with 1 -> (2 + 0.5) / 3
    assert caption_auc(w, np.array([0, 1, 0, 0])) == pytest.approx(2.5 / 3)
    assert math.isnan(caption_auc(w, np.zeros(4)))
    # eps = -0.5 flags words 1 and 2; the foil is word 1: TP 1, FP 1, FN 0 -> 2/3
    assert caption_f1(w, np.array([0, 1, 0, 0]), -0.5) == pytest.approx(2 / 3)
    assert caption_f1(w, np.zeros(4), -5.0) == 1.0
    assert random_content_hit(["a", "red", "circle"], np.array([0, 1, 0])) == pytest.approx(0.5)


def test_ap_contributions_average_to_sklearn_ap_with_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 6, size=40).astype(float)  # many ties
    pos = rng.random(40) < 0.4
    contrib = ap_contributions(scores, pos)
    assert np.isnan(contrib[~pos]).all()
    assert np.nanmean(contrib) == pytest.approx(average_precision_score(pos, scores))


def test_group_contrast_means_are_group_means():
    v = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    in_a, in_b = np.array([1, 1, 0, 0, 0, 0], bool), np.array([0, 0, 0, 1, 1, 1], bool)
    a, b = group_contrast(v, in_a, in_b)
    assert a.mean() == pytest.approx(0.5) and b.mean() == pytest.approx(1 / 3)


def _split(n):
    pairs = [FoilPair(i, i, f"im{i}.png", "a small red circle at the top", f"a small {c} circle at the top",
                      "red", c, 2, c, "red", 100 + i, 200 + i, "color")
             for i, c in enumerate(["blue", "green", "pink", "brown", "white", "cyan"][:n])]
    return FoilSplit(pairs)


def test_seeded_sample_rows_and_planted_control():
    split = _split(6)
    a = sample_pairs(split, 3, np.random.default_rng(0))
    b = sample_pairs(split, 3, np.random.default_rng(1))
    assert len(a.pairs) == 3 and [p.foil_id for p in a.pairs] == sorted(p.foil_id for p in a.pairs)
    assert [p.foil_id for p in a.pairs] == [p.foil_id for p in sample_pairs(split, 3, np.random.default_rng(0)).pairs]
    rows = caption_rows(split, seed=7)
    assert rows.foil_type.value_counts().to_dict() == {"color": 6, "original": 6}
    assert set(rows.cluster.str.split(":").str[0]) == {"7"}
    planted = planted_colour_rows(rows)
    assert len(planted) == 6 and planted.foil_word.eq("cyan").all()  # farthest from red in RGB
    assert planted.caption[0] == "a small cyan circle at the top"
    assert word_role("cyan") == "colour" and word_role("circle") == "shape" and word_role("the") == "function word"


def test_seed_matrix_and_compare_units_on_planted_effect():
    n = 60
    units = pd.DataFrame({"seed": np.repeat([0, 1, 2], n), "cluster": [f"{k // 2}" for k in range(3 * n)]})
    rng = np.random.default_rng(0)
    a, b = rng.random(3 * n) < 0.9, rng.random(3 * n) < 0.2
    m = seed_matrix(units, a, np.ones(3 * n, bool))
    assert m.shape == (3, 3 * n) and (~np.isnan(m)).sum(axis=0).max() == 1
    v = compare_units(units, a, b, np.ones(3 * n, bool), claim="x", arms=("a", "b"), unit="u", seed=0, margin=0.03)
    assert v.verdict == "A better" and v.n_seeds == 3 and v.margin == 0.03 and v.cluster_unit == "images"


def test_long_captions_are_flagged_and_loo_uses_official_words():
    clip = create_clip("toy-vit", pretrained=None)
    fits = caption_fits(clip, ["a red circle", " ".join(["circle"] * 200)])
    np.testing.assert_array_equal(fits, [True, False])
    images = torch.zeros(1, 3, 64, 64)
    res = leave_one_word_out(clip, images, ["a red circle, left."])
    assert res.words[0] == ["a", "red", "circle", "left"]
    np.testing.assert_array_equal(res.source[0], [0, 1, 2, 3])


# ------------------------------------------------------------ independent reimplementation
def _reference_words(clip, image, caption, n_last, template="A photo depicts "):
    """The published rule written from scratch: own attention forward pass over the text
    tower's weights, cosine gradient, no ReLU, head mean, mean of the last n layers, EOS
    row, BPE tokens averaged per official word, template and punctuation dropped."""
    model, text = clip.model, template + caption
    tokens = clip.tokenizer([text])  # (1, L)
    with torch.no_grad():
        img = F.normalize(model.encode_image(image[None]), dim=-1)[0]
    x = model.token_embedding(tokens) + model.positional_embedding  # (1, L, E)
    n = x.shape[1]
    causal = torch.full((n, n), float("-inf")).triu(1)
    probs = []
    for blk in model.transformer.resblocks:
        mha, h = blk.attn, blk.ln_1(x)
        e, heads = mha.embed_dim, mha.num_heads
        q, k, v = [(h @ mha.in_proj_weight[i * e:(i + 1) * e].T + mha.in_proj_bias[i * e:(i + 1) * e])
                   .view(1, n, heads, e // heads).transpose(1, 2) for i in range(3)]
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(e // heads) + causal, dim=-1)
        probs.append(a)
        x = x + mha.out_proj((a @ v).transpose(1, 2).reshape(1, n, e))
        x = x + blk.mlp(blk.ln_2(x))
    eos = int(tokens[0].argmax())
    t = model.ln_final(x)[0, eos] @ model.text_projection
    s = F.cosine_similarity(t, img, dim=0)
    grads = torch.autograd.grad(s, probs)
    rel = sum((g * a).mean(dim=1)[0] for g, a in zip(grads[-n_last:], probs[-n_last:])) / n_last
    r = rel[eos, 1:eos].detach().numpy()  # the EOS row over the text tokens
    chunks, pos, out = [], 0, []
    for word, src in official_words(text):
        m = len(clip.tokenizer.encode(word))
        chunks.append((word, src, r[pos:pos + m].mean()))
        pos += m
    n_template = len(template.split())
    return [(wd, sc) for wd, src, sc in chunks if src >= n_template and wd not in ".,"]


@pytest.mark.parametrize("n_last", [1, 3])
@pytest.mark.parametrize("model", ["toy-vit", "ViT-B-32"])
def test_library_matches_an_independent_implementation(model, n_last):
    """On the committed toy CLIP with a toy scene, and on ViT-B-32 (random weights: the real
    ones cannot be downloaded here) with a real photo and a cased caption."""
    scene = generate(ToyWorldConfig(), 1, seed=3, split="test")[0]
    if model == "toy-vit":
        clip = create_clip("toy-vit", pretrained="toy")
        image = images_to_tensor(torch.from_numpy(scene.image[None]), clip)[0]
    else:
        from fgclip.datasets.samples import sample_photos

        torch.manual_seed(0)
        clip = create_clip("ViT-B-32", pretrained="none")
        image = clip.preprocess(sample_photos()[0])  # (3, 224, 224)
    for caption in [scene.foils[0].text,
                    "a small red circle, next to a blue star.", "A Man in a blue shirt, near a wall."]:
        ref = _reference_words(clip, image, caption, n_last)
        ours = clip4dm(clip, image[None], [caption], AttributionConfig(layers=tuple(range(-n_last, 0))))
        assert ours.words[0] == [wd for wd, _ in ref]
        ref_w = np.array([sc for _, sc in ref])
        assert np.max(np.abs(ours.w[0] - ref_w)) <= 1e-5 * np.max(np.abs(ref_w))


def test_memoised_tokenisation_equals_open_clip():
    from fgclip.models.text import tokenize_words
    clip = create_clip("toy-vit", pretrained=None)
    texts = ["A photo depicts a dog, on grass.", "three shapes on a gray background",
             "a large green teddy-bear next to a ring", " ".join(["circle"] * 60)]
    ours = tokenize_words(clip, [[w for w, _ in official_words(t)] for t in texts])
    torch.testing.assert_close(ours, clip.tokenizer(texts))


def test_trimmed_text_pass_equals_open_clip():
    from fgclip.models.text import encode_text_trimmed
    clip = create_clip("toy-vit", pretrained="toy")
    tokens = clip.tokenizer(["a red circle", "two shapes on a gray background next to a ring"])
    with torch.no_grad():
        torch.testing.assert_close(encode_text_trimmed(clip.model, tokens), clip.model.encode_text(tokens),
                                   atol=1e-5, rtol=0)


def _toy_units(n_img=40, seeds=(0, 1, 2)):
    """Synthetic draws: per image an original and a 'shape' foil whose foil word (index 1) is
    the most negative in 3 of 4 images; cos lower for foils."""
    from fgclip.methods.clip4dm import Attributions
    frames, attrs = [], {}
    for s in seeds:
        rows, ws = [], []
        for i in range(n_img):
            rows.append(dict(caption="a red circle", image=f"im{i}", start=1, length=1, foil_type="shape",
                             foil_word="red", target_word="blue", original="a blue circle"))
            ws.append(np.array([0.1, -0.5 if i % 4 else 0.2, 0.0]))
            rows.append(dict(caption="a blue circle", image=f"im{i}", start=np.nan, length=0, foil_type="original",
                             foil_word="", target_word="", original="a blue circle"))
            ws.append(np.array([0.1, 0.05, 0.0]))
        df = pd.DataFrame(rows)
        df["seed"], df["cluster"] = s, [f"{s}:{im}" for im in df.image]
        cos = np.where(df.foil_type.eq("original"), 0.3, 0.2) + 0.001 * np.arange(len(df))
        attrs[s] = Attributions([c.split() for c in df.caption], ws, cos, [np.arange(3)] * len(df))
        frames.append(df)
    return frames, attrs


def _toy_unit_table():
    """:func:`build_units` over the synthetic draws of :func:`_toy_units` (one method "M",
    ε -0.1 for the threshold forms); returns the table and the attributions per draw."""
    from fgclip.studies.clip4dm.units import build_units
    frames, attrs = _toy_units()
    rng = np.random.default_rng(0)
    eps = {"most negative": None, "threshold": -0.1, "additive": -0.1}
    units = pd.concat([build_units(df, {"M": attrs[s]}, "M", rng, eps, -0.1) for s, df in zip(attrs, frames)],
                      ignore_index=True)
    return units, attrs


def test_build_units_and_type_tables_by_hand():
    from fgclip.studies.clip4dm.comparisons import quartile_verdicts
    from fgclip.studies.clip4dm.units import type_tables
    units, _ = _toy_unit_table()
    foil = units.foil_type.eq("shape")
    assert units.loc[foil, "hit|M"].mean() == pytest.approx(0.75)  # 3 of 4 images
    assert units.loc[~foil, "hit|M"].isna().all()
    # random content word: "red" and "circle" are content words ("a" is not) -> 1/2
    assert units.loc[foil, "hit|random content word"].eq(0.5).all()
    # threshold form: (1 - cos) * (-0.5) on found foils, 0 elsewhere
    row = units[foil].iloc[1]
    assert row["F|threshold"] == pytest.approx((1 - row.cos) * -0.5)
    la, ap = type_tables(units, ["M", "random content word"], ["most negative", "CLIPScore"], ["shape"])
    assert la.loc["M", ("LA", "shape")] == pytest.approx(0.75)
    assert ap.loc["CLIPScore", "shape"] == pytest.approx(1.0)  # originals all score higher
    from fgclip.studies.clip4dm.units import Margins
    vs = quartile_verdicts(units, "M", ["shape"], seed=0, margins=Margins(0.03, 0.02))
    assert [v.margin for v in vs] == [0.03, 0.02]
    assert [v.claim for v in vs] == ["LA on shape foils by CLIPScore quartile",
                                     "word AUC on shape foils by CLIPScore quartile"]


def test_gflop_counts_a_matrix_product_and_pairs_per_second_reports_work():
    from fgclip.studies.clip4dm.speed import gflop, pairs_per_second

    a, b = torch.randn(8, 16), torch.randn(16, 4)
    assert gflop(lambda: a @ b) == pytest.approx(2 * 8 * 16 * 4 / 1e9)
    clip = create_clip("toy-vit", pretrained="toy")
    scene = generate(ToyWorldConfig(), 2, seed=0, split="test")
    images = images_to_tensor(torch.from_numpy(np.stack([s.image for s in scene])), clip)
    out = pairs_per_second(clip, images, [s.foils[0].text for s in scene], AttributionConfig(layers=(-1,)))
    assert set(out) == {"pairs/s", "GFLOP/pair", "GFLOP/s"}
    work = out["GFLOP/pair"]
    assert work["CLIP4DM"] > 0 and work["leave-one-word-out"] > 0
    assert out["GFLOP/s"]["CLIP4DM"] == pytest.approx(work["CLIP4DM"] * out["pairs/s"]["CLIP4DM"])


def test_paper_epsilon_verdicts_by_hand():
    from fgclip import verdicts
    from fgclip.studies.clip4dm.comparisons import PAPER_EPSILONS, paper_epsilon_verdicts
    units, attrs = _toy_unit_table()
    # strict: only the -0.5 foil word (3 of 4 images; F1 1, else 0) -> 0.75; loose flags every
    # word under 0.15: F1 0.5 in 3 of 4 images, 0 in the others -> 0.375
    from fgclip.studies.clip4dm.units import Margins
    vs, flagged = paper_epsilon_verdicts(units, attrs, seed=0, margins=Margins(0.03, 0.02),
                                         eps={"strict": -0.4, "loose": 0.15})
    assert vs[0].claim == "word F1 on foil captions" and vs[0].arms == ("ε = -0.4 (strict)", "ε = 0.15 (loose)")
    assert vs[0].difference == pytest.approx(0.75 - 0.375) and vs[0].verdict == verdicts.A_BETTER
    assert flagged.loc["original captions", "loose ε = 0.15"] == 1.0
    assert flagged.loc["original captions", "strict ε = -0.4"] == 0.0
    assert flagged.loc["foil captions", "strict ε = -0.4"] == pytest.approx(0.75 / 3)
    assert list(PAPER_EPSILONS.values()) == [-5e-5, -1e-5]
