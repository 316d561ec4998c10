"""Chapter 5's table, cell by cell, on hand-made scenes whose right answer is known.

The scene: 64 x 64 images on a 4 x 4 grid (16 px cells); a circle fills the top-left
quadrant (box (0, 0, 32, 32), cells rows 0-1 x cols 0-1), a square the bottom-right one
(box (32, 32, 64, 64)); a star is never there. Four images with circle intensities
a = (3, 0, 2, 1) and square intensities b = (0, 2, 1, 3): the circle is in images 0, 2, 3,
the square in 1, 2, 3, and a method that reads the scene right ranks them by a (or b).
Every cell also gets a case where the answer is wrong (the map scored against the other
object's box, the labels complemented), with its value computed by hand.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from open_clip.modified_resnet import AttentionPool2d

from fgclip.methods.clip4dm import Attributions, clip_score, most_negative_word, pooling_relevance
from fgclip.methods.cluster_clip import cluster_clip_embeddings
from fgclip.methods.decoupling import MultiLabelCLIPHead, SemanticDecoupling
from fgclip.methods.maximage import MaxImageHeads, pair_scores, phrase_map
from fgclip.methods.sumclip import SumClipHead, frozen_attention_pool, pool_memory
from fgclip.metrics.multilabel import mean_average_precision
from fgclip.metrics.pointing import class_pointing
from fgclip.studies.crosspaper import adapters as ad
from fgclip.studies.crosspaper.tasks import (NameMaps, NameScores, WordScores, find_wrong_word, map_points,
                                             point_at_names, pointing, presence, retrieval)

HW = (64, 64)
GRID = (4, 4)
NAMES = ("circle", "square", "star")
BOXES = {"circle": [(0, 0, 32, 32)], "square": [(32, 32, 64, 64)]}
SWAPPED = {"circle": BOXES["square"], "square": BOXES["circle"]}  # each map scored on the other object
A = np.array([3.0, 0.0, 2.0, 1.0])  # circle intensity per image
B = np.array([0.0, 2.0, 1.0, 3.0])  # square intensity per image
TARGETS = np.stack([A > 0, B > 0, np.zeros(4, bool)], 1).astype(int)  # (4, 3): circle, square, star
FLIPPED = np.stack([A == 0, B == 0, np.zeros(4, bool)], 1).astype(int)  # circle only in image 1, square in 0
REVERSED = 5 / 12  # two positives at ranks 3 and 4 of 4: (1/3 + 2/4) / 2


def scene(channels: int = 3) -> torch.Tensor:
    """(4, channels, 4, 4): channel 0 = a_i on the circle's cells, channel 1 = b_i on the square's."""
    f = torch.zeros(4, channels, *GRID)
    f[:, 0, :2, :2] = torch.tensor(A, dtype=torch.float32)[:, None, None]
    f[:, 1, 2:, 2:] = torch.tensor(B, dtype=torch.float32)[:, None, None]
    return f


def peak(r: int, q: int) -> np.ndarray:
    m = np.zeros(GRID)
    m[r, q] = 1.0
    return m


def assert_ap(aps, flipped) -> None:
    """AP of circle and square: 1 on the true labels; 1/4 on the flipped ones (the lone
    positive ranked last), square too where its lone flipped positive (image 0) is last."""
    np.testing.assert_allclose(aps(TARGETS).ap[:2], [1.0, 1.0])
    np.testing.assert_allclose(aps(FLIPPED).ap[:2], flipped)
    assert np.isnan(aps(TARGETS).ap[2]) and aps(TARGETS).mean == 1.0


# ------------------------------------------------------------------------------- tasks
def test_pointing_hits_the_peaked_object_and_misses_the_other():
    maps = NameMaps(("circle", "square"), np.stack([peak(0, 1), peak(3, 2)]))
    right = point_at_names([maps], [BOXES], [HW])
    wrong = point_at_names([maps], [SWAPPED], [HW])
    np.testing.assert_array_equal(right.hit, [1, 1])
    np.testing.assert_array_equal(wrong.hit, [0, 0])
    assert right.accuracy == 1.0 and wrong.per_name() == {"circle": 0.0, "square": 0.0}
    two = point_at_names([maps, NameMaps(("circle",), peak(3, 3)[None])], [BOXES, BOXES], [HW, HW])
    np.testing.assert_array_equal(two.image, [0, 0, 1])
    assert two.name == ("circle", "square", "circle") and two.per_name() == {"circle": 0.5, "square": 1.0}


def test_pointing_cell_rule_with_tolerance_is_torchrays_class_pointing():
    maps = [NameMaps(("circle", "square"), np.stack([peak(2, 2), peak(0, 0)])),
            NameMaps(("circle",), peak(1, 3)[None])]  # (56, 24): 24 px right of the circle
    out = point_at_names(maps, [BOXES, BOXES], [HW, HW], rule="cell-centre", tolerance=15)
    points = [p for m in maps for p in map_points(m, HW, "cell-centre").values()]
    ref = class_pointing(points, [BOXES[n] for n in out.name], [HW] * 3, list(out.name), 15)
    assert list(out.hit) == ref.hits == [True, False, False]
    assert out.per_name() == ref.per_class


def test_pointing_skips_small_boxes_and_rejects_bad_input():
    small = {"circle": [(0, 0, 4, 4)], "square": BOXES["square"]}
    maps = NameMaps(("circle", "square"), np.stack([peak(0, 0), peak(3, 3)]))
    out = point_at_names([maps], [small], [HW], min_box_area=0.05)
    assert out.n_skipped == 1 and out.name == ("square",)
    with pytest.raises(ValueError, match="no boxes for the queried name 'circle'"):
        pointing([{"circle": (1.0, 1.0)}], [{"square": BOXES["square"]}], [HW])
    with pytest.raises(ValueError, match="NameMaps.names"):
        NameMaps(("circle",), np.stack([peak(0, 0), peak(1, 1)]))
    with pytest.raises(ValueError, match="NameMaps.maps"):
        NameMaps(("circle",), peak(0, 0))
    with pytest.raises(ValueError, match="rule"):
        map_points(maps, HW, "nearest")


def test_wrong_word_is_the_lowest_score_and_ties_are_reported():
    caption = WordScores(("a", "red", "star"), [0.4, 0.2, -0.3])  # 3rd word lowest
    out = find_wrong_word([caption, caption], [2, 0])
    np.testing.assert_array_equal(out.predicted, [2, 2])
    np.testing.assert_array_equal(out.correct, [1.0, 0.0])
    assert out.accuracy == 0.5 and not out.tied.any()
    tie = WordScores(("a", "b", "c"), [0.1, 0.1, np.inf])
    picks = {int(find_wrong_word([tie], [0], np.random.default_rng(s)).predicted[0]) for s in range(20)}
    assert picks == {0, 1} and find_wrong_word([tie], [0]).tied[0]
    with pytest.raises(ValueError, match="target"):
        find_wrong_word([caption], [3])
    with pytest.raises(ValueError, match="WordScores.scores"):
        WordScores(("a", "b"), [np.inf, np.inf])


def test_presence_and_retrieval_ap_by_hand():
    s = NameScores(("circle", "square"), np.array([[4.0, 1.0], [3.0, 2.0], [2.0, 3.0], [1.0, 4.0]]))
    first = np.array([[1, 0], [1, 0], [0, 1], [0, 1]])  # circle's positives rank first, square's too
    np.testing.assert_allclose(presence(s, first).ap, [1.0, 1.0])
    np.testing.assert_allclose(presence(s, 1 - first).ap, [REVERSED, REVERSED])
    assert math.isclose(presence(s, 1 - first).mean, mean_average_precision(s.scores, 1 - first), rel_tol=1e-6)
    np.testing.assert_allclose(retrieval(s, first).ap, [1.0, 1.0])
    np.testing.assert_allclose(retrieval(s, 1 - first).ap, [REVERSED, REVERSED])
    np.testing.assert_allclose(retrieval(s, 1 - first, k=3).ap, [1 / 3, 1 / 3])  # one hit at rank 3
    unknown = np.where(np.arange(4)[:, None] == 0, -1, 1 - first)  # image 0 unknown: its label ignored
    np.testing.assert_allclose(presence(s, unknown).ap, [(1 / 2 + 2 / 3) / 2, 1 / 3])
    with pytest.raises(ValueError, match="targets"):
        presence(s, first[:3])
    with pytest.raises(ValueError, match="NameScores.names"):
        NameScores(("circle",), s.scores)
    assert s.select(["square"]).scores[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]


# ---------------------------------------------------------------------- MaxImage (ch1)
def identity_heads(score: str) -> MaxImageHeads:
    """Both branches x -> I GELU(I x): a one-hot feature keeps its direction."""
    heads = MaxImageHeads(3, 3, 3, score=score)
    with torch.no_grad():
        for lin in (*heads.image[::2], *heads.text[::2]):
            lin.weight.copy_(torch.eye(3))
            lin.bias.zero_()
    return heads


WORDS = {n: torch.eye(3)[[k]] for k, n in enumerate(NAMES)}  # (1, 3) one-hot word feature per name


def test_maximage_pointing():
    heads = identity_heads("cosine")
    maps = ad.maximage_name_maps(heads, scene()[2], {n: WORDS[n] for n in ("circle", "square")})
    v = heads.image_vectors(scene()[2:3])[0]
    torch.testing.assert_close(torch.from_numpy(maps["square"]).float(), phrase_map(heads, v, WORDS["square"]))
    assert point_at_names([maps], [BOXES], [HW]).accuracy == 1.0
    assert point_at_names([maps], [SWAPPED], [HW]).accuracy == 0.0


def test_maximage_misalignment():
    heads = identity_heads("cosine")
    feats, x = scene()[2], torch.eye(3)  # image 2 holds a circle and a square, no star
    out = ad.maximage_word_scores(heads, feats, x, NAMES)
    np.testing.assert_allclose(out.scores, [1.0, 1.0, 0.0], atol=1e-6)  # the star's best region scores 0
    s = pair_scores(heads.image_vectors(feats[None]), heads.word_vectors(x)[None], torch.ones(1, 3, dtype=torch.bool))
    assert math.isclose(out.scores.mean(), float(s.detach()), rel_tol=1e-6)  # the MaxImage score S(I, T)
    np.testing.assert_array_equal(find_wrong_word([out, out], [2, 0]).correct, [1.0, 0.0])


def test_maximage_adapters_read_given_image_vectors():
    """``vectors=`` (the caller's image_vectors, computed once per seed) is used, not recomputed:
    the same values when they are the image's own, other values when they are another image's."""
    heads, feats = identity_heads("cosine"), scene()
    v = heads.image_vectors(feats).detach()  # (N, E, h, w)
    words = {n: WORDS[n] for n in ("circle", "square")}
    own = ad.maximage_name_maps(heads, feats[2], words, vectors=v[2])
    np.testing.assert_allclose(own.maps, ad.maximage_name_maps(heads, feats[2], words).maps, atol=1e-6)
    other = ad.maximage_name_maps(heads, feats[2], words, vectors=v[0])
    np.testing.assert_allclose(other.maps, ad.maximage_name_maps(heads, feats[0], words).maps, atol=1e-6)
    x = torch.eye(3)
    np.testing.assert_allclose(ad.maximage_word_scores(heads, feats[2], x, NAMES, vectors=v[2]).scores,
                               ad.maximage_word_scores(heads, feats[2], x, NAMES).scores, atol=1e-6)
    np.testing.assert_allclose(ad.maximage_word_scores(heads, feats[2], x, NAMES, vectors=v[0]).scores,
                               ad.maximage_word_scores(heads, feats[0], x, NAMES).scores, atol=1e-6)


@pytest.mark.parametrize("task", ["presence", "retrieval"])
def test_maximage_presence_and_retrieval(task):
    heads = identity_heads("dot")
    scores = ad.adapter("maximage", task)(heads, scene(), WORDS)
    gelu = lambda x: x * 0.5 * (1 + torch.erf(torch.as_tensor(x) / math.sqrt(2)))  # noqa: E731
    np.testing.assert_allclose(scores.scores[:, 0], gelu(1.0) * gelu(torch.tensor(A)), rtol=1e-5)
    read = presence if task == "presence" else retrieval
    assert_ap(lambda t: read(scores, t), [0.25, 0.25])


# ----------------------------------------------------------------------- CLIP4DM (ch2)
def test_clip4dm_pointing_drops_the_mean_token_and_lays_cells_row_major():
    rel = {"circle": np.r_[100.0, peak(1, 0).ravel()], "square": np.r_[100.0, peak(2, 3).ravel()]}
    maps = ad.clip4dm_name_maps(rel, GRID)
    assert maps["square"][2, 3] == 1.0 and maps["square"].sum() == 1.0  # the mean token's value is gone
    assert point_at_names([maps], [BOXES], [HW]).accuracy == 1.0
    assert point_at_names([maps], [SWAPPED], [HW]).accuracy == 0.0
    with pytest.raises(ValueError, match="relevance"):
        ad.clip4dm_name_maps({"circle": np.zeros(16)}, GRID)


@pytest.mark.parametrize("relu", [False, True], ids=["CLIP4DM's rule", "GAE"])
def test_pooling_relevance_is_the_closed_form_gradient_times_attention(relu):
    """On a random AttentionPool2d: the per-head attention from torch's own multi-head attention,
    e = pool(F) from open_clip's forward, and ∂s/∂A^h_k = (W_c^h v^h_k) . (t̂ - s ê) / ||e|| by hand;
    with relu each head's product is clamped at 0 before the head mean."""
    torch.manual_seed(0)
    pool = AttentionPool2d(2, 8, 2, 6).eval()  # 2x2 map, C = 8, H = 2 heads of d = 4, D = 6
    fmap, text = torch.randn(3, 8, 2, 2), torch.randn(4, 6)  # (B, C, h, w), (T, D)
    rel = pooling_relevance(pool, fmap, text, relu)  # (B, T, 1 + P)
    assert rel.shape == (3, 4, 5)
    tokens = fmap.flatten(2).permute(2, 0, 1)  # (P, B, C)
    tokens = torch.cat([tokens.mean(0, keepdim=True), tokens]) + pool.positional_embedding[:, None]  # (L, B, C)
    _, attn = F.multi_head_attention_forward(
        query=tokens[:1], key=tokens, value=tokens, embed_dim_to_check=8, num_heads=2, in_proj_weight=None,
        in_proj_bias=torch.cat([pool.q_proj.bias, pool.k_proj.bias, pool.v_proj.bias]), bias_k=None, bias_v=None,
        add_zero_attn=False, dropout_p=0.0, out_proj_weight=pool.c_proj.weight, out_proj_bias=pool.c_proj.bias,
        use_separate_proj_weight=True, q_proj_weight=pool.q_proj.weight, k_proj_weight=pool.k_proj.weight,
        v_proj_weight=pool.v_proj.weight, need_weights=True, average_attn_weights=False)
    attn = attn[:, :, 0]  # (B, H, L)
    with torch.no_grad():
        e = pool(fmap)  # (B, D)
        v = pool.v_proj(tokens).permute(1, 0, 2).reshape(3, 5, 2, 4)  # (B, L, H, d)
        w_c = pool.c_proj.weight.reshape(6, 2, 4)  # (D, H, d)
        contrib = torch.einsum("blhd,ehd->bhle", v, w_c)  # W_c^h v^h_k: (B, H, L, D)
        e_hat, t_hat = F.normalize(e, dim=-1), F.normalize(text, dim=-1)
        s = e_hat @ t_hat.T  # (B, T)
        ds_de = (t_hat[None] - s[..., None] * e_hat[:, None]) / e.norm(dim=-1)[:, None, None]  # (B, T, D)
        grad = torch.einsum("bhle,bte->bthl", contrib, ds_de)  # (B, T, H, L)
        cam = grad * attn[:, None]  # (B, T, H, L)
        want = (cam.clamp(min=0) if relu else cam).mean(2)
    assert (want < 0).any() != relu  # the two rules differ on this example
    torch.testing.assert_close(rel, want, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="positions"):
        pooling_relevance(pool, torch.randn(1, 8, 3, 3), text)  # a 3x3 map for a 2x2 pooling


def test_pooling_relevance_peaks_on_the_cell_that_holds_the_name():
    """Uniform attention (W_q = 0), identity projections, no position: e is the mean token, and the
    cell whose feature is the text's direction is the one whose weight raises s; it is the map's argmax."""
    pool = AttentionPool2d(4, 16, 1, 16)
    with torch.no_grad():
        for proj in (pool.v_proj, pool.c_proj):
            proj.weight.copy_(torch.eye(16))
            proj.bias.zero_()
        pool.q_proj.weight.zero_()
        pool.positional_embedding.zero_()
    fmap = torch.zeros(1, 16, 4, 4)
    for k in range(16):  # cell k holds direction k, scaled so every cell has the same norm
        fmap[0, k, k // 4, k % 4] = 1.0
    text = torch.eye(16)[[6]]  # the text of cell (1, 2)
    rel = pooling_relevance(pool, fmap, text)[0, 0]  # (1 + 16,)
    assert int(rel[1:].argmax()) == 6 and (rel[1:][torch.arange(16) != 6] < 0).all()
    maps = ad.clip4dm_name_maps({"circle": rel}, (4, 4))
    box = {"circle": [(2 * 16, 1 * 16, 3 * 16, 2 * 16)]}  # (x0, y0, x1, y1) of cell (row 1, column 2) on 64 px
    assert point_at_names([maps], [box], [(64, 64)]).accuracy == 1.0


def test_clip4dm_misalignment_maps_the_papers_pick_to_its_whitespace_word():
    captions = ["a dog, on grass.", "red,blue star ."]
    att = Attributions([["a", "dog", "on", "grass"], ["red", "blue", "star"]],
                       [np.array([0.1, 0.2, -0.5, 0.3]), np.array([0.2, -0.4, 0.1])], np.zeros(2),
                       [np.array([0, 1, 2, 3]), np.array([0, 0, 1])])
    out = ad.clip4dm_word_scores(att, captions)
    assert out[1].words == ("red,blue", "star", ".")
    np.testing.assert_array_equal(out[1].scores, [-0.4, 0.1, np.inf])  # min over "red", "blue"; "." none
    paper = [int(src[most_negative_word(w)]) for w, src in zip(att.w, att.source)]
    res = find_wrong_word(out, [2, 0])
    assert list(res.predicted) == paper == [2, 0] and res.accuracy == 1.0
    assert find_wrong_word(out, [1, 1]).accuracy == 0.0
    with pytest.raises(ValueError, match="sources"):
        ad.clip4dm_word_scores(Attributions(att.words, att.w, att.cos), captions)


def test_clip4dm_presence_is_clipscore():
    image = torch.tensor(np.stack([A, B, np.zeros(4)], 1), dtype=torch.float32)  # (4, 3)
    scores = ad.clip4dm_name_scores(image, torch.eye(3), NAMES)
    np.testing.assert_allclose(scores.scores[:, 0], clip_score(A / np.hypot(A, B)), rtol=1e-6)
    np.testing.assert_array_equal(scores.scores[:, 2], 0.0)  # the star: every cosine 0
    assert ad.name_texts(["star"]) == ["A photo depicts a star"]
    assert_ap(lambda t: presence(scores, t), [0.25, 0.25])


def test_clip4dm_presence_and_retrieval_are_dashes_with_their_reason():
    assert set(ad.NOT_APPLICABLE) == {("clip4dm", "presence"), ("clip4dm", "retrieval")}
    for task in ("presence", "retrieval"):
        with pytest.raises(ad.NotApplicable, match="CLIPScore"):
            ad.adapter("clip4dm", task)
    with pytest.raises(ValueError, match="method"):
        ad.adapter("gradcam", "pointing")
    filled = {(m, t) for m in ad.METHODS for t in ad.TASKS} - set(ad.NOT_APPLICABLE)
    assert set(ad.ADAPTERS) == filled and all(callable(ad.adapter(m, t)) for m, t in filled)


# ---------------------------------------------------------------- SUM-CLIP / FOR (ch3)
def circle_pool() -> AttentionPool2d:
    """W_q = W_k = 2 I, W_v = I, no position: CLIP's mean token attends to the cells of the
    one non-zero feature (the circle), output projection to the 3-d joint space."""
    torch.manual_seed(0)
    pool = AttentionPool2d(spacial_dim=4, embed_dim=8, num_heads=2, output_dim=3)
    with torch.no_grad():
        pool.positional_embedding.zero_()
        for proj, s in ((pool.q_proj, 2.0), (pool.k_proj, 2.0), (pool.v_proj, 1.0)):
            proj.weight.copy_(s * torch.eye(8))
            proj.bias.zero_()
    return pool.eval()


def test_sumclip_pointing_through_the_real_head():
    pool = circle_pool()
    fmap = torch.zeros(1, 8, *GRID)
    fmap[0, 0, :2, :2] = 4.0  # the circle's cells
    head = SumClipHead(pool, n_queries=2, d_model=8, n_heads=2)  # U = 0: every slot is CLIP's mean token
    emb, attn = head(pool_memory(pool, fmap))
    maps = ad.sumclip_name_maps(emb[0], attn[0], torch.eye(3)[:2], ["circle", "square"], GRID)
    assert point_at_names([NameMaps(("circle",), maps["circle"][None])], [BOXES], [HW]).accuracy == 1.0
    assert point_at_names([NameMaps(("square",), maps["square"][None])], [BOXES], [HW]).accuracy == 0.0
    # which slot: the one whose embedding matches the name (hand-made native output)
    emb2 = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # slot 0 = square, slot 1 = circle
    attn2 = torch.from_numpy(np.stack([np.r_[0.5, peak(3, 3).ravel()], np.r_[0.5, peak(0, 0).ravel()]]))
    maps2 = ad.sumclip_name_maps(emb2, attn2, torch.eye(3)[:2], ["circle", "square"], GRID)
    assert point_at_names([maps2], [BOXES], [HW]).accuracy == 1.0
    assert point_at_names([maps2], [SWAPPED], [HW]).accuracy == 0.0


def test_sumclip_maps_are_the_plain_poolings_attention_of_the_matched_slot():
    torch.manual_seed(1)
    pool = AttentionPool2d(spacial_dim=4, embed_dim=8, num_heads=2, output_dim=3).eval()
    head = SumClipHead(pool, n_queries=3, d_model=8, n_heads=2)
    torch.nn.init.normal_(head.up.weight, std=0.5)  # slots that differ
    fmap, text = torch.randn(2, 8, *GRID), torch.randn(3, 3)
    mem = pool_memory(pool, fmap)
    with torch.no_grad():
        emb, attn = head(mem)
        ref_emb, ref_attn = frozen_attention_pool(pool, fmap, head.tokens(mem))
    for b in range(2):
        maps = ad.sumclip_name_maps(emb[b], attn[b], text, NAMES, GRID)
        best = (F.normalize(text, dim=-1) @ F.normalize(ref_emb[b], dim=-1).T).argmax(1)
        np.testing.assert_allclose(maps.maps, ref_attn[b, best, 1:].reshape(3, *GRID).numpy(), atol=1e-5)
    scores = ad.sumclip_name_scores(emb, text, NAMES)
    direct = torch.einsum("cd,bnd->bcn", F.normalize(text, dim=-1), emb).max(-1).values
    np.testing.assert_allclose(scores.scores, direct.numpy(), atol=1e-6)


def test_sumclip_misalignment():
    slots = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # a circle slot and a square slot
    out = ad.sumclip_word_scores(slots, torch.eye(3), NAMES)
    np.testing.assert_allclose(out.scores, [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(find_wrong_word([out, out], [2, 1]).correct, [1.0, 0.0])


@pytest.mark.parametrize("task", ["presence", "retrieval"])
def test_sumclip_presence_and_retrieval_set_score(task):
    ones = torch.ones(4)
    emb = torch.stack([torch.stack([torch.tensor(A).float(), 0 * ones, ones], 1),
                       torch.stack([0 * ones, torch.tensor(B).float(), ones], 1)], 1)  # (4, 2, 3)
    scores = ad.adapter("sumclip", task)(emb, torch.eye(3), NAMES)
    np.testing.assert_allclose(scores.scores[:, 0], A / np.sqrt(A ** 2 + 1), rtol=1e-6)  # max_n cos
    read = presence if task == "presence" else retrieval
    assert_ap(lambda t: read(scores, t), [0.25, 0.25])


def test_cluster_clip_reference_is_the_set_score_on_cluster_embeddings():
    dense = scene()[[0]] + 0.01  # circle image: circle cells vs the rest
    emb = cluster_clip_embeddings(dense, dense.mean((2, 3)), k=2)
    scores = ad.sumclip_name_scores(emb, torch.eye(3), NAMES)
    assert scores.scores[0, 0] > 0.99 and scores.scores[0, 1] < 0.6


# ------------------------------------------------------------------- decoupling (ch4)
def decoupling_head(scoring: str = "softmax") -> MultiLabelCLIPHead:
    """U = V = P = I, w_a = 1, no biases: a_{c,wh} = softmax_wh tanh(f_wh[c]), category c attends
    to its own channel; word vectors and text features one-hot."""
    sd = SemanticDecoupling(3, 3, rank=3, out_dim=3)
    with torch.no_grad():
        for lin in (sd.U, sd.V, sd.P):
            lin.weight.copy_(torch.eye(3))
        sd.P.bias.zero_()
        sd.w_a.weight.fill_(1.0)
        sd.w_a.bias.zero_()
    return MultiLabelCLIPHead(torch.eye(3), torch.eye(3), None, sd, tau=0.1, scoring=scoring).eval()


def decoupled(scoring: str = "softmax"):
    with torch.no_grad():
        return decoupling_head(scoring)(scene(), scene().mean((2, 3)))


def test_decoupling_pointing():
    out = decoupled()
    maps = ad.decoupling_name_maps(out, 2, NAMES, ["circle", "square"])
    np.testing.assert_array_equal(maps.maps, out.attention[2, :2].numpy())
    assert point_at_names([maps], [BOXES], [HW]).accuracy == 1.0
    assert point_at_names([maps], [SWAPPED], [HW]).accuracy == 0.0
    with pytest.raises(ValueError, match="not among the head's categories"):
        ad.decoupling_name_maps(out, 2, NAMES, ["triangle"])


def test_decoupling_misalignment():
    out = decoupled()
    words = ("a", "star", "and", "a", "circle")
    cats = {"circle": "circle", "star": "star"}
    scores = ad.decoupling_word_scores(out, 0, NAMES, words, cats)  # image 0 holds only the circle
    np.testing.assert_array_equal(np.isinf(scores.scores), [True, False, True, True, False])
    assert scores.scores[1] == pytest.approx(float(out.scores[0, 2]))
    np.testing.assert_array_equal(find_wrong_word([scores, scores], [1, 4]).correct, [1.0, 0.0])


def test_decoupling_presence_is_the_papers_p():
    out = decoupled("softmax")
    scores = ad.decoupling_presence_scores(out, NAMES, "softmax")
    np.testing.assert_allclose(np.exp(scores.scores), out.probs.numpy(), rtol=1e-5)
    assert_ap(lambda t: presence(scores, t), [0.25, 0.25])


def test_decoupling_retrieval_is_the_category_score():
    out = decoupled("softmax")
    scores = ad.decoupling_retrieval_scores(out, NAMES)
    np.testing.assert_array_equal(scores.scores, out.scores.numpy())
    assert_ap(lambda t: retrieval(scores, t), [0.25, 0.25])


# ------------------------------------------------------------------------- references
def test_references():
    dense = scene()[2]  # circle and square
    maps = ad.dense_similarity_maps(dense + 0.01, torch.eye(3)[:2], ["circle", "square"])
    assert point_at_names([maps], [BOXES], [HW]).accuracy == 1.0
    assert point_at_names([maps], [SWAPPED], [HW]).accuracy == 0.0
    centre = ad.centre_points(["circle", "star"], HW)
    out = pointing([centre], [{"circle": BOXES["circle"], "star": [(24, 24, 40, 40)]}], [HW], inclusive=False)
    np.testing.assert_array_equal(out.hit, [0.0, 1.0])
    image = torch.tensor(np.stack([A, B, np.zeros(4)], 1), dtype=torch.float32)
    glob = ad.global_scores(image, torch.eye(3), NAMES)
    np.testing.assert_allclose(glob.scores[:, 0], A / np.hypot(A, B), rtol=1e-6)
    rng = np.random.default_rng(0)
    picks = {find_wrong_word([ad.random_word_scores(["a", "red", "star"], [False, True, True], rng)], [1]).predicted[0]
             for _ in range(30)}
    assert picks == {1, 2}


def test_adapters_name_their_bad_argument():
    att = Attributions([["a", "dog"]], [np.array([0.1, 0.2])], np.zeros(1), [np.array([0, 5])])
    with pytest.raises(ValueError, match="att.source"):
        ad.clip4dm_word_scores(att, ["a dog"])
    with pytest.raises(ValueError, match="attn"):
        ad.sumclip_name_maps(torch.eye(3), torch.zeros(2, 17), torch.eye(3), NAMES, GRID)
    with pytest.raises(ValueError, match="feats"):
        ad.maximage_name_scores(identity_heads("dot"), scene()[0], WORDS)
    with pytest.raises(ValueError, match="word_category"):
        ad.decoupling_word_scores(decoupled(), 0, NAMES, ["a", "dog"], {"dog": "dog"})
    out = decoupled()
    with pytest.raises(ValueError, match="out.attention"):
        ad.decoupling_name_maps(type(out)(out.scores, out.probs, None), 0, NAMES, ["circle"])
