"""Chapter 4's equations on hand-sized examples (the chapter's check cells), and the
protocol's named pieces: arms keyed by their config, features, masks, verdict builders."""
import math

import numpy as np
import pytest
import torch

from fgclip.methods import decoupling as dc
from fgclip.studies.decoupling import arms as darms, comparisons as dcmp, data as ddata, features as dfeat


def test_pool_categories_and_uniform_attention_by_hand():
    f = torch.tensor([[[[1.0, 0.0]], [[0.0, 2.0]]]])  # (B=1, D=2, h=1, w=2): f_11 = (1, 0), f_12 = (0, 2)
    torch.manual_seed(0)
    sd = dc.SemanticDecoupling(feature_dim=2, word_dim=3, rank=4, out_dim=4)
    torch.nn.init.zeros_(sd.w_a.weight)  # w_a = 0: a_{c,wh} = 1 / (hw)
    f_v, a = sd(f, torch.eye(2, 3))
    assert a.shape == (1, 2, 1, 2) and f_v.shape == (1, 2, 2)
    torch.testing.assert_close(a, torch.full_like(a, 0.5))
    torch.testing.assert_close(f_v, torch.tensor([[[0.5, 1.0], [0.5, 1.0]]]))
    pooled = dc.pool_categories(torch.tensor([[[0.25, 0.75]]]), f.flatten(2).mT)  # (1, 1, 2)
    torch.testing.assert_close(pooled, torch.tensor([[[0.25, 1.5]]]))  # 0.25 (1, 0) + 0.75 (0, 2)


def test_decoupling_attention_is_the_modules_attention():
    torch.manual_seed(1)
    sd = dc.SemanticDecoupling(feature_dim=6, word_dim=5, rank=3, out_dim=4)
    f, x = torch.randn(2, 6, 2, 3), torch.randn(4, 5)
    f_flat = f.flatten(2).transpose(1, 2)  # (B, hw, D)
    a = dc.decoupling_attention(f_flat, x, sd.U, sd.V, sd.P, sd.w_a)  # (B, C, hw)
    f_v, a_mod = sd(f, x)
    torch.testing.assert_close(a, a_mod.flatten(2))
    torch.testing.assert_close(dc.pool_categories(a, f_flat), f_v)


def test_softmax_over_categories_by_hand():
    s = dc.category_scores(torch.tensor([[[1.0, 0.0], [0.0, 2.0]]]), torch.tensor([[1.0, 0.0], [1.0, 0.0]]), 0.5)
    torch.testing.assert_close(s, torch.tensor([[2.0, 0.0]]))  # cos (1, 0) / τ
    p = dc.score_probabilities(s, "softmax")
    e2 = math.e ** 2
    torch.testing.assert_close(p, torch.tensor([[e2 / (e2 + 1), 1 / (e2 + 1)]]))
    torch.testing.assert_close(dc.score_log_probabilities(s, "softmax"), p.log())


def test_arms_are_keyed_by_their_config():
    from fgclip.studies.decoupling.heads import VARIANTS

    names = [a.name for a in darms.ROWS]
    assert len(set(names)) == len(names) == 9 and len(set(darms.ROWS)) == 9
    assert all(a.variant in VARIANTS and a.scoring in dc.SCORINGS for a in darms.TRAINED)
    assert darms.FULL != darms.UNTRAINED and (darms.FULL.variant, darms.FULL.scoring) == ("full", "softmax")
    assert {a.scoring for a in darms.TRAINED if a.variant == "full"} == {"softmax", "sigmoid+bias", "sigmoid+affine"}


def test_features_subset_and_partial_label_draws(tmp_path):
    from fgclip.partial_labels import load_masks

    feats = dfeat.Features(torch.arange(24.0).view(6, 1, 2, 2), torch.arange(12.0).view(6, 2))
    sub = feats.subset(np.array([1, 4]))
    assert sub.dense.shape == (2, 1, 2, 2) and sub.pooled[1].tolist() == [8.0, 9.0]
    labels = (np.random.default_rng(0).random((20, 3)) < 0.5).astype(np.int64)
    masks, targets = ddata.partial_label_draws(labels, [0.1, 0.5], [3, 4], tmp_path)
    assert set(targets) == {(3, 0.1), (3, 0.5), (4, 0.1), (4, 0.5)}
    assert ((targets[3, 0.5] == -1) == ~masks[3][0.5]).all()
    saved, seed = load_masks(tmp_path / "known_masks_seed4.npz")
    assert seed == 4 and (saved[0.1] == masks[4][0.1]).all()
    table = ddata.known_positive_table(labels, masks, ["a", "b", "c"], rows=np.arange(5))
    assert table.shape == (3, 2)


def _ap(rows, shift):
    """Per-category AP (n_seeds=3, C=8) for every (arm, ρ, kind): FULL above the rest by ``shift``."""
    rng = np.random.default_rng(0)
    return {(arm, rho, kind): 0.5 + rng.normal(0, 0.01, (3, 8)) + (shift if arm == darms.FULL else 0.0)
            for arm in rows for rho in (0.1, 0.5) for kind in ("p", "s")}


def test_scoring_and_summary_verdicts():
    from fgclip import verdicts
    from fgclip.studies.decoupling.controls import CLUSTER_UNIT

    ap = _ap(darms.ROWS, 0.2)
    test_v = dcmp.scoring_verdicts(ap, [0.1, 0.5], seed=0, margin=0.02)
    assert set(test_v) == {(c, r) for c in (darms.FULL_BIAS, darms.FULL_AFFINE) for r in (0.1, 0.5)}
    assert all(v.verdict == verdicts.A_BETTER and v.arms[1] == c.scoring for (c, _), v in test_v.items())
    summary = dcmp.summary_verdicts(ap, [0.1, 0.5], seed=0, margin=0.02)
    assert [v.arms[1] for v in summary] == ["zero-shot", "untrained init", "logistic regression",
                                            "decoupling only", "prompts only", "s"]
    assert all(v.verdict == verdicts.A_BETTER for v in summary[:5])
    assert summary[5].verdict == verdicts.EQUIVALENT  # p and s drawn alike here, well inside ±0.02
    for v in [*test_v.values(), *summary]:
        rec = v.to_dict()
        assert rec["cluster_unit"] == CLUSTER_UNIT and rec["margin"] == 0.02
