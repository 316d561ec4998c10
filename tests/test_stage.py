"""The stage of issue 29: 32 drawable shapes, the pretraining recipe's pieces (masked same-text
negatives, first-query attention pooling, a locked teacher text tower), the selection
routine every trained reader goes through, and chapter 0's ceiling readers."""
import numpy as np
import pytest
import torch
from torch import nn

from fgclip.losses.ranking import npair_loss, same_text_mask
from fgclip.models import create_clip
from fgclip.models.attention import first_query_attention_pool, set_first_query_pooling
from fgclip.studies import stage, stage_report
from fgclip.toyworld import NEVER_DRAWN, SHAPES, ToyWorldConfig, generate
from fgclip.train.pretrain import MaskedClipLoss
from fgclip.train.selection import Selection, SelectionGrid, select_lr_epochs, stop_epoch
from fgclip.train.teacher import DistilledLoss, lock_text_tower, text_tower_keys
from fgclip.train.toy_data import render_scenes, tokenize_scenes


def test_32_distinct_drawable_shapes_none_of_them_a_never_drawn_name():
    assert len(SHAPES) >= 32 and not set(SHAPES) & set(NEVER_DRAWN)
    ys, xs = np.mgrid[0:64, 0:64].astype(np.float32) + 0.5
    masks = {k: f((xs - 32) / 14, (ys - 32) / 14) for k, f in SHAPES.items()}
    assert all(m.sum() > 60 for m in masks.values()), "every shape covers a visible area at r = 14 px"
    names = list(masks)
    for i, a in enumerate(names):  # any two shapes differ in a visible number of pixels (hexagon
        for b in names[i + 1:]:     # and octagon are the closest pair: 52 px at r = 14 px)
            assert (masks[a] ^ masks[b]).sum() >= 40, f"{a} and {b} differ in fewer than 40 pixels"


def test_parallel_rendering_gives_the_same_scenes():
    world = ToyWorldConfig()
    one, three = render_scenes(world, 12, 0, "train", 1), render_scenes(world, 12, 0, "train", 3)
    assert all((a.image == b.image).all() and a.captions[0].text == b.captions[0].text for a, b in zip(one, three))


def test_text_ids_are_equal_exactly_for_equal_caption_texts():
    scenes = generate(ToyWorldConfig(), 20, seed=0)
    tokens, kinds, ids = tokenize_scenes(scenes, create_clip("toy-vit", pretrained=None).tokenizer)
    texts = [[c.text for c in s.captions] for s in scenes]
    flat_ids, flat_texts = ids.flatten().tolist(), [t for row in texts for t in row]
    for i in range(len(flat_ids)):
        for j in range(len(flat_ids)):
            assert (flat_ids[i] == flat_ids[j]) == (flat_texts[i] == flat_texts[j])


def test_masked_clip_loss_drops_only_same_text_pairs_and_equals_clip_without_them():
    torch.manual_seed(0)
    img, txt = torch.nn.functional.normalize(torch.randn(6, 8), dim=-1), torch.nn.functional.normalize(torch.randn(6, 8), dim=-1)
    scale = torch.tensor(10.0)
    distinct = MaskedClipLoss()(img, txt, scale, torch.arange(6))
    clip = 0.5 * (torch.nn.functional.cross_entropy(scale * img @ txt.T, torch.arange(6))
                  + torch.nn.functional.cross_entropy(scale * txt @ img.T, torch.arange(6)))
    torch.testing.assert_close(distinct, clip)
    ids = torch.tensor([0, 1, 0, 2, 3, 1])  # captions 0 and 2 read the same, and 1 and 5
    masked = MaskedClipLoss()(img, txt, scale, ids)
    torch.testing.assert_close(masked, npair_loss(scale * img @ txt.T, 1.0, same_text_mask(ids)))
    assert masked < distinct  # removing a false negative can only lower each softmax's loss


