"""Chapter 3 protocol: folds, τ scaling, controls, AP conventions, head settings."""
import numpy as np
import pandas as pd
import pytest
import torch
from open_clip.modified_resnet import AttentionPool2d

from fgclip.methods.sumclip import SumClipHead, frozen_attention_pool, pool_memory
from fgclip.metrics.object_retrieval import average_precision_at_k, per_category_ap
from fgclip.studies.for_retrieval.folds import (acceptance, category_folds, choose_k, fold_units, novel_matrix,
                                                score_rows, unit_matrix, vocabulary_scaled_tau)


def test_folds_are_disjoint_cover_everything_and_follow_the_seed():
    cats = [f"c{i}" for i in range(16)]
    folds = category_folds(cats, 4, seed=0)
    assert len(folds) == 4 and all(len(f) == 4 for f in folds)
    assert sorted(c for f in folds for c in f) == sorted(cats)
    assert category_folds(cats, 4, seed=0) == folds
    assert category_folds(cats, 4, seed=1) != folds
    with pytest.raises(ValueError, match="n_folds"):
        category_folds(cats, 1, seed=0)


def test_vocabulary_scaled_tau_keeps_the_multiple_of_one_over_v():
    assert vocabulary_scaled_tau(5e-4, 21_843) == pytest.approx(5e-4)
    tau = vocabulary_scaled_tau(5e-4, 138)
    assert tau * 138 == pytest.approx(5e-4 * 21_843)
    with pytest.raises(ValueError, match="vocab_size"):
        vocabulary_scaled_tau(5e-4, 0)


def test_acceptance_counts_names_per_image_and_precision():
    scores = torch.tensor([[0.9, 0.05, 0.05], [0.2, 0.7, 0.1]])
    truth = torch.tensor([[True, False, False], [False, False, True]])
    a = acceptance(scores, truth, 0.15)
    assert a["accepted/image"] == 1.5 and a["share of vocabulary"] == pytest.approx(0.5)
    assert a["precision"] == pytest.approx(1 / 3)


def test_ap_normalisations_hand_computed():
    # 3 relevant images in total; the top 2 holds one hit at rank 2
    scores = torch.tensor([[4.0, 3.0, 2.0, 1.0]])
    relevant = torch.tensor([[False, True, True, True]])
    hits = average_precision_at_k(scores, relevant, 2)
    mink = average_precision_at_k(scores, relevant, 2, "min_k_r")
    assert hits.item() == pytest.approx(0.5)  # (1/2) / 1 hit
    assert mink.item() == pytest.approx(0.25)  # (1/2) / min(2, 3)
    full = average_precision_at_k(scores, relevant, None)
    assert average_precision_at_k(scores, relevant, None, "min_k_r").item() == pytest.approx(full.item())
    with pytest.raises(ValueError, match="normalise"):
        average_precision_at_k(scores, relevant, 2, "other")


def test_min_k_r_is_monotone_where_hits_is_not():
    relevant = torch.tensor([[True, True, True, False, False, False]])
    one_hit = torch.tensor([[6.0, 1, 1, 5, 4, 3]])  # one hit at rank 1, the others below k
    three_hits = torch.tensor([[6.0, 3, 2, 5, 1, 0]])  # hits at ranks 1, 3, 4
    k = 4
    assert average_precision_at_k(one_hit, relevant, k) > average_precision_at_k(three_hits, relevant, k)
    assert average_precision_at_k(one_hit, relevant, k, "min_k_r") < \
        average_precision_at_k(three_hits, relevant, k, "min_k_r")


def test_per_category_ap_marks_empty_queries_nan():
    text = torch.eye(3)
    emb = torch.eye(3)[:, None]  # image i holds direction i
    relevant = torch.tensor([[True, False, False], [False, True, False], [False, False, False]])
    ap = per_category_ap(text, emb, relevant)
    assert ap["AP"][:2].tolist() == [1.0, 1.0] and np.isnan(ap["AP"][2].item())


