"""The one head-training loop (fgclip.train.loop) that chapters 1, 3 and 4 train through."""
import pytest
import torch

from fgclip.train.loop import HeadTraining, seeded_batches, train_loop


def _quadratic(target: float = 3.0):
    """A one-parameter head whose loss (w - target)^2 has a known minimum."""
    w = torch.nn.Parameter(torch.zeros(()))
    return w, (lambda batch: {"loss": (w - target) ** 2 * len(batch), "size": torch.tensor(float(len(batch)))})


def test_loop_minimises_the_loss_and_reports_per_epoch_means():
    w, loss = _quadratic()
    cfg = HeadTraining(epochs=40, lr=0.3, weight_decay=0.0)
    batches = [[0, 1, 2], [3]]  # two batches of 3 and 1 items each epoch
    history = train_loop([w], lambda: batches, loss, cfg)
    assert [h["epoch"] for h in history] == list(range(1, 41))
    assert all(h["size"] == pytest.approx(2.0) for h in history)  # mean over batches, not items
    assert history[-1]["loss"] < 1e-2 * history[0]["loss"]
    assert float(w.detach()) == pytest.approx(3.0, abs=0.05)


def test_step_budget_spans_epochs_and_stops_mid_epoch():
    w, loss = _quadratic()
    seen = []
    history = train_loop([w], lambda: [[0], [1], [2]], lambda b: (seen.append(b[0]), loss(b))[1],
                         HeadTraining(steps=7, lr=0.1))
    assert len(seen) == 7 and len(history) == 3  # 3 + 3 + 1 batches
    assert seen == [0, 1, 2, 0, 1, 2, 0]


def test_after_epoch_stops_early_and_can_add_to_the_row():
    w, loss = _quadratic()

    def stop_at_three(row):
        row["note"] = row["epoch"] * 10
        return row["epoch"] == 3

    history = train_loop([w], lambda: [[0]], loss, HeadTraining(epochs=10), after_epoch=stop_at_three)
    assert [h["note"] for h in history] == [10, 20, 30]


def test_modules_train_during_an_epoch_and_end_in_eval_mode():
    head = torch.nn.Sequential(torch.nn.Linear(2, 1), torch.nn.Dropout(0.5))
    modes = []

    def loss(batch):
        modes.append(head.training)
        return {"loss": head(torch.ones(4, 2)).pow(2).mean()}

    train_loop(head.parameters(), lambda: [0, 1], loss, HeadTraining(epochs=2), modules=(head,))
    assert modes == [True] * 4 and not head.training


def test_parameter_groups_keep_their_own_learning_rate():
    a, b = torch.nn.Parameter(torch.zeros(())), torch.nn.Parameter(torch.zeros(()))
    groups = [{"params": [a]}, {"params": [b], "lr": 0.0}]
    train_loop(groups, lambda: [0], lambda _: {"loss": (a - 1) ** 2 + (b - 1) ** 2},
               HeadTraining(epochs=3, lr=0.1))
    assert float(a.detach()) > 0.1 and float(b.detach()) == 0.0


def test_seeded_batches_cover_every_index_once_and_repeat_with_the_seed():
    first = seeded_batches(10, 4, torch.Generator().manual_seed(5))
    again = seeded_batches(10, 4, torch.Generator().manual_seed(5))
    assert [len(b) for b in first] == [4, 4, 2]
    assert sorted(torch.cat(first).tolist()) == list(range(10))
    assert all(torch.equal(x, y) for x, y in zip(first, again))


def test_bad_settings_and_empty_epochs_are_refused():
    with pytest.raises(ValueError, match="epochs"):
        HeadTraining(epochs=0)
    with pytest.raises(ValueError, match="batch_size"):
        HeadTraining(batch_size=0)
    with pytest.raises(ValueError, match="steps"):
        HeadTraining(steps=0)
    with pytest.raises(ValueError, match="precision"):
        HeadTraining(precision="fp16")
    w, loss = _quadratic()
    with pytest.raises(ValueError, match="epoch 1 had no batch"):
        train_loop([w], lambda: [], loss, HeadTraining(epochs=1))


def test_every_chapter_config_is_the_shared_one_with_its_loss_settings():
    from fgclip.studies.decoupling.heads import FitConfig
    from fgclip.studies.maximage.heads import TrainConfig
    from fgclip.studies.for_retrieval.head import HeadTrainConfig

    for config in (TrainConfig, HeadTrainConfig, FitConfig):
        assert issubclass(config, HeadTraining)
        cfg = config(epochs=2, seed=7)
        with pytest.raises(AttributeError):  # frozen: arms are keyed by their configs
            cfg.epochs = 3
    assert TrainConfig().weight_decay == 0.01 and FitConfig().weight_decay == 1e-4


def test_precision_context_follows_the_parameters_not_cfg_device(monkeypatch):
    """Chapter 3 builds its config without a device and puts the head where the features
    are: the loop must open autocast on the parameters' device, whatever cfg.device says."""
    import fgclip.train.loop as loop

    seen, original = [], loop.autocast_context

    def record(device, precision):
        seen.append((torch.device(device).type, precision))
        return original(device, precision)

    monkeypatch.setattr(loop, "autocast_context", record)
    w, loss = _quadratic()
    train_loop([w], lambda: [[0]], loss, HeadTraining(epochs=1, device="meta", precision="fp32"))
    assert seen == [("cpu", "fp32")]
