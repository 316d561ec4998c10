"""Chapter 4's seeded sweep: every arm at every known-label proportion and seed, learning rates
chosen on validation, and the 'what was chosen on which split' table."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from torch import nn

from ...metrics.multilabel import known_map, per_class_ap
from .arms import FULL, LOGISTIC, TRAINED, UNTRAINED, ZERO_SHOT, Arm, Trainer, logistic_scores


def choose(candidates: list, score: Callable[[object], float]) -> tuple[object, dict]:
    """The candidate with the highest ``score`` (ties: the first); returns it and all scores."""
    if not candidates:
        raise ValueError("choose: no candidates")
    scores = {c: score(c) for c in candidates}
    return max(scores, key=scores.get), scores


@dataclass
class Sweep:
    """What :func:`run_sweep` trained and measured."""

    runs: pd.DataFrame  # one row per (variant, known, seed): mAP on p and on s, best epoch
    ap: dict  # (Arm, ρ, "p" | "s") -> (n_seeds, C) per-category test AP
    lr: dict  # Arm -> (chosen lr, {lr: best validation mAP})
    heads: dict  # Arm -> Trained at the middle ρ and the first seed
    attention: list  # the kept arm's test attention maps (N, C, h, w) at the middle ρ, one per seed
    selection: pd.DataFrame | None = None  # 'what was chosen on which split' (:func:`run_protocol`)


def run_sweep(trainer: Trainer, targets: dict, fit_idx: np.ndarray, val_idx: np.ndarray,
              proportions: list[float], seeds: list[int], lr_candidates: list[float],
              y_test: np.ndarray, fixed: dict[Arm, Callable], keep: Arm = FULL) -> Sweep:
    """Every :data:`TRAINED` arm at every proportion and seed, plus the untrained rows.

    The learning rate of each arm is chosen on validation at the middle proportion and the
    first seed (that run is kept); every run stops at its best validation epoch.
    targets[(seed, ρ)]: (N_train, C) in {1, 0, -1}; fixed[arm](ρ, seed) -> (s, log p) on the
    test images for rows that do not train.
    """
    rho_mid, runs, ap, lr, heads, attention = proportions[len(proportions) // 2], [], {}, {}, {}, []

    def record(arm, rho, sd, s, log_p, epoch=np.nan):
        for kind, x in (("p", log_p), ("s", s)):
            ap.setdefault((arm, rho, kind), []).append(per_class_ap(x, y_test))
        runs.append({"variant": arm.name, "known": rho, "seed": sd, "epochs": epoch,
                     "mAP on p": ap[arm, rho, "p"][-1].mean(), "mAP on s": ap[arm, rho, "s"][-1].mean()})

    split = lambda sd, rho: (targets[sd, rho][fit_idx], targets[sd, rho][val_idx])  # noqa: E731
    for arm in TRAINED:
        trained = {c: trainer.train(arm, *split(seeds[0], rho_mid), c, seeds[0]) for c in lr_candidates}
        lr[arm] = choose(lr_candidates, lambda c: max(trained[c].result.val_map))
        heads[arm] = trained[lr[arm][0]]
    for rho in proportions:
        for sd in seeds:
            for arm, rows in fixed.items():
                record(arm, rho, sd, *rows(rho, sd))
            for arm in TRAINED:
                head, res = heads[arm] if (rho, sd) == (rho_mid, seeds[0]) else \
                    trainer.train(arm, *split(sd, rho), lr[arm][0], sd)
                s, log_p, att = trainer.test(head)
                record(arm, rho, sd, s, log_p, res.best_epoch)
                if arm == keep and rho == rho_mid:
                    attention.append(att)
    ap = {k: np.stack(v) for k, v in ap.items()}
    return Sweep(pd.DataFrame(runs), ap, lr, heads, attention)


def run_protocol(trainer: Trainer, targets: dict, fit_idx: np.ndarray, val_idx: np.ndarray,
                 proportions: list[float], seeds: list[int], lr_candidates: list[float],
                 y_test: np.ndarray, zero_shot: nn.Module, seed: int,
                 c_candidates: tuple[float, ...] = (0.1, 1.0, 10.0)) -> Sweep:
    """The chapter's whole comparison: :func:`run_sweep` over the trained arms plus three
    untrained rows (``zero_shot``'s head, the full model at its initialisation, and a
    logistic regression per category whose C is chosen on validation at the middle ρ and
    seed ``seed``), with the 'what was chosen on which split' table in ``selection``."""
    rho_mid = proportions[len(proportions) // 2]
    fit_x, val_x, test_x = trainer.fit_feats.pooled, trainer.val_feats.pooled, trainer.test_feats.pooled
    t_fit, t_val = targets[seed, rho_mid][fit_idx], targets[seed, rho_mid][val_idx]
    c_reg, _ = choose(list(c_candidates), lambda c: known_map(logistic_scores(fit_x, t_fit, val_x, c), t_val))
    zs = trainer.test(zero_shot)

    def untrained(rho: float, sd: int) -> tuple[np.ndarray, np.ndarray]:
        pred = trainer.test(trainer.make(UNTRAINED.variant, UNTRAINED.scoring, sd))
        return pred.scores, pred.log_p

    def logistic(rho: float, sd: int) -> tuple[np.ndarray, np.ndarray]:
        s = logistic_scores(fit_x, targets[sd, rho][fit_idx], test_x, c_reg)
        return s, s  # a decision value is its own log-odds ranking

    fixed = {ZERO_SHOT: lambda rho, sd: (zs.scores, zs.log_p), UNTRAINED: untrained, LOGISTIC: logistic}
    sweep = run_sweep(trainer, targets, fit_idx, val_idx, proportions, seeds, lr_candidates, y_test, fixed)
    sweep.selection = selection_table(sweep, lr_candidates, trainer.cfg.epochs, rho_mid, seed, len(val_idx), [{
        "hyperparameter": "C (logistic regression)", "candidates": f"[{', '.join(f'{c:g}' for c in c_candidates)}]", "chosen": c_reg,
        "criterion": f"validation mAP, {rho_mid:.0%} known, seed {seed}",
        "split": f"validation ({len(val_idx)} training images)"}])
    return sweep


def selection_table(sweep: Sweep, lr_candidates: list, max_epochs: int, rho_mid: float,
                    seed: int, n_val: int, extra: list[dict] = ()) -> pd.DataFrame:
    """'What was chosen on which split': lr and epochs per arm (+ ``extra`` rows)."""
    split = f"validation ({n_val} training images)"
    rows = [{"hyperparameter": f"lr ({arm.name})", "candidates": str(lr_candidates), "chosen": c,
             "criterion": f"best validation mAP on p, {rho_mid:.0%} known, seed {seed}", "split": split}
            for arm, (c, _) in sweep.lr.items()]
    runs = sweep.runs
    for arm in sweep.lr:
        ep = runs.loc[runs.variant == arm.name, "epochs"]
        rows.append({"hyperparameter": f"epochs ({arm.name})", "candidates": f"1..{max_epochs}",
                     "chosen": f"median {ep.median():.0f} (range {ep.min():.0f}-{ep.max():.0f})",
                     "criterion": "early stopping on validation mAP on p, every run", "split": split})
    return pd.DataFrame([*rows, *extra])