def test_score_rows_and_novel_matrix():
    text = torch.eye(2)
    emb = torch.eye(2)[:, None]
    relevant = torch.eye(2, dtype=torch.bool)
    rows = []
    for s in (0, 1):
        rows += score_rows("A", 0, s, text, emb, relevant, ["x", "y"], novel=["x"])
        rows += score_rows("A", 1, s, text, emb.flip(0), relevant, ["x", "y"], novel=["y"])
    m = novel_matrix(pd.DataFrame(rows), "A", "AP", [0, 1], ["x", "y"])
    assert m.shape == (2, 2)
    assert m[:, 0].tolist() == [1.0, 1.0] and m[:, 1].tolist() == [0.5, 0.5]  # y ranked second in fold 1
    with pytest.raises(ValueError, match="arm"):
        novel_matrix(pd.DataFrame(rows), "B", "AP", [0, 1], ["x", "y"])


def test_fold_units_cluster_by_the_fold_head():
    folds = [["x"], ["y"]]
    novel, clusters = fold_units(folds, ["x", "y"], "novel")
    assert novel == [(0, "x"), (1, "y")] and clusters == [0, 1]
    base, clusters = fold_units(folds, ["x", "y"], "base")
    assert base == [(0, "y"), (1, "x")] and clusters == [0, 1]
    text, emb, relevant = torch.eye(2), torch.eye(2)[:, None], torch.eye(2, dtype=torch.bool)
    rows = []
    for s in (0, 1):
        rows += score_rows("A", 0, s, text, emb, relevant, ["x", "y"], novel=["x"])
        rows += score_rows("A", 1, s, text, emb.flip(0), relevant, ["x", "y"], novel=["y"])
    m = unit_matrix(pd.DataFrame(rows), "A", "AP", [0, 1], novel)
    assert m.shape == (2, 2) and m[:, 0].tolist() == [1.0, 1.0] and m[:, 1].tolist() == [0.5, 0.5]
    with pytest.raises(ValueError, match=r"'A' has no rows for seed\(s\) \[2\]"):  # not silently NaN
        unit_matrix(pd.DataFrame(rows), "A", "AP", [0, 2], novel)
    with pytest.raises(ValueError, match="role"):
        fold_units(folds, ["x", "y"], "other")


def test_choose_k_prefers_the_better_and_smaller_k():
    torch.manual_seed(0)
    dense = torch.randn(6, 8, 2, 2)
    pooled = torch.nn.functional.normalize(torch.randn(6, 8), dim=-1)
    text = torch.nn.functional.normalize(torch.randn(2, 8), dim=-1)
    relevant = torch.tensor([[True, False, True, False, False, False], [False, True, False, False, True, False]])
    k, table = choose_k(dense, pooled, text, relevant, [1, 2, 4], seed=0)
    assert set(table) == {1, 2, 4} and table[k] == max(table.values())
    assert k == min(c for c in table if table[c] == table[k])


def _pool():
    torch.manual_seed(0)
    return AttentionPool2d(spacial_dim=3, embed_dim=32, num_heads=4, output_dim=16).eval()


def test_head_without_residual_pools_its_own_tokens():
    pool = _pool()
    head = SumClipHead(pool, n_queries=3, d_model=16, n_heads=2, residual=False)
    torch.nn.init.normal_(head.up.weight, std=0.1)
    fmap = torch.randn(2, 32, 3, 3)
    mem = pool_memory(pool, fmap)
    emb, _ = head(mem)
    ref, _ = frozen_attention_pool(pool, fmap, head.tokens(mem))
    torch.testing.assert_close(emb, torch.nn.functional.normalize(ref, dim=-1), rtol=1e-4, atol=1e-5)


def test_trainable_output_projection_is_a_copy():
    pool = _pool()
    before = pool.c_proj.weight.clone()
    head = SumClipHead(pool, n_queries=2, d_model=16, n_heads=2, train_out=True)
    emb, _ = head(pool_memory(pool, torch.randn(2, 32, 3, 3)))
    emb.sum().backward()
    assert head.out_proj.weight.grad is not None and pool.c_proj.weight.grad is None
    with torch.no_grad():
        head.out_proj.weight.add_(1.0)
    torch.testing.assert_close(pool.c_proj.weight, before)


