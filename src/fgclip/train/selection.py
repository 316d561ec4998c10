"""One selection routine for every trained arm: learning rate and epochs by early stopping
on a validation split, averaged over seeds, from one grid and one step budget.

For an arm, ``run(lr, seed, epochs)`` trains from scratch for ``epochs`` epochs and returns
the validation score after each epoch, v_{lr,s}(e). With the grid's learning rates L and
seeds S, the choice is

    (lr*, e*) = argmax_{lr in L, e <= E} (1/|S|) sum_{s in S} v_{lr,s}(e)          (eq-selection)

(argmin for a loss), ties going to the smaller e, then the smaller lr. With the grid's rule
"early-stop" (an early stopper with patience P watching the seeds' mean curve) e ranges only
up to the epoch where that curve first went P epochs without beating its best, E_stop(lr):

    (lr*, e*) = argmax_{lr in L, e <= E_stop(lr)} (1/|S|) sum_{s in S} v_{lr,s}(e)       (eq-selection-stop)

so a second peak that a curve reaches after such a stretch (a late recovery, often through
noise) cannot be chosen. That is the default; the rule "budget" (every epoch of the budget may be
chosen, the rule of the book's first versions) is kept for comparison. Every arm gets the
same L, S and budget E, so no arm is favoured by a finer search; the curves are kept, so a
reader can see that each arm converged or did not. Converged means the mean curve at lr*
peaked at least P epochs before the budget ran out (P, the patience, is a quarter of E, at
least 1): a best epoch near the budget's end may be a curve still rising through noise. A
choice at the grid's smallest or largest lr is flagged too (``lr_edge``): a lr beyond the
grid might have done better; so is a best epoch of 1 (the curve only fell after its first point).
Nothing here ever sees a test split: the caller's ``run`` scores validation data only.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

RULES = ("budget", "early-stop")


@dataclass(frozen=True)
class SelectionGrid:
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    seeds: tuple[int, ...] = (0, 1)  # every arm of a verdict is chosen over at least 2
    epochs: int = 20  # the budget E: every run of every arm trains this many epochs at most
    higher_is_better: bool = True
    rule: str = "early-stop"  # up to the stop of a patience-P stopper (eq-selection-stop); "budget": any epoch up to E

    @property
    def patience(self) -> int:
        """P: epochs the chosen curve must have run past its best for 'converged' (E/4, at least 1)."""
        return max(1, self.epochs // 4)

    def __post_init__(self) -> None:
        if len(self.lrs) < 3 or any(lr <= 0 for lr in self.lrs):
            raise ValueError(f"lrs needs at least 3 positive values, got {self.lrs}")
        ratios = np.diff(np.log(sorted(self.lrs)))
        if not np.allclose(ratios, ratios[0], rtol=0.15):  # 1-3-10 steps count as log-spaced
            raise ValueError(f"lrs must be log-spaced, got {self.lrs}")
        if len(self.seeds) < 1 or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds needs at least 1 seed, all distinct, got {self.seeds}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be at least 1, got {self.epochs}")
        if self.rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {self.rule!r}")


@dataclass(frozen=True)
class Selection:
    """What was chosen for one arm, on what, and the curves it was chosen from."""
    arm: str
    lr: float
    epochs: int
    score: float  # the mean validation score at (lr, epochs)
    curves: dict[float, list[list[float]]] = field(repr=False)  # lr -> one curve per seed
    seeds: tuple[int, ...] = ()
    budget: int = 0
    converged: bool = True  # False when the best epoch lies within the patience of the budget's end
    lr_edge: str = ""  # "smallest" / "largest" when lr* is at that end of the grid, else ""
    rule: str = "budget"  # the grid's rule it was chosen by (eq-selection or eq-selection-stop)
    after_stop: str = ""  # early-stop: where a mean curve beat the chosen score after its stop ("lr 0.003, epoch 10"), else ""

    @property
    def patience(self) -> int:
        """P of the grid it was chosen on (E/4, at least 1)."""
        return max(1, self.budget // 4)

    def caveat(self) -> str:
        """'' for a converged choice inside the grid, else what to doubt, in words."""
        parts = [] if self.converged else [f"best within the budget's last {self.patience} epochs: may not have "
                                           f"converged"]
        parts += [f"lr at the grid's {self.lr_edge} end"] if self.lr_edge else []
        # the other edge of the budget: the curve only fell after its first point (a smaller lr,
        # or a finer first step, might have done better); not a failure to converge
        parts += ["best at the first epoch: the curve only fell after it"] if self.epochs == 1 < self.budget else []
        parts += [f"beaten after an early stop ({self.after_stop}): the stop may have cut a slow start"] \
            if self.after_stop else []
        return f" ({'; '.join(parts)})" if parts else ""

    def mean_curve(self, lr: float | None = None) -> np.ndarray:
        return np.asarray(self.curves[self.lr if lr is None else lr]).mean(axis=0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["curves"] = {str(lr): c for lr, c in self.curves.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Selection":
        """The inverse of :meth:`to_dict` (lr keys back to floats, seeds to a tuple)."""
        return cls(**{**d, "curves": {float(lr): c for lr, c in d["curves"].items()}, "seeds": tuple(d["seeds"])})


def select_lr_epochs(arm: str, run: Callable[[float, int, int], list[float]],
                     grid: SelectionGrid = SelectionGrid()) -> Selection:
    """Train ``arm`` at every (lr, seed) of the grid for the budget and pick (lr*, e*) by
    eq-selection. ``run(lr, seed, epochs)`` returns one validation score per epoch."""
    curves: dict[float, list[list[float]]] = {}
    for lr in grid.lrs:
        curves[lr] = []
        for s in grid.seeds:
            curve = [float(v) for v in run(lr, s, grid.epochs)]
            if len(curve) != grid.epochs or not np.isfinite(curve).all():
                raise ValueError(f"arm {arm!r}: run(lr={lr}, seed={s}) returned {len(curve)} scores "
                                 f"(finite: {np.isfinite(curve).all()}), expected {grid.epochs} finite ones")
            curves[lr].append(curve)
    sign = 1.0 if grid.higher_is_better else -1.0
    means = {lr: sign * np.mean(c, axis=0) for lr, c in curves.items()}  # (E,) per lr, higher is better
    last = {lr: stop_epoch(m, grid.patience) if grid.rule == "early-stop" else grid.epochs for lr, m in means.items()}
    best = max(((float(m[e]), -e, -lr, lr, e) for lr, m in means.items() for e in range(last[lr])))
    _, _, _, lr, e = best
    # the best point any lr's mean curve reached after its stop (none under the rule "budget")
    later = max(((float(m[k]), lr, k) for lr, m in means.items() for k in range(last[lr], grid.epochs)), default=None)
    after = f"lr {later[1]:g}, epoch {later[2] + 1}" if later is not None and later[0] > best[0] else ""
    return Selection(arm=arm, lr=lr, epochs=e + 1, score=float(np.mean(curves[lr], axis=0)[e]),
                     curves=curves, seeds=tuple(grid.seeds), budget=grid.epochs,
                     converged=e + 1 <= grid.epochs - grid.patience, lr_edge=grid_edge(lr, grid.lrs),
                     rule=grid.rule, after_stop=after)


def stop_epoch(curve: np.ndarray, patience: int) -> int:
    """E_stop: the 1-based epoch at which an early stopper with ``patience`` P, watching
    ``curve`` (higher is better), stops: the first epoch P epochs after the best so far; the
    curve's length when that never happens. Only epochs up to it can be chosen."""
    best = 0
    for e in range(1, len(curve)):
        if curve[e] > curve[best]:
            best = e
        elif e - best >= patience:
            return e + 1
    return len(curve)


def grid_edge(lr: float, lrs: tuple[float, ...]) -> str:
    """'smallest' or 'largest' when ``lr`` is that end of the grid ``lrs``, else ''."""
    return "smallest" if lr == min(lrs) else "largest" if lr == max(lrs) else ""
