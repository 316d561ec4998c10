"""Chapter 4's protocol: gradients reaching unknown entries, calibration controls that
learn, ranking by the paper's p, early stopping and the logistic baseline."""
import numpy as np
import pytest
import torch

from fgclip.methods.decoupling import MultiLabelCLIPHead, score_log_probabilities
from fgclip.metrics.multilabel import known_map
from fgclip.studies.decoupling.arms import logistic_scores
from fgclip.studies.decoupling.controls import FreeText, score_gradients
from fgclip.studies.decoupling.data import known_positive_table, split_validation
from fgclip.studies.decoupling.heads import FitConfig, fit, fit_early_stopping, predict
from fgclip.studies.decoupling.sweep import choose


def _targets():
    g = torch.Generator().manual_seed(0)
    y = (torch.rand(32, 6, generator=g) < 0.3).long()
    y[torch.rand(32, 6, generator=g) < 0.5] = -1  # half unknown
    y[0] = torch.tensor([1, -1, 0, -1, 0, 0])  # both kinds present for sure
    return y


@pytest.mark.parametrize("scoring", ["softmax", "sigmoid", "sigmoid+bias", "sigmoid+affine"])
def test_unknown_entries_get_gradient_under_softmax_only(scoring):
    s = torch.randn(32, 6, generator=torch.Generator().manual_seed(1)) * 3
    g = score_gradients(s, _targets(), scoring, 1.0, 2.0, 0.0)
    assert g["known positive"] > 0 and g["known negative"] > 0
    if scoring == "softmax":
        assert g["unknown"] > 1e-4  # the shared denominator reaches them
    else:
        assert g["unknown"] == 0.0


def _planted_calibrated(a: float, b: float, tau: float, n: int = 4000):
    """Fixed text features; y_ic ~ Bernoulli(σ(a cos_ic + b)): a calibrated problem."""
    g = torch.Generator().manual_seed(0)
    text = torch.randn(4, 8, generator=g)
    x = torch.randn(n, 8, generator=g)
    cos = torch.nn.functional.normalize(x, dim=-1) @ torch.nn.functional.normalize(text, dim=-1).T
    y = (torch.rand(n, 4, generator=g) < torch.sigmoid(a * cos + b)).long()
    return text, x, y


@pytest.mark.parametrize("scoring", ["sigmoid+bias", "sigmoid+affine"])
def test_each_control_fits_a_planted_calibrated_problem(scoring):
    tau = 0.1  # the bias control keeps t = 1/τ = 10, so plant a = 10
    text, x, y = _planted_calibrated(10.0, -3.0, tau)
    head = MultiLabelCLIPHead(None, text, None, None, tau, scoring)  # only β (and log t) train
    dense = torch.zeros(len(x), 1, 1, 1)
    cfg = FitConfig(epochs=15, batch_size=256, lr=0.01, gamma_pos=0.0, gamma_neg=0.0, clip=0.0,
                    weight_decay=0.0, scalar_lr=0.1, seed=0)
    fit(head, dense, x, y.numpy(), cfg)
    assert head.offset.item() == pytest.approx(-3.0, abs=0.4)
    if scoring == "sigmoid+affine":
        assert head.log_scale.exp().item() == pytest.approx(10.0, rel=0.15)
    p = torch.sigmoid(head(dense, x).scores)
    assert p.mean().item() == pytest.approx(y.float().mean().item(), abs=0.02)  # calibrated


def test_with_the_shared_lr_the_offset_control_barely_moves():
    """The old failure: one lr of 0.01 over a short budget leaves β near its start."""
    text, x, y = _planted_calibrated(10.0, -3.0, 0.1)
    head = MultiLabelCLIPHead(None, text, None, None, 0.1, "sigmoid+bias")
    cfg = FitConfig(epochs=2, batch_size=256, lr=0.01, scalar_lr=0.01, calibrate=False,
                    gamma_pos=0.0, gamma_neg=0.0, clip=0.0, weight_decay=0.0)
    fit(head, torch.zeros(len(x), 1, 1, 1), x, y.numpy(), cfg)
    assert head.offset.item() < -9.0  # started at -1/τ = -10, far from the planted -3