def test_first_query_pooling_equals_open_clips_pooling_with_its_gradients():
    clip = create_clip("toy-rn", pretrained=None)
    pool = clip.model.visual.attnpool.double()
    x = torch.randn(2, pool.k_proj.in_features, 4, 4, dtype=torch.float64, requires_grad=True)
    ref = pool(x)
    g_ref, = torch.autograd.grad(ref.sum(), x)
    assert set_first_query_pooling(clip.model) == 1
    out = pool(x)
    g, = torch.autograd.grad(out.sum(), x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(g, g_ref)
    torch.testing.assert_close(first_query_attention_pool(pool, x), ref)
    set_first_query_pooling(clip.model, enabled=False)
    assert "forward" not in pool.__dict__


def test_locked_text_tower_is_the_teachers_and_receives_no_gradient():
    teacher = create_clip("toy-rn", pretrained=None).model.state_dict()
    student = create_clip("toy-vit", pretrained=None).model
    keys = lock_text_tower(student, teacher)
    assert keys == text_tower_keys(teacher) and not any(k.startswith("visual.") for k in keys)
    own = student.state_dict()
    assert all(torch.equal(own[k], teacher[k]) for k in keys)
    frozen = {n for n, p in student.named_parameters() if not p.requires_grad}
    assert frozen and all(not n.startswith("visual.") for n in frozen)
    assert student.logit_scale.requires_grad and all(p.requires_grad for p in student.visual.parameters())


def test_distilled_loss_adds_the_cosine_gap_to_the_teacher():
    base = lambda i, t, s: torch.tensor(1.0)
    f = torch.nn.functional.normalize(torch.randn(4, 8), dim=-1)
    assert DistilledLoss(base, 2.0)(f, f, torch.tensor(1.0), f).item() == pytest.approx(1.0, abs=1e-6)
    assert DistilledLoss(base, 2.0)(f, f, torch.tensor(1.0), -f).item() == pytest.approx(1.0 + 2.0 * 2.0, abs=1e-5)


def test_selection_picks_the_best_mean_epoch_and_lr_and_reports_convergence():
    peaks = {1e-3: 6, 3e-3: 3, 1e-2: 2}
    def run(lr, seed, epochs):  # a curve that peaks at its lr's epoch, higher for lr 3e-3
        return [(1.0 if lr == 3e-3 else 0.8) - 0.05 * abs(e + 1 - peaks[lr]) + 0.001 * seed for e in range(epochs)]
    sel = select_lr_epochs("arm", run, SelectionGrid(epochs=8))
    assert (sel.lr, sel.epochs, sel.converged) == (3e-3, 3, True)
    assert sel.score == pytest.approx(1.0005)
    late = select_lr_epochs("late", lambda lr, s, e: list(range(e)), SelectionGrid(epochs=5))
    assert late.epochs == 5 and not late.converged  # best at the budget's end: not converged
    low = select_lr_epochs("loss", lambda lr, s, e: [abs(k - 1) + lr for k in range(e)],
                           SelectionGrid(epochs=4, higher_is_better=False))
    assert (low.lr, low.epochs) == (1e-3, 2)


def test_a_best_epoch_within_the_patience_is_not_converged_and_a_grid_edge_lr_is_flagged():
    # a curve still rising through noise: its best epoch (11 of 12) is not the last, yet it is
    # within the patience (12 // 4 = 3 epochs), so it must not read as converged
    rising = lambda lr, s, e: [0.1 * k + (0.5 if k == 10 else 0.0) for k in range(e)]
    sel = select_lr_epochs("rising", rising, SelectionGrid(epochs=12))
    assert (sel.epochs, sel.patience, sel.converged) == (11, 3, False)
    assert "may not have converged" in sel.caveat()
    peaked = select_lr_epochs("peaked", lambda lr, s, e: [-abs(k - 8) * lr for k in range(e)], SelectionGrid(epochs=12))
    assert (peaked.epochs, peaked.converged) == (9, True)  # 3 epochs before the end: converged
    # every lr ties (the peak's score is 0), so the tie goes to the smallest: the grid's edge
    assert peaked.lr_edge == "smallest" and "smallest end" in peaked.caveat()
    middle = select_lr_epochs("middle", lambda lr, s, e: [-abs(k - 2) - abs(lr - 3e-3) for k in range(e)],
                              SelectionGrid(epochs=12))
    assert (middle.lr, middle.lr_edge, middle.caveat()) == (3e-3, "", "")
    largest = select_lr_epochs("largest", lambda lr, s, e: [lr - abs(k - 2) for k in range(e)], SelectionGrid(epochs=12))
    assert largest.lr_edge == "largest"
    assert Selection.from_dict(largest.to_dict()) == largest
    first = select_lr_epochs("first", lambda lr, s, e: [-k - abs(lr - 3e-3) for k in range(e)], SelectionGrid(epochs=12))
    assert (first.epochs, first.converged, first.lr_edge) == (1, True, "")
    assert first.caveat() == " (best at the first epoch: the curve only fell after it)"


def test_early_stopping_never_chooses_a_peak_after_a_stretch_of_patience_epochs_without_gain():
    # chapter 3's supervised-only curves: an early peak, a dip, then a late recovery that tops
    # it; an early stopper with patience 2 stops 2 epochs after the first peak
    curves = {1e-3: [0.50, 0.66, 0.63, 0.60, 0.58, 0.58, 0.58, 0.60, 0.60, 0.61],
              3e-3: [0.61, 0.57, 0.55, 0.54, 0.56, 0.57, 0.60, 0.70, 0.61, 0.62],
              1e-2: [0.30, 0.35, 0.40, 0.45, 0.50, 0.52, 0.55, 0.56, 0.57, 0.58]}
    run = lambda lr, s, e: curves[lr][:e]
    budget = select_lr_epochs("arm", run, SelectionGrid(epochs=10, rule="budget"))
    stop = select_lr_epochs("arm", run, SelectionGrid(epochs=10))  # the default rule
    assert (budget.lr, budget.epochs, budget.rule) == (3e-3, 8, "budget")  # the late peak wins over the budget
    assert (stop.lr, stop.epochs, stop.rule) == (1e-3, 2, "early-stop")  # its stopper halted at epoch 4
    assert stop.score == pytest.approx(0.66) and stop.converged
    # the late peak is past its stop and above the chosen score: the selection says so
    assert (stop.after_stop, budget.after_stop) == ("lr 0.003, epoch 8", "")
    assert "beaten after an early stop (lr 0.003, epoch 8)" in stop.caveat()
    assert Selection.from_dict(stop.to_dict()) == stop
    # E_stop: P epochs after the best so far, or the whole curve when that never comes
    assert stop_epoch(np.array(curves[3e-3]), 2) == 3 and stop_epoch(np.array(curves[1e-3]), 2) == 4
    assert stop_epoch(np.array(curves[1e-2]), 2) == 10  # still rising: the stopper never fires
    assert stop_epoch(np.array([0.1, 0.3, 0.2, 0.4, 0.3, 0.2]), 2) == 6  # a dip shorter than P does not stop it
    # a still-rising curve chooses its last epoch under both rules and is not converged
    rising = select_lr_epochs("rising", lambda lr, s, e: curves[1e-2][:e], SelectionGrid(epochs=10))
    assert (rising.epochs, rising.converged, rising.after_stop) == (10, False, "")
    # a loss (lower is better): the stopper watches it falling; a later, lower loss is reported
    loss = [0.5, 0.4, 0.45, 0.3, 0.2]  # patience 5 // 4 = 1: stops at epoch 3
    low = select_lr_epochs("loss", lambda lr, s, e: [v + lr for v in loss[:e]],
                           SelectionGrid(epochs=5, higher_is_better=False))
    assert (low.lr, low.epochs, low.after_stop) == (1e-3, 2, "lr 0.001, epoch 5")
    with pytest.raises(ValueError, match="rule"):
        SelectionGrid(rule="patience")


@pytest.mark.parametrize("kwargs, message", [(dict(lrs=(1e-3, 1e-2)), "at least 3"),
                                             (dict(lrs=(1e-3, 2e-3, 1e-1)), "log-spaced"),
                                             (dict(seeds=()), "at least 1"), (dict(epochs=0), "epochs")])
def test_selection_grid_refuses_a_grid_that_is_not_one(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SelectionGrid(**kwargs)


def test_selection_refuses_a_run_that_returns_the_wrong_curve():
    with pytest.raises(ValueError, match="expected 4"):
        select_lr_epochs("arm", lambda lr, s, e: [0.0] * (e - 1), SelectionGrid(epochs=4))


def test_cell_targets_mark_the_cells_whose_centres_lie_in_a_box():
    scene = generate(ToyWorldConfig(min_objects=1, max_objects=1), 1, seed=3)[0]
    obj = scene.objects[0]
    cats = ToyWorldConfig().categories
    y = stage.cell_targets([scene], cats, 8)  # (1, C + K, 8, 8)
    centres = (np.arange(8) + 0.5) * 8
    x0, y0, x1, y1 = obj.box
    expected = ((centres[:, None] >= y0) & (centres[:, None] < y1) & (centres[None] >= x0) & (centres[None] < x1))
    assert np.array_equal(y[0, cats.index(obj.category)].numpy().astype(bool), expected)
    assert y[0, :len(cats)].sum() == expected.sum()  # no other category anywhere


def test_oracle_softmax_reads_each_cells_category_and_colour_or_none():
    world = ToyWorldConfig()
    cats, n_c, n_k = world.categories, len(world.categories), len(world.colors)
    scenes = generate(world, 40, seed=5)
    y = stage.cell_targets(scenes, cats, 8)  # (N, C + K, 8, 8) multi-hot
    classes = stage.cell_classes(scenes, cats, 8)  # (N, 2, 8, 8)
    empty = y[:, :n_c].sum(1) == 0
    assert torch.equal(empty, classes[:, 0] == n_c) and torch.equal(y[:, n_c:].sum(1) == 0, classes[:, 1] == n_k)
    single = y[:, :n_c].sum(1) == 1
    assert bool((y[:, :n_c].argmax(1)[single] == classes[:, 0][single]).all())
    # where boxes overlap, the cell belongs to the object painted last (it occludes the others)
    overlaps = [n for n, sc in enumerate(scenes) if (stage.cell_targets([sc], cats, 8)[0, :n_c].sum(0) > 1).any()]
    assert overlaps, "the seed must draw an overlap for this test to mean anything"
    for n in overlaps:
        last = scenes[n].objects[-1]
        one = stage.cell_targets([scenes[n]], cats, 8)[0, cats.index(last.category)] > 0
        assert bool((classes[n, 0][one] == cats.index(last.category)).all())
    # a confident oracle that reads the truth: small loss, and its log-probabilities rank the truth first
    logits = torch.cat([nn.functional.one_hot(classes[:, 0], n_c + 1), nn.functional.one_hot(classes[:, 1], n_k + 1)],
                       -1).permute(0, 3, 1, 2).float() * 20
    assert float(stage.oracle_loss(logits, classes, n_c)) < 1e-6
    assert float(stage.oracle_loss(torch.zeros_like(logits), classes, n_c)) > 1.0
    scores = stage.oracle_log_probs(logits, n_c)  # (N, C + K, 8, 8)
    assert scores.shape == y.shape
    assert bool((stage.global_scores(scores, n_c).argmax(1) == stage.global_scores(logits[:, :n_c], n_c).argmax(1)).all())


def test_task_scores_of_a_perfect_reader_are_one_and_of_a_constant_reader_are_low():
    world = ToyWorldConfig()
    scenes = stage.stage_scenes(world, 4, 4, 60, 0)
    cats = world.categories
    truth = lambda sc: torch.tensor([[float(c in s.labels) for c in cats] for s in sc])
    trials = stage.phrase_trials(scenes.test)
    logits = stage.cell_targets(scenes.test, cats, 8) * 10  # the ground truth as a reader
    perfect = stage.task_scores(truth(scenes.test), truth(scenes.single), stage.cell_maps(logits, trials, cats),
                                scenes, cats, trials)
    assert all(v == pytest.approx(1.0) for v in perfect.values()), perfect
    flat = stage.task_scores(torch.zeros(60, len(cats)), torch.zeros(60, len(cats)), None, scenes, cats, trials)
    assert flat[stage.TASKS[0]] < 0.2 and np.isnan(flat[stage.TASKS[3]])


def test_check_recorded_fails_loudly_naming_the_metric_beyond_the_tolerance():
    recorded = {"i2t_R@1": 0.90, "zero_shot_shape_acc": 0.95, "n": 1000}
    drift = stage_report.check_recorded("toy-rn", recorded, {"i2t_R@1": 0.91, "zero_shot_shape_acc": 0.94, "n": 1000})
    assert drift == pytest.approx({"i2t_R@1": 0.01, "zero_shot_shape_acc": -0.01})
    with pytest.raises(ValueError, match=r"toy-rn: .*zero_shot_shape_acc 0\.950 -> 0\.920"):
        stage_report.check_recorded("toy-rn", recorded, {"i2t_R@1": 0.90, "zero_shot_shape_acc": 0.92}, tolerance=0.02)
    with pytest.raises(ValueError, match="records no test_metrics"):
        stage_report.check_recorded("toy-vit", {}, {"i2t_R@1": 0.5})


def _small_ceiling(model: str, oracle_epochs: int, **kwargs):
    """The ceiling of a random-init ``model`` on 24 fit, 12 validation and 40 test scenes."""
    torch.manual_seed(0)
    world = ToyWorldConfig()
    scenes = stage.stage_scenes(world, 24, 12, 40, 0)
    clip = create_clip(model, pretrained=None)
    oracle = stage.fit_oracle(scenes, world.categories, SelectionGrid(seeds=(0,), epochs=oracle_epochs))
    return world, scenes, clip, stage.ceiling({model: clip}, scenes, world.categories, oracle, **kwargs)


def test_ceiling_rows_are_computed_from_the_scenes_and_models_given():
    from fgclip.evaluation import category_zero_shot, shape_classification

    world, scenes, clip, (rows, selections, gains) = _small_ceiling("toy-vit", 2)
    assert [(r["reader"], r["model"]) for r in rows] == [("oracle", "CNN on pixels"), ("chance", "random scores"),
                                                         ("linear probe", "toy-vit"), ("zero-shot", "toy-vit")]
    assert len(selections) == 3 and selections[0].budget == 2  # the oracle's lr and epochs, then two probes' lambdas
    assert [s.arm for s in selections[1:]] == ["linear probe, global (toy-vit)", "linear probe, dense (toy-vit)"]
    assert set(selections[1].val_loss) == set(stage.GLOBAL_L2S) and set(selections[2].val_loss) == set(stage.DENSE_L2S)
    zs = rows[3]  # recomputed independently through the evaluation module's own zero-shot path
    direct = category_zero_shot(clip, scenes.test, world.categories)
    assert zs[stage.TASKS[1]] == pytest.approx(direct["zero_shot_multilabel_mAP"], abs=1e-4)
    assert zs[stage.TASKS[2]] == pytest.approx(direct["zero_shot_retrieval_AP@50"], abs=1e-4)
    assert zs[stage.TASKS[0]] == pytest.approx(shape_classification(clip, scenes.single, world.categories), abs=1e-6)
    assert all(0.0 <= r[t] <= 1.0 for r in rows for t in (*stage.TASKS, stage.POINTING_BY_NAME))


def test_ceiling_pooled_probe_row_reads_image_labels_and_points_by_name_only():
    *_, (rows, selections, gains) = _small_ceiling("toy-rn", 1, pooled_models=("toy-rn",))
    assert [r["reader"] for r in rows] == ["oracle", "chance", "linear probe", stage.POOLED_READER, "zero-shot"]
    assert selections[-1].arm == "pooled linear probe (toy-rn)" and set(selections[-1].val_loss) == set(stage.POOLED_L2S)
    pooled = rows[3]
    assert np.isnan(pooled[stage.TASKS[3]])  # never told a colour: no phrase pointing
    assert all(0.0 <= pooled[t] <= 1.0 for t in (*stage.TASKS[:3], stage.POINTING_BY_NAME))
    assert set(gains) == {("linear probe", "toy-rn"), (stage.POOLED_READER, "toy-rn")}
    assert all(low <= high for low, high in gains.values())


def test_reader_caveats_name_open_ended_readers_and_an_oracle_below_zero_shot():
    from types import SimpleNamespace

    import pandas as pd

    rows = pd.DataFrame([{"task": "t1", "model": "m", "oracle": 0.9, "zero-shot": 0.5},
                         {"task": "t2", "model": "m", "oracle": 0.1, "zero-shot": 0.5}])
    sels = [SimpleNamespace(arm="oracle", converged=True), SimpleNamespace(arm="probe", converged=False),
            SimpleNamespace(arm="edgy probe", converged=True, at_edge=True)]
    text = stage_report.reader_caveats(sels, rows)
    assert "probe" in text and "oracle below zero-shot" in text and "t2 (m)" in text and "t1" not in text
    assert "edge of its grid: edgy probe" in text
    probed = rows.assign(**{"linear probe": [0.95, 0.05], "pooled linear probe": [np.nan, 0.2]})
    text = stage_report.reader_caveats(sels[:1], probed)
    assert "probe above the oracle, so the oracle is not the ceiling for: t1 (m, linear probe 0.950 against 0.900)" in text
    assert "t2 (m, pooled" in text and "pooled linear probe nan" not in text
    fine = stage_report.reader_caveats(sels[:1], rows.iloc[:1])
    assert fine.startswith("Every reader converged")


def test_retrieval_metrics_encodes_the_scenes_once_with_the_same_numbers(monkeypatch):
    """The headline metrics share one encoding of the scenes between caption retrieval and the
    category scores: the same numbers as each encoding its own, two encodes instead of three."""
    from dataclasses import replace as with_
    from fgclip import evaluation as ev
    clip, world = create_clip("toy-rn", pretrained=None), ToyWorldConfig()
    calls = []
    encode = ev.encode_images
    monkeypatch.setattr(ev, "encode_images", lambda *a, **k: calls.append(1) or encode(*a, **k))
    shared = ev.retrieval_metrics(clip, world, n=24, seed=3)
    assert len(calls) == 2  # the scenes once, the one-object scenes once
    scenes = generate(world, 24, seed=3, split="test")
    single = generate(with_(world, min_objects=1, max_objects=1), 24, seed=4, split="test")
    own = {**ev.caption_retrieval(clip, scenes), **ev.category_zero_shot(clip, scenes, world.categories),
           "zero_shot_shape_acc": ev.shape_classification(clip, single, world.categories)}
    assert {k: shared[k] for k in own} == own


def test_the_chance_row_is_the_floor_of_each_task():
    """Random scores score near each task's chance: 1/C on shape, the category prevalence on
    mAP (averaged over categories), and the box's share of the cells on pointing; planting the
    truth into the random scores lifts shape accuracy to 1 (the metric can see a signal)."""
    world = ToyWorldConfig()
    scenes = stage.stage_scenes(world, 4, 4, 300, 0)
    trials = stage.phrase_trials(scenes.test)
    row = stage.chance_row(scenes, world.categories, trials, seed=0)
    assert row[stage.TASKS[0]] == pytest.approx(1 / len(world.categories), abs=0.04)
    targets = torch.tensor([[c in s.labels for c in world.categories] for s in scenes.test], dtype=torch.float)
    prevalence = float(targets[:, targets.sum(0) > 0].mean(0).mean())
    assert row[stage.TASKS[1]] == pytest.approx(prevalence, abs=0.05)
    assert 0.0 < row[stage.TASKS[3]] < 0.5
    assert row == stage.chance_row(scenes, world.categories, trials, seed=0)  # seeded
    truth = torch.tensor([world.categories.index(s.objects[0].category) for s in scenes.single])
    planted = torch.nn.functional.one_hot(truth, len(world.categories)).float()
    scores = stage.task_scores(torch.rand(300, len(world.categories)), planted, None, scenes, world.categories, trials)
    assert scores[stage.TASKS[0]] == 1.0


def test_the_oracle_checkpoint_round_trips_and_refuses_another_world(tmp_path):
    from fgclip.studies import stage_oracle

    world = ToyWorldConfig()
    scenes = stage.stage_scenes(world, 16, 8, 12, 0)
    oracle, sel = stage.fit_oracle(scenes, world.categories, SelectionGrid(seeds=(0,), epochs=1), batch_size=8)
    trials = stage.phrase_trials(scenes.test)
    row = stage.oracle_row(oracle, scenes, world.categories, trials)
    scores = {k: v for k, v in row.items() if k not in ("reader", "model")}
    path = stage_oracle.save_oracle(tmp_path / "o.pt", oracle, sel, world.categories, world.image_size, "cmd", scores,
                                    n_fit=16)
    loaded, sel2, info = stage_oracle.load_oracle(path, world.categories, world.image_size)
    assert sel2 == sel and info["n_fit"] == 16 and info["command"] == "cmd"
    assert stage.oracle_row(loaded, scenes, world.categories, trials) == row  # the same scores, read back
    assert stage_report.check_recorded("stage-oracle", info["test_metrics"], row) == {k: 0.0 for k in scores}
    with pytest.raises(ValueError, match=r"o\.pt: the oracle was trained for categories="):
        stage_oracle.load_oracle(path, world.categories[::-1], world.image_size)
    with pytest.raises(ValueError, match="image_size=64"):
        stage_oracle.load_oracle(path, world.categories, 128)
    with pytest.raises(FileNotFoundError, match="nothere.pt: no committed oracle"):
        stage_oracle.load_oracle(tmp_path / "nothere.pt", world.categories, world.image_size)
    torch.save({"state_dict": {}}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="bad.pt: the oracle's record lacks selection"):
        stage_oracle.load_oracle(tmp_path / "bad.pt", world.categories, world.image_size)


def test_held_out_reads_the_stage_features_of_the_same_scenes_with_the_same_numbers():
    from fgclip.evaluation import held_out, held_out_metrics

    world, clip = ToyWorldConfig(), create_clip("toy-rn", pretrained="toy")
    scenes = stage.stage_scenes(world, 2, 2, 40, 5)
    f = stage.stage_features(clip, scenes)
    shared = held_out_metrics(held_out(clip, world, 40, 5, image_features=(f["test"][0], f["single"][0])))
    assert shared == pytest.approx(held_out_metrics(held_out(clip, world, 40, 5)), abs=1e-5)
    with pytest.raises(ValueError, match=r"image_features: expected 40 scene and 40 one-object embeddings, got \[5, 40\]"):
        held_out(clip, world, 40, 5, image_features=(f["test"][0][:5], f["single"][0]))
