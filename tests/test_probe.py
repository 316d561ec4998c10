"""The linear probe of chapter 0 (eq-probe): the same optimum as scikit-learn's logistic
regression, a dense layout that is the global one applied per cell, the standardisation
folded into the returned layer, and flags that fire when the fit is cut short or the chosen
lambda sits on the grid's edge. The pooled probe (eq-pooled-probe): the global probe when the
grid has one cell, log-sum-exp of its own cell logits, and a label carried by one cell
anywhere in the image, which it reads and a probe on the cells' mean does not."""
import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from fgclip.metrics.multilabel import mean_average_precision
from fgclip.train.probe import as_rows, fit_logistic, fit_pooled_probe, fit_probe, probe_loss


def _problem(n=400, d=6, o=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(o, d, generator=g)
    y = (torch.rand(n, o, generator=g) < torch.sigmoid(x @ w.T)).float()  # (n, o) noisy labels
    return x, y


def test_fit_logistic_reaches_scikit_learns_optimum():
    x, y = _problem()
    l2 = 1e-2
    w, b, n_iter, grad = fit_logistic(x, y, l2)
    assert n_iter < 1000 and grad < 1e-3
    for o in range(y.shape[1]):  # sklearn: C sum_n loss + |w|^2 / 2  <=>  (1/N) sum_n loss + (1 / (2 C N)) |w|^2
        ref = LogisticRegression(C=1.0 / (l2 * len(x)), tol=1e-10, max_iter=10_000).fit(x.numpy(), y[:, o].numpy())
        np.testing.assert_allclose(w[o].numpy(), ref.coef_[0], atol=2e-3)
        np.testing.assert_allclose(b[o].item(), ref.intercept_[0], atol=2e-3)


def test_probe_reads_raw_features_with_the_standardisation_folded_in():
    x, y = _problem()
    x = x * torch.tensor([1.0, 10.0, 0.1, 3.0, 1.0, 0.5]) + 4.0  # scales and offsets the probe must undo
    probe, fit = fit_probe(x[:300], y[:300], x[300:], y[300:], "p", (1e-3, 1e-2, 1e-1))
    mean, std = x[:300].mean(0), x[:300].std(0)
    w, b, _, _ = fit_logistic((x[:300] - mean) / std, y[:300], fit.l2)  # from zeros: the same minimum,
    with torch.no_grad():  # to the gradient tolerance (the probe's fit started from the larger lambda's)
        np.testing.assert_allclose(probe(x[300:]).numpy(), (((x[300:] - mean) / std) @ w.T + b).numpy(), atol=5e-3)
        assert fit.score == pytest.approx(float(probe_loss(probe(x[300:]), y[300:])), rel=1e-4)
    assert fit.converged and set(fit.val_loss) == {1e-3, 1e-2, 1e-1}


def test_dense_probe_is_the_global_probe_applied_to_every_cell():
    x, y = _problem(n=6 * 16, d=5, o=2)
    dense_x = x.reshape(6, 4, 4, 5).permute(0, 3, 1, 2)  # (N, D, g, g): row-major cells
    dense_y = y.reshape(6, 4, 4, 2).permute(0, 3, 1, 2)
    assert torch.equal(as_rows(dense_x), x) and torch.equal(as_rows(dense_y), y)
    conv, fit_d = fit_probe(dense_x[:4], dense_y[:4], dense_x[4:], dense_y[4:], "dense", (1e-3, 1e-2, 1e-1))
    lin, fit_g = fit_probe(x[:64], y[:64], x[64:], y[64:], "global", (1e-3, 1e-2, 1e-1))
    assert isinstance(conv, torch.nn.Conv2d) and isinstance(lin, torch.nn.Linear)
    assert fit_d.l2 == fit_g.l2 and fit_d.score == pytest.approx(fit_g.score, rel=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(as_rows(conv(dense_x[4:])).numpy(), lin(x[64:]).numpy(), atol=1e-4)


def test_flags_fire_when_the_fit_is_cut_short_or_lambda_sits_on_the_edge():
    x, y = _problem()
    _, short = fit_probe(x[:300], y[:300], x[300:], y[300:], "p", (1e-3, 1e-2, 1e-1), max_iter=2)
    assert not short.converged
    _, heavy = fit_probe(x[:300], y[:300], x[300:], y[300:], "p", (10.0, 100.0, 1000.0))
    assert heavy.l2 == 10.0 and heavy.at_edge  # the data want less shrinkage than the grid offers
    with pytest.raises(ValueError, match="l2s"):
        fit_probe(x, y, x, y, "p", (1e-3, 1e-2))


def test_the_regularisation_path_reaches_the_same_minimum_in_fewer_iterations():
    x, y = _problem(n=2000, d=20, o=4, seed=1)
    xs = (x - x.mean(0)) / x.std(0)
    cold = fit_logistic(xs, y, 1e-4)
    warm = fit_logistic(xs, y, 1e-4, start=fit_logistic(xs, y, 1e-3)[:2])
    loss = lambda w, b: float(probe_loss(xs @ w.T + b, y) + 0.5 * 1e-4 * (w * w).sum())
    assert loss(*warm[:2]) == pytest.approx(loss(*cold[:2]), rel=1e-5)
    assert warm[2] < cold[2] and warm[3] < 1e-4
    _, fit = fit_probe(x[:1500], y[:1500], x[1500:], y[1500:], "p", (1e-2, 1e-4, 1e-3))
    assert list(fit.val_loss) == [1e-2, 1e-4, 1e-3]  # reported in the grid's order, fitted largest first


def test_pooled_probe_on_one_cell_is_the_global_probe():
    x, y = _problem()
    dense = x[:, :, None, None]  # (N, D, 1, 1): log-sum-exp over one cell is the cell's logit
    pooled, fit_p = fit_pooled_probe(dense[:300], y[:300], dense[300:], y[300:], "pooled", (1e-3, 1e-2, 1e-1))
    lin, fit_g = fit_probe(x[:300], y[:300], x[300:], y[300:], "global", (1e-3, 1e-2, 1e-1))
    assert fit_p.l2 == fit_g.l2 and fit_p.score == pytest.approx(fit_g.score, rel=1e-4) and fit_p.converged
    with torch.no_grad():
        np.testing.assert_allclose(pooled(dense[300:]).numpy(), lin(x[300:]).numpy(), atol=1e-3)


def _one_cell_world(n=600, d=8, g=4, seed=0):
    """Label o is on when a cell anywhere carries feature o at +5 (one random cell per label);
    every other entry is noise. The cells' mean dilutes that cell g^2 times."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, g, g, generator=gen)
    y = (torch.rand(n, 2, generator=gen) < 0.5).float()
    for i in range(n):
        for o in range(2):
            if y[i, o]:
                r, c = torch.randint(g, (2,), generator=gen).tolist()
                x[i, o, r, c] += 5.0
    return x, y


def test_pooled_probe_reads_a_label_held_by_one_cell_and_pools_its_own_cell_logits():
    x, y = _one_cell_world()
    pooled, fit = fit_pooled_probe(x[:400], y[:400], x[400:500], y[400:500], "pooled", (1e-4, 1e-3, 1e-2))
    mean_probe, _ = fit_probe(x[:400].mean((2, 3)), y[:400], x[400:500].mean((2, 3)), y[400:500], "mean",
                              (1e-4, 1e-3, 1e-2))
    with torch.no_grad():
        z = pooled(x[500:])
        cells = pooled.cell_logits(x[500:])  # (N, O, g, g)
        np.testing.assert_allclose(z.numpy(), torch.logsumexp(cells.flatten(2), 2).numpy(), atol=1e-5)
        got = mean_average_precision(z, y[500:].long())
        diluted = mean_average_precision(mean_probe(x[500:].mean((2, 3))), y[500:].long())
    assert got > 0.97 and got > diluted + 0.05, (got, diluted)
    assert fit.score == pytest.approx(float(probe_loss(z_val := pooled(x[400:500]).detach(), y[400:500])), rel=1e-5)
    assert z_val.shape == (100, 2)
    _assert_stationary(pooled, x[:400], y[:400], fit.l2)
    hits = [cells[i, 0].argmax() == x[500 + i, 0].argmax() for i in range(100) if y[500 + i, 0]]
    assert np.mean(hits) > 0.9  # its map peaks on the cell that carries the label


def _assert_stationary(pooled, x, y, l2):
    """The returned probe, mapped back to standardised cells, is where eq-pooled-probe's
    gradient vanishes: the fit minimised the log-sum-exp pooled loss, not another one."""
    cells = x.flatten(2).transpose(1, 2)  # (N, g g, D)
    flat = cells.reshape(-1, cells.shape[-1])
    mean, std = flat.mean(0), flat.std(0)
    w_raw, b_raw = pooled.conv.weight[:, :, 0, 0].detach(), pooled.conv.bias.detach()
    w = (w_raw * std).requires_grad_(True)  # back to standardised features: w_std = w_raw std
    b = (b_raw + w_raw @ mean).requires_grad_(True)
    loss = probe_loss(torch.logsumexp((cells - mean) / std @ w.T + b, dim=1), y) + 0.5 * l2 * (w * w).sum()
    loss.backward()
    assert max(float(w.grad.abs().max()), float(b.grad.abs().max())) < 1e-3


def test_pooled_probe_names_the_shapes_it_needs():
    x, y = _one_cell_world(n=20)
    with pytest.raises(ValueError, match=r"x \(N, D, g, g\) and y \(N, O\)"):
        fit_pooled_probe(x.mean((2, 3)), y, x.mean((2, 3)), y, "p")
    with pytest.raises(ValueError, match="l2s"):
        fit_pooled_probe(x, y, x, y, "p", (1e-3, 1e-2))