def test_teacher_arms_oracle_removes_only_wrong_labels_and_fixed_is_optional():
    from fgclip.studies.for_retrieval.folds import teacher_arms
    scores = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]])
    truth = torch.tensor([[True, False, False], [False, False, True]])
    keep = torch.tensor([True, True, False])
    text = torch.eye(3)
    taus = {"held-out": 0.25, "held-out, names removed": 0.25, "scaled": 0.4}
    arms = teacher_arms(scores, scores[:, keep], truth, taus, text, keep)
    assert "FOR, fixed τ (paper)" not in arms
    assert [t.tolist() for t in arms["FOR"][0]] == [[0, 1], [1, 2]]
    assert [t.tolist() for t in arms["FOR, wrong labels removed (oracle)"][0]] == [[0], [2]]
    assert [t.tolist() for t in arms["planted teacher (correct labels)"][0]] == [[0], [2]]
    assert arms["FOR, novel names removed"][1].shape == (2, 3)
    assert "FOR, fixed τ (paper)" in teacher_arms(scores, scores[:, keep], truth, {**taus, "fixed": 0.01},
                                                  text, keep)


@pytest.fixture(scope="module")
def small_study():
    """40 training and 24 gallery scenes, encoded once by the committed toy ResNet CLIP."""
    from fgclip.models import create_clip
    from fgclip.toyworld import ToyWorldConfig, generate
    from fgclip.toyworld.world import open_vocabulary
    from fgclip.studies.for_retrieval.data import for_data
    world = ToyWorldConfig()
    train, gallery = generate(world, 40, seed=0, split="train"), generate(world, 24, seed=0, split="test")
    categories = sorted({c for s in train + gallery for c in s.labels})
    data = for_data(create_clip("toy-rn", pretrained="toy"), np.stack([s.image for s in train]),
                    np.stack([s.image for s in gallery]), [s.labels for s in train], [s.labels for s in gallery],
                    categories, open_vocabulary(world.categories), "a {}", 0.25, seed=0)
    return data, train


def test_for_data_splits_the_training_images_and_encodes_once(small_study):
    data, train = small_study
    assert len(data.val_idx) == 10 and len(data.fit_idx) == 30
    assert set(data.val_idx.tolist()).isdisjoint(data.fit_idx.tolist())
    assert data.truth.shape == (40, len(data.vocab)) and data.relevant.shape == (len(data.categories), 24)
    assert data.truth[0, data.vocab.index(sorted(train[0].labels)[0])]
    assert data.query_text.shape[0] == len(data.categories) and data.logit_scale > 1


def test_prepare_fold_chooses_on_validation_and_every_arm_is_selected_and_trained(small_study):
    from fgclip.studies.for_retrieval import folds as ff
    data, _ = small_study
    novel = data.categories[:3]
    fold = ff.prepare_fold(data, 0, novel, [1, 2], 5e-4, seed=0)
    assert fold.k in (1, 2) and fold.base == [c for c in data.categories if c not in novel]
    assert len(fold.supervised) == len(data.fit_idx)
    fit_labels = [data.train_labels[i] for i in data.fit_idx]
    assert [{fold.base[j] for j in t.tolist()} for t in fold.supervised] == [x - set(novel) for x in fit_labels]
    assert "fixed" not in fold.taus  # 5e-4 accepts nearly every name of a 138-name vocabulary
    assert [a["τ"] for a in fold.acceptance] == ["held-out τ", "fixed τ (paper)", "τ scaled to V"]
    assert fold.acceptance[1]["share of vocabulary"] > 0.5
    planted = fold.teacher[ff.PLANTED][0]
    assert [set(t.tolist()) for t in planted] == [set(r.nonzero().flatten().tolist()) for r in data.truth[data.fit_idx]]
    from fgclip.studies.for_retrieval import protocol as fp
    from fgclip.train.selection import SelectionGrid
    head_kw = dict(n_queries=3, n_layers=1, d_model=8, residual=False, train_out=True)
    train_kw = dict(batch_size=16, precision="fp32")
    grid = SelectionGrid(lrs=(1e-3, 3e-3, 1e-2), seeds=(0, 1), epochs=2)
    schedules, kept = fp.select_schedules(data, fold, grid, head_kw, train_kw)
    trained = set(fp.arm_settings(fold, head_kw))
    assert set(schedules) == trained and {ff.SUPERVISED, ff.FOR, ff.PAPER} <= trained
    assert all(s.lr in grid.lrs and 1 <= s.epochs <= 2 and len(s.curves[s.lr]) == 2 for s in schedules.values())
    assert set(kept) == {(a, s) for a in trained for s in (0, 1)}
    runs, attn = fp.fold_runs(data, fold, 0, schedules, head_kw, train_kw, kept)
    assert set(runs) == trained | {ff.GLOBAL, ff.CLUSTER, ff.UNTRAINED, ff.GLOBAL_SLOT}
    assert runs[ff.FOR].shape == (24, 3, data.query_text.shape[1]) and attn.shape[:2] == (24, 3)
    assert runs[ff.CLUSTER].shape[1] == fold.k + 1
    torch.testing.assert_close(runs[ff.GLOBAL_SLOT], torch.cat([runs[ff.GLOBAL], runs[ff.FOR]], 1))
    # CLIP scores by cosine: a raw global embedding (norm ~40 on the toy CLIP) would win every max by length
    torch.testing.assert_close(runs[ff.GLOBAL].norm(dim=-1), torch.ones(24, 1))
    torch.testing.assert_close(runs[ff.GLOBAL][:, 0], torch.nn.functional.normalize(data.gallery.pooled.float(), dim=-1))
    assert not torch.allclose(runs[ff.SUPERVISED], runs[ff.FOR])  # the pseudo-label loss changed something
    # a kept head is the run a fresh training at its schedule gives (same seed, same batches)
    sel = schedules[ff.FOR]
    labels, kw = fp.arm_settings(fold, head_kw)[ff.FOR]
    fresh = fp.train_run(data, fold, labels, kw, 1, sel.lr, sel.epochs, train_kw).head
    torch.testing.assert_close(fp.embed(fresh, data.gallery.memory)[0], fp.embed(kept[ff.FOR, 1], data.gallery.memory)[0])
    # the A/A control's runs are supervised only at its schedule from other seeds: seed 1's run is the kept head's
    a_a = fp.a_a_runs(data, fold, [1, 2], schedules[ff.SUPERVISED], head_kw, train_kw)
    torch.testing.assert_close(a_a[1], fp.embed(kept[ff.SUPERVISED, 1], data.gallery.memory)[0])
    assert not torch.allclose(a_a[2], a_a[1])  # another seed, another head


