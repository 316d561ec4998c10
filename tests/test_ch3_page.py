"""Chapter 3's page helpers: the global slot's share, the forgetting sentence, the teacher arms'
labels, the shuffled control's seeds and the chapter's verdict list."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from fgclip.studies.for_retrieval import folds as ff, page, protocol as fp
from fgclip.train.selection import Selection
from fgclip.verdicts import A_BETTER, B_BETTER, CANNOT_TELL, EQUIVALENT, Verdict


def _verdict(outcome: str, arms=("supervised only", "CLIP global")) -> Verdict:
    return Verdict("c", arms, 0.5, 0.5, 0.0, -0.1, 0.1, 0.95, 2, 8, 2, "units", "folds", 2, outcome, margin=0.02)


def test_global_slot_share_counts_the_pairs_the_global_slot_wins():
    text = torch.tensor([[1.0, 0.0]])  # one query
    emb = torch.tensor([[[0.9, 0.1], [0.5, 0.5]],  # image 0: the global slot (first) wins
                        [[0.1, 0.9], [0.8, 0.2]]])  # image 1: the learned slot wins
    assert ff.global_slot_share(text, emb) == 0.5
    assert ff.global_slot_share(text, emb[:1]) == 1.0
    with pytest.raises(ValueError, match="S >= 2"):
        ff.global_slot_share(text, emb[:, :1])


def test_global_slot_sentence_drops_the_arm_only_when_it_always_wins():
    text, drop = page.global_slot_sentence([{"share": 1.0}, {"share": 1.0}])
    assert drop and "by construction" in text and "1.0000" in text
    text, drop = page.global_slot_sentence([{"share": 1.0}, {"share": 0.99}])
    assert not drop and "can differ" in text and "0.9900" in text
    with pytest.raises(ValueError, match="empty"):
        page.global_slot_sentence([])


def test_forgetting_sentence_follows_the_verdicts():
    sel = Selection("supervised only", 3e-3, 1, 0.5, {3e-3: [[0.5]]}, (0, 1), 6)
    text = page.forgetting_sentence(_verdict(CANNOT_TELL), _verdict(A_BETTER), sel)
    assert text.startswith("Forgetting was not shown here") and "1 of 6 epochs" in text and "lr 0.003" in text
    assert "not distinguishable at this size from CLIP's own embedding" in text and "above the head's" in text
    text = page.forgetting_sentence(_verdict(B_BETTER), _verdict(EQUIVALENT), sel)
    assert text.startswith("Forgetting was shown here") and "fell below CLIP's own embedding" in text
    assert "the head's own start" not in text.split("fell below")[1]


def test_teacher_arm_labels_by_hand():
    truth = torch.tensor([[True, False, True], [False, True, False]])
    scores = torch.tensor([[0.9, 0.8, 0.1], [0.7, 0.6, 0.05]])
    assert [t.tolist() for t in ff.planted_labels(truth)] == [[0, 2], [1]]
    assert [t.tolist() for t in ff.oracle_labels(scores, truth, 0.5)] == [[0], [1]]  # 1 and 0 were wrong
    table = ff.teacher_examples(["a", "b", "c"], {"oracle": ff.oracle_labels(scores, truth, 0.95)}, n=2)
    assert table["oracle"].tolist() == ["-", "-"]


def test_shuffle_seeds_differ_per_training_seed_and_fold():
    seeds = {fp.shuffle_seed(s, f) for s in range(3) for f in range(8)}
    assert len(seeds) == 24


def test_chapter_verdicts_leave_out_a_dropped_arm():
    rng = np.random.default_rng(0)
    folds, cats, seeds = [["a", "b"], ["c", "d"]], ["a", "b", "c", "d"], [0, 1]
    arms = [ff.FOR, ff.CLUSTER, ff.GLOBAL, ff.SUPERVISED, ff.UNTRAINED, ff.PLANTED, ff.SHUFFLED, ff.GLOBAL_SLOT]
    rows = pd.DataFrame([{"arm": a, "fold": f, "seed": s, "category": c, "role": "novel" if c in fold else "base",
                          "AP": rng.uniform()} for a in arms for f, fold in enumerate(folds) for s in seeds for c in cats])
    kept = page.chapter_verdicts(rows, folds, cats, seeds, ["AP"], "AP", 0.02, 0)
    dropped = page.chapter_verdicts(rows, folds, cats, seeds, ["AP"], "AP", 0.02, 0, drop=[ff.GLOBAL_SLOT])
    assert (ff.GLOBAL_SLOT, ff.GLOBAL) in {v.arms for v in kept.all}
    assert ff.GLOBAL_SLOT not in {a for v in dropped.all for a in v.arms}
    assert len(kept.all) == len(dropped.all) + 2 and dropped.by_arms(ff.FOR, ff.SUPERVISED) is dropped.repair


def test_findings_say_when_the_global_slot_changed_nothing():
    rng = np.random.default_rng(1)
    folds, cats, seeds = [["a", "b"], ["c", "d"]], ["a", "b", "c", "d"], [0, 1]
    arms = [ff.FOR, ff.CLUSTER, ff.GLOBAL, ff.SUPERVISED, ff.UNTRAINED, ff.PLANTED, ff.SHUFFLED, ff.PAPER,
            ff.NAMES_REMOVED, ff.ORACLE, ff.SCALED_TAU]
    rows = pd.DataFrame([{"arm": a, "fold": f, "seed": s, "category": c, "role": "novel" if c in fold else "base",
                          "AP": rng.uniform()} for a in arms for f, fold in enumerate(folds) for s in seeds for c in cats])
    same = rows[rows["arm"] == ff.GLOBAL].assign(arm=ff.GLOBAL_SLOT)  # ranks exactly as CLIP global
    cv = page.chapter_verdicts(pd.concat([rows, same]), folds, cats, seeds, ["AP"], "AP", 0.02, 0)
    sel = {ff.FOR: Selection(ff.FOR, 1e-3, 2, 0.5, {1e-3: [[0.4, 0.5]]}, (0, 1), 6)}
    power = {"half_width": 0.1, "target": 0.01, "n_seeds": 2, "n_clusters": 2, "met": False}
    fals = type("F", (), {"conclusion": "the test cannot decide here"})()
    out = page.findings(cv, fals, power, sel, 0.02, folds, seeds, {"global-slot": "Share 0.99."})
    assert out["global-slot"].startswith("Share 0.99. Yet the pairs they win changed no ranking")
    assert "+0.000 [+0.000, +0.000]" in out["global-slot"] and out["seeds"] == "2 folds x seeds [0, 1]"
    moved = pd.concat([rows, same.assign(AP=same["AP"] + 0.01)])
    cv2 = page.chapter_verdicts(moved, folds, cats, seeds, ["AP"], "AP", 0.02, 0)
    assert page.findings(cv2, fals, power, sel, 0.02, folds, seeds, {"global-slot": "Share."})["global-slot"] == "Share."