def test_calibrate_starts_offset_at_minus_mean_score():
    text, x, _ = _planted_calibrated(10.0, -3.0, 0.1, n=50)
    head = MultiLabelCLIPHead(None, text, None, None, 0.1, "sigmoid+bias")
    beta = head.calibrate(torch.zeros(50, 1, 1, 1), x)
    assert abs(head(torch.zeros(50, 1, 1, 1), x).scores.mean().item()) < 1e-5
    assert beta == pytest.approx(head.offset.item())
    assert np.isnan(MultiLabelCLIPHead(None, text, None, None, 0.1, "softmax").calibrate(
        torch.zeros(50, 1, 1, 1), x))


def test_log_probabilities_are_the_papers_prediction():
    s = torch.tensor([[0.0, 0.0, -5.0], [5.0, 1.0, 0.0]])
    torch.testing.assert_close(score_log_probabilities(s, "softmax").exp(), s.softmax(-1))
    torch.testing.assert_close(score_log_probabilities(s, "sigmoid+affine").exp(), torch.sigmoid(s))
    # category 1 across images: by s image 1 ranks first (1.0 > 0.0), by the softmax p image 0
    # does (0.50 > 0.02): the paper's prediction and the score are different rankings
    p = score_log_probabilities(s, "softmax")
    assert s[1, 1] > s[0, 1] and p[1, 1] < p[0, 1]
    with pytest.raises(ValueError, match="scoring"):
        score_log_probabilities(s, "tanh")


def test_early_stopping_keeps_the_best_validation_epoch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 8, generator=g)
    y = (x[:, :4] > 0).long()
    head = MultiLabelCLIPHead(None, None, FreeText(4, 8, 0), None, 0.1, "sigmoid+affine")
    dense = torch.zeros(300, 1, 1, 1)
    res = fit_early_stopping(head, dense[:200], x[:200], y[:200].numpy(),
                             FitConfig(epochs=6, batch_size=50, lr=0.05), dense[200:], x[200:],
                             y[200:].numpy())
    assert [h["epoch"] for h in res.history] == list(range(1, 7)) and len(res.val_map) == 6
    assert res.best_epoch == int(np.argmax(res.val_map)) + 1
    _, log_p, _ = predict(head, dense[200:], x[200:])
    assert known_map(log_p, y[200:].numpy()) == pytest.approx(max(res.val_map), abs=1e-6)
    assert max(res.val_map) > 0.8


def test_known_map_skips_categories_without_a_known_positive():
    scores = np.array([[0.9, 0.1], [0.2, 0.8], [0.1, 0.3]])
    targets = np.array([[1, -1], [0, 0], [0, -1]])
    assert known_map(scores, targets) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no category"):
        known_map(scores, np.array([[0, -1], [0, 0], [0, -1]]))


def test_split_table_choose_and_logistic():
    fit_idx, val_idx = split_validation(100, 0.2, 0)
    assert len(val_idx) == 20 and not set(fit_idx) & set(val_idx)
    np.testing.assert_array_equal(split_validation(100, 0.2, 0)[1], val_idx)
    with pytest.raises(ValueError, match="val_fraction"):
        split_validation(100, 1.5, 0)
    labels = np.array([[1, 0], [1, 1], [0, 1]])
    masks = {0: {0.5: np.array([[1, 1], [0, 1], [1, 1]], bool)},
             1: {0.5: np.array([[1, 1], [1, 1], [1, 0]], bool)}}
    t = known_positive_table(labels, masks, ["a", "b"])
    assert t.loc["a", "50% known"] == "1-2" and t.loc["b", "50% known"] == "1-2"
    assert choose([1, 2, 3], lambda c: -abs(c - 2))[0] == 2
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 5))
    y = np.stack([x[:, 0] > 0, x[:, 1] > 0], 1).astype(int)
    targets = np.where(rng.random(y.shape) < 0.5, y, -1)
    s = logistic_scores(x, targets, x, 1.0)
    assert known_map(s, y) > 0.9