def test_run_study_gives_each_a_a_side_its_own_selection(small_study):
    """Side B of the A/A chooses its schedule on its own selection seeds and trains its own seeds;
    side A's rows at the chapter's seeds are supervised only's own."""
    from fgclip.studies.for_retrieval import folds as ff, protocol as fp
    from fgclip.train.selection import SelectionGrid
    data, _ = small_study
    folds = [data.categories[:3], data.categories[3:6]]
    head_kw = dict(n_queries=3, n_layers=1, d_model=8, residual=False, train_out=True)
    train_kw = dict(batch_size=16, precision="fp32")
    grid = SelectionGrid(lrs=(1e-3, 3e-3, 1e-2), seeds=(0, 1), epochs=2)
    study = fp.run_study(data, folds, [0, 1], grid, head_kw, train_kw, [1, 2], 5e-4, 0, a_a_per_side=3)
    aa, side_b = study.a_a, study.schedules[ff.A_A_B]
    assert (aa.a, aa.b, aa.b_grid) == ([0, 1, 2], [3, 4, 5], (3, 4)) and side_b.seeds == (3, 4)
    rows = study.rows.set_index(["arm", "fold", "seed", "category"])["AP"]
    assert sorted(study.rows[study.rows["arm"] == ff.A_A_B]["seed"].unique()) == [3, 4, 5]
    side_a = rows[ff.A_A]
    assert side_a[side_a.index.get_level_values("seed").isin([0, 1])].equals(rows[ff.SUPERVISED])  # the chapter's runs
    assert 2 in side_a.index.get_level_values("seed")  # and a fresh seed
    fold1 = ff.prepare_fold(data, 1, folds[1], [1, 2], 5e-4, 0)
    emb = fp.a_a_runs(data, fold1, [5], side_b, head_kw, train_kw)[5]  # side B's seed 5, fold 1, at side B's schedule
    again = ff.score_rows(ff.A_A_B, 1, 5, data.query_text, emb, data.relevant, data.categories, folds[1])
    np.testing.assert_array_equal([r["AP"] for r in again],  # NaN: a category with no relevant gallery image
                                  rows[ff.A_A_B].loc[(1, 5)].reindex([r["category"] for r in again]).to_numpy())
