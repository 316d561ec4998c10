"""A linear probe trained to convergence: L2-regularised logistic regression by full-batch L-BFGS.

For standardised features x_n in R^D (each dimension centred and scaled by its mean and
standard deviation on the fitting rows) and binary targets y_{n,o} in {0, 1} (one column per
output o, each a one-vs-rest problem sharing nothing but the features), the probe minimises

    L(W, b) = -(1/N) sum_n sum_o [y log s(w_o.x_n + b_o) + (1 - y) log(1 - s(w_o.x_n + b_o))]
              + (lambda / 2) ||W||^2                                          (eq-probe)

with s the logistic sigmoid. The problem is convex, so L-BFGS reaches its minimum; the fit
records whether the gradient fell below the tolerance (converged) or the iteration cap was
hit. lambda is chosen on validation data (the unregularised loss), never on a test split.

The *pooled* probe reads dense features x_{n,ij} (one per cell of a g x g grid) with the
image's labels only: each output's cell logits are pooled by log-sum-exp over the cells,

    z_{n,o} = log sum_{ij} exp(w_o.x_{n,ij} + b_o)                           (eq-pooled-probe)

and z replaces w_o.x_n + b_o in eq-probe (multiple-instance learning with a smooth maximum:
an image is positive for o when some cell is). Log-sum-exp of affine functions is convex, and
so is the logistic loss of a convex score with y = 0; with y = 1 it is not, so L-BFGS finds a
local minimum, and the fit is a warm-started path like the global probe's.

Why not scikit-learn's LogisticRegression: a dense probe has one row per cell (N g^2 rows,
about 10^5) and C + K outputs; fitting them as separate one-vs-rest problems took minutes
where one joint full-batch L-BFGS in torch takes seconds, and the objective is the same.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass(frozen=True)
class ProbeFit:
    """What was chosen for one probe, and the validation loss of every lambda tried."""
    arm: str
    l2: float
    score: float  # the validation loss at the chosen lambda
    val_loss: dict[float, float] = field(repr=False)
    iterations: dict[float, int] = field(repr=False)
    final_grad: dict[float, float] = field(repr=False, default_factory=dict)  # largest gradient entry at the end
    converged: bool = True  # every lambda's fit ended with its largest gradient entry below the tolerance
    at_edge: bool = False  # the chosen lambda is the grid's smallest or largest: the grid may be too narrow

    def to_dict(self) -> dict:
        return {"arm": self.arm, "l2": self.l2, "score": self.score, "converged": self.converged,
                "at_edge": self.at_edge,
                "val_loss": {str(k): v for k, v in self.val_loss.items()},
                "iterations": {str(k): v for k, v in self.iterations.items()},
                "final_grad": {str(k): v for k, v in self.final_grad.items()}}


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """(N, D) stays; (N, D, g, g) dense features -> (N g g, D), one row per cell."""
    return x if x.ndim == 2 else x.permute(0, 2, 3, 1).reshape(-1, x.shape[1])


def probe_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """eq-probe's data term: binary cross-entropy summed over outputs, averaged over rows."""
    return nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="sum") / len(y)


def cell_pool(cell_logits: torch.Tensor) -> torch.Tensor:
    """eq-pooled-probe's pooling: (N, g g, O) cell logits -> (N, O), log-sum-exp over the cells."""
    return torch.logsumexp(cell_logits, dim=1)