def test_glove_names_are_normalised(tmp_path):
    from fgclip.methods.decoupling import glove_words, load_glove

    assert glove_words("diningtable") == ["dining", "table"]
    assert glove_words("Traffic_light") == ["traffic", "light"]
    path = tmp_path / "g.txt"
    path.write_text("dining 1 0\ntable 0 1\n")
    torch.testing.assert_close(load_glove(str(path), ["diningtable"])[0],
                               torch.tensor([1.0, 1.0]) / 2 ** 0.5)


def test_square_transform_keeps_the_whole_image_and_cache_key(tmp_path):
    from PIL import Image
    from torchvision import transforms as T

    from fgclip.studies.decoupling.features import cached_features, feature_cache_path, square_transform

    pre = T.Compose([T.Resize(8), T.CenterCrop(8), T.ToTensor()])
    sq = square_transform(pre)
    img = Image.new("RGB", (32, 16))
    img.paste((255, 0, 0), (0, 0, 4, 16))  # a red strip at the left edge
    assert tuple(sq(img).shape) == (3, 8, 8) and sq(img)[0, :, 0].min() > 0.5  # kept
    assert pre(img)[0, :, 0].max() < 0.5  # the centre crop had cut it away
    a = feature_cache_path(tmp_path, "m", "w", tmp_path / "a", "coco", "train", sq)
    assert a != feature_cache_path(tmp_path, "m", "w", tmp_path / "b", "coco", "train", sq)
    assert a != feature_cache_path(tmp_path, "m", "w", tmp_path / "a", "coco", "train", pre)
    calls = []
    enc = lambda p: calls.append(1) or (torch.zeros(len(p), 2, 1, 1), torch.zeros(len(p), 2))  # noqa: E731
    files = [tmp_path / "x.png", tmp_path / "y.png"]
    for f in files:
        img.save(f)
    cached_features(a, files, enc)
    cached_features(a, files, enc)
    assert len(calls) == 1
    cached_features(a, files[:1], enc)  # other files: recomputed
    assert len(calls) == 2


def test_label_matrix_difficult_policy():
    from fgclip.studies.decoupling.data import label_matrix

    objs = [[("cat", (0, 0, 1, 1)), ("dog", (0, 0, 1, 1))], [("cat", (0, 0, 1, 1)), ("cat", (0, 0, 2, 2))]]
    hard = [[False, True], [True, False]]
    np.testing.assert_array_equal(label_matrix(objs, ["cat", "dog"], hard), [[1, -1], [1, 0]])
    np.testing.assert_array_equal(label_matrix(objs, ["cat", "dog"], hard, "positive"), [[1, 1], [1, 0]])
    np.testing.assert_array_equal(label_matrix(objs, ["cat", "dog"]), [[1, 1], [1, 0]])
    with pytest.raises(ValueError, match="difficult"):
        label_matrix(objs, ["cat", "dog"], hard, "drop")


def test_init_gradients_table():
    from fgclip.studies.decoupling.controls import init_gradients

    text, x, y = _planted_calibrated(10.0, -3.0, 0.1, n=64)
    y = y.numpy().copy()
    y[::2, 0] = -1  # some unknown entries
    make = lambda variant, scoring, sd: MultiLabelCLIPHead(None, text, None, None, 0.1, scoring)  # noqa: E731
    t = init_gradients(make, ("softmax", "sigmoid+affine"), torch.zeros(64, 1, 1, 1), x, y, 0,
                       FitConfig(batch_size=32, clip=0.0))
    assert t.loc["softmax", "unknown"] > 0 and t.loc["sigmoid+affine", "unknown"] == 0


def test_known_map_with_one_scorable_column_and_an_all_unknown_one():
    """A tiny validation split can leave one category with a known positive and another with
    no known entry at all; the score is then that category's AP over its known entries."""
    import torch

    from fgclip.metrics.multilabel import known_map

    t = torch.tensor([[1, -1], [-1, -1], [0, -1], [1, -1]])
    s = torch.tensor([[0.9, 0.0], [0.0, 0.0], [0.5, 0.0], [0.2, 0.0]])
    assert known_map(s, t) == pytest.approx((1 + 2 / 3) / 2)  # positives ranked 1st and 3rd
