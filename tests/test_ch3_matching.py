"""Hungarian matching, the set losses and the pseudo-label teacher, on hand-made examples."""
import itertools

import pytest
import torch

from fgclip.losses.matching import (accept, choose_threshold, hungarian_match, label_f1,
                                    log_grid, set_loss, teacher_scores)


def test_hungarian_match_beats_every_other_assignment():
    cost = torch.tensor([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0], [3.0, 2.0, 2.0]])
    rows, cols = hungarian_match(cost)
    best = min(sum(cost[i, p[i]] for i in range(3)) for p in itertools.permutations(range(3)))
    assert cost[rows, cols].sum().item() == pytest.approx(best.item())
    assert cost[rows, cols].sum().item() == pytest.approx(5.0)  # 0->1, 1->0, 2->2


def test_hungarian_match_rectangular_and_errors():
    rows, cols = hungarian_match(torch.tensor([[5.0], [1.0], [3.0]]))  # 3 queries, 1 target
    assert rows.tolist() == [1] and cols.tolist() == [0]
    with pytest.raises(ValueError, match="NaN"):
        hungarian_match(torch.tensor([[float("nan")]]))


def test_set_loss_hand_computed():
    text = torch.eye(3)  # three classes along the axes
    emb = torch.tensor([[[1.0, 0, 0], [0, 0, 1.0]]])  # query 0 -> class 0, query 1 -> class 2
    loss, n = set_loss(emb, text, [torch.tensor([2, 0])], logit_scale=1.0)
    e = torch.e
    expected = -torch.log(torch.tensor(e / (e + 2)))  # both matched pairs have p = e/(e+2)
    assert n == 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_set_loss_uses_the_matching_not_the_order():
    text = torch.eye(2)
    emb = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    good, _ = set_loss(emb, text, [torch.tensor([0, 1])], logit_scale=10.0)
    assert good.item() < 1e-3  # matched 0 <-> query 1, 1 <-> query 0


def test_set_loss_empty_targets_and_bad_classes():
    emb = torch.nn.functional.normalize(torch.randn(2, 3, 4, requires_grad=True), dim=-1)
    loss, n = set_loss(emb, torch.eye(4), [torch.tensor([], dtype=torch.long)] * 2, 1.0)
    assert n == 0 and loss.item() == 0.0 and loss.requires_grad
    with pytest.raises(ValueError, match=r"targets\[1\]"):
        set_loss(emb, torch.eye(4), [torch.tensor([0]), torch.tensor([7])], 1.0)


def test_teacher_scores_accept_and_f1():
    vocab = torch.eye(3)
    clusters = torch.tensor([[[1.0, 0, 0], [0, 1.0, 0]]])  # two clusters, classes 0 and 1
    scores = teacher_scores(clusters, vocab, logit_scale=10.0)
    assert scores.shape == (1, 3)
    assert accept(scores, 0.5)[0].tolist() == [0, 1]
    truth = torch.tensor([[True, False, True]])
    f1 = label_f1(scores, truth, 0.5)
    assert f1["precision"] == 0.5 and f1["recall"] == 0.5 and f1["accepted_per_image"] == 2
    with pytest.raises(ValueError, match="threshold"):
        accept(scores, 1.5)


def test_choose_threshold_picks_best_f1():
    scores = torch.tensor([[0.9, 0.4, 0.05], [0.8, 0.3, 0.2]])
    truth = torch.tensor([[True, True, False], [True, False, False]])
    best, table = choose_threshold(scores, truth, [0.01, 0.35, 0.5])
    # 0.01: all 6 accepted, P=3/6 R=1; 0.35: P=3/3 R=1 -> best; 0.5: P=1 R=2/3
    assert best == 0.35 and len(table) == 3
    assert log_grid(1e-4, 1e-1, 4) == pytest.approx([1e-4, 1e-3, 1e-2, 1e-1])


def test_set_loss_no_object_class_hand_computed():
    text = torch.eye(2)
    emb = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # query 0 says class 0, query 1 class 1
    null = torch.tensor(0.0, requires_grad=True)
    loss, n = set_loss(emb, text, [torch.tensor([0])], 1.0, null, null_weight=0.5)
    e = torch.e
    matched = -torch.log(torch.tensor(e / (e + 1 + 1)))  # logits [1, 0, null 0]
    unmatched = -torch.log(torch.tensor(1 / (1 + e + 1)))  # query 1: logits [0, 1, 0]
    assert n == 1
    assert loss.item() == pytest.approx(((matched + 0.5 * unmatched) / 1.5).item(), rel=1e-6)
    loss.backward()
    assert null.grad is not None and null.grad != 0


def test_set_loss_unlabelled_images_get_no_loss_but_empty_labels_do():
    emb = torch.nn.functional.normalize(torch.randn(2, 3, 4), dim=-1)
    null = torch.tensor(0.0)
    none_loss, _ = set_loss(emb, torch.eye(4), [None, None], 1.0, null)
    assert none_loss.item() == 0.0
    empty_loss, n = set_loss(emb, torch.eye(4), [torch.zeros(0, dtype=torch.long), None], 1.0, null)
    assert n == 0 and empty_loss.item() > 0  # every embedding pushed to "no object"