def fit_logistic(x: torch.Tensor, y: torch.Tensor, l2: float, max_iter: int = 1000, tolerance: float = 1e-4,
                 start: tuple[torch.Tensor, torch.Tensor] | None = None,
                 pool: Callable[[torch.Tensor], torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor, int, float]:
    """Minimise eq-probe for x (R, D), y (R, O) in fp32; with ``pool``, x is (N, g g, D) and
    the logits are ``pool(x W^T + b)`` (eq-pooled-probe, :func:`cell_pool`). Returns W (O, D), b (O,), the
    iterations used and the largest gradient entry at the end. L-BFGS stops when that entry
    is below ``tolerance`` or when no step lowers the loss any more (fp32's limit); fewer than
    ``max_iter`` iterations with the final gradient below ``tolerance`` means converged.
    ``start``: (W, b) to begin from (zeros otherwise); without ``pool`` the problem is convex,
    so the start changes the iterations, not the minimum (with it, the local minimum reached
    may depend on the start)."""
    x, y = x.float(), y.float()
    w0, b0 = start if start is not None else (torch.zeros(y.shape[1], x.shape[-1]), torch.zeros(y.shape[1]))
    w = w0.clone().requires_grad_(True)  # (O, D)
    b = b0.clone().requires_grad_(True)  # (O,)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=max_iter, max_eval=2 * max_iter, tolerance_grad=tolerance,
                            tolerance_change=0.0, history_size=20, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        logits = x @ w.T + b  # (R, O), or (N, g g, O) cell logits before the pooling
        loss = probe_loss(logits if pool is None else pool(logits), y) + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss
    opt.step(closure)
    closure()  # the gradient at the final point
    grad = max(float(w.grad.abs().max()), float(b.grad.abs().max()))
    return w.detach(), b.detach(), int(opt.state[opt._params[0]]["n_iter"]), grad


def _regularisation_path(xf: torch.Tensor, yf: torch.Tensor, xv: torch.Tensor, yv: torch.Tensor, arm: str,
                         l2s: tuple[float, ...], max_iter: int, tolerance: float,
                         pool: Callable[[torch.Tensor], torch.Tensor] | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor, ProbeFit]:
    """What :func:`fit_probe` and :func:`fit_pooled_probe` share: features (R, D), or cells
    (N, g g, D) with ``pool``, standardised by the fitting rows; eq-probe fitted at every lambda
    from the largest down, each starting from the previous minimum (a regularisation path: the
    same minima in fewer iterations); the lambda with the lowest validation loss kept. Returns
    its W (O, D) and b (O,) with the standardisation folded in (they read raw features) and
    the fit's record."""
    if len(l2s) < 3 or any(v <= 0 for v in l2s):
        raise ValueError(f"l2s needs at least 3 positive values, got {l2s}")
    rows = xf.reshape(-1, xf.shape[-1])
    mean, std = rows.mean(0), rows.std(0).clamp_min(1e-6)  # (D,) standardisation from the fitting rows
    xf, xv = (xf - mean) / std, (xv - mean) / std
    logits = (lambda x, w, b: x @ w.T + b) if pool is None else (lambda x, w, b: pool(x @ w.T + b))
    fits, val_loss, iterations, grads, start = {}, {}, {}, {}, None
    for l2 in sorted(l2s, reverse=True):
        w, b, iterations[l2], grads[l2] = fit_logistic(xf, yf, l2, max_iter, tolerance, start, pool)
        fits[l2] = start = (w, b)
        with torch.no_grad():
            val_loss[l2] = float(probe_loss(logits(xv, w, b), yv.float()))
    val_loss, iterations, grads = ({k: d[k] for k in l2s} for d in (val_loss, iterations, grads))  # grid order
    best = min(l2s, key=lambda v: (val_loss[v], -v))  # a tie goes to the stronger regularisation
    w, b = fits[best]
    return w / std, b - (w / std) @ mean, ProbeFit(arm=arm, l2=best, score=val_loss[best], val_loss=val_loss,
                                                   iterations=iterations, final_grad=grads,
                                                   converged=all(g <= tolerance for g in grads.values()),
                                                   at_edge=best in (min(l2s), max(l2s)))


def fit_probe(x_fit: torch.Tensor, y_fit: torch.Tensor, x_val: torch.Tensor, y_val: torch.Tensor, arm: str,
              l2s: tuple[float, ...] = (1e-4, 1e-3, 1e-2), max_iter: int = 1000,
              tolerance: float = 1e-4) -> tuple[nn.Module, ProbeFit]:
    """Fit eq-probe at every lambda in ``l2s``, keep the one with the lowest validation loss
    (:func:`_regularisation_path`).

    x: (N, D) global features with y (N, O), or (N, D, g, g) dense features with y (N, O, g, g).
    Returns ``nn.Linear(D, O)`` for global features, a 1 x 1 ``nn.Conv2d(D, O)`` for dense ones.
    """
    w, b, fit = _regularisation_path(as_rows(x_fit).float(), as_rows(y_fit), as_rows(x_val).float(), as_rows(y_val),
                                     arm, l2s, max_iter, tolerance)
    probe = nn.Linear(w.shape[1], w.shape[0]) if x_fit.ndim == 2 else nn.Conv2d(w.shape[1], w.shape[0], 1)
    with torch.no_grad():
        probe.weight.copy_(w.reshape(probe.weight.shape))
        probe.bias.copy_(b)
    return probe.eval(), fit


class PooledProbe(nn.Module):
    """The fitted pooled probe: a 1 x 1 convolution (the per-cell logits) and eq-pooled-probe's pooling."""

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        self.conv = conv

    def cell_logits(self, x: torch.Tensor) -> torch.Tensor:
        """(N, D, g, g) -> (N, O, g, g): w_o.x_{n,ij} + b_o, each output's map over the cells."""
        return self.conv(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, D, g, g) -> (N, O): z_{n,o} of eq-pooled-probe."""
        return cell_pool(self.cell_logits(x).flatten(2).transpose(1, 2))


def fit_pooled_probe(x_fit: torch.Tensor, y_fit: torch.Tensor, x_val: torch.Tensor, y_val: torch.Tensor, arm: str,
                     l2s: tuple[float, ...] = (1e-4, 1e-3, 1e-2), max_iter: int = 1000,
                     tolerance: float = 1e-4) -> tuple[PooledProbe, ProbeFit]:
    """eq-pooled-probe fitted on dense features x (N, D, g, g) with image labels y (N, O), as
    :func:`fit_probe` fits eq-probe: standardised by the fitting cells, lambda from ``l2s`` by
    the validation loss (the pooled logits' cross-entropy, as eq-probe's data term), a path
    from the largest lambda down."""
    if x_fit.ndim != 4 or y_fit.ndim != 2:
        raise ValueError(f"fit_pooled_probe needs x (N, D, g, g) and y (N, O), got {tuple(x_fit.shape)} and {tuple(y_fit.shape)}")
    cells = lambda x: x.float().flatten(2).transpose(1, 2)  # (N, D, g, g) -> (N, g g, D)
    w, b, fit = _regularisation_path(cells(x_fit), y_fit, cells(x_val), y_val, arm, l2s, max_iter, tolerance, cell_pool)
    conv = nn.Conv2d(w.shape[1], w.shape[0], 1)
    with torch.no_grad():
        conv.weight.copy_(w.reshape(conv.weight.shape))
        conv.bias.copy_(b)
    return PooledProbe(conv).eval(), fit
