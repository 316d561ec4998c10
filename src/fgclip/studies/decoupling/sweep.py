"""Chapter 4's seeded sweep: every trained arm's learning rate and epochs chosen by one
:class:`~fgclip.train.selection.SelectionGrid` on the validation split, then each arm evaluated
at every known-label proportion and seed; the untrained rows beside them, and the 'what was
chosen on which split' table."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
from torch import nn

from ...metrics.multilabel import known_map, per_class_ap
from ...train.selection import Selection, SelectionGrid, select_lr_epochs, stop_epoch
from .arms import FULL, LOGISTIC, TRAINED, UNTRAINED, ZERO_SHOT, Arm, Trainer, logistic_scores
from .comparisons import a_a_verdict
from .heads import Prediction, predict
from .stacked import Member, MemberRuns


def choose(candidates: list, score: Callable[[object], float]) -> tuple[object, dict]:
    """The candidate with the highest ``score`` (ties: the first); returns it and all scores."""
    if not candidates:
        raise ValueError("choose: no candidates")
    scores = {c: score(c) for c in candidates}
    return max(scores, key=scores.get), scores


@dataclass
class Sweep:
    """What :func:`run_sweep` trained and measured."""

    runs: pd.DataFrame  # one row per (variant, known, seed): mAP on p and on s, epochs trained
    ap: dict  # (Arm, ρ, "p" | "s") -> (n_seeds, C) per-category test AP, seeds in the given order
    selections: dict  # Arm -> Selection (lr and epochs chosen on validation, with the curves)
    heads: dict  # Arm -> its head at the selection's ρ, the first seed, the chosen (lr, epochs)
    attention: list  # the kept arm's test attention maps (N, C, h, w) at the selection's ρ, one per seed
    selection: pd.DataFrame | None = None  # 'what was chosen on which split' (:func:`run_protocol`)
    checks: dict = field(default_factory=dict)  # Arm -> :func:`convergence_check` of a selection at the budget's end


def select_and_evaluate(trainer: Trainer, arm: Arm, grid: SelectionGrid, rho_sel: float,
                        proportions: list[float], seeds: list[int], targets: Callable, check_epochs: int = 0
                        ) -> tuple[Selection, dict, nn.Module, dict | None]:
    """One arm: train every (lr, seed) of ``grid`` at ρ = ``rho_sel`` for the grid's budget
    side by side, choose (lr*, e*) by :func:`~fgclip.train.selection.select_lr_epochs` on the
    validation curves, then predict the test images at every (ρ, seed).

    The grid's own runs at lr* give their state after epoch e* (what training e* epochs
    gives); every other (ρ, seed) is trained afresh at lr* for e* epochs. targets(member) ->
    (fit, validation) targets. A choice within ``check_epochs`` of the budget's end gets its
    :func:`convergence_check`. Returns the selection, {(ρ, seed): Prediction}, the head of
    (rho_sel, seeds[0]) when that seed is in the grid (else of the first grid seed) and the check (or None).
    """
    grid_members = [Member(lr, sd, rho_sel) for lr in grid.lrs for sd in grid.seeds]
    runs = trainer.train_members(arm, grid_members, targets, grid.epochs)
    curves = {(m.lr, m.seed): runs.curves[i].tolist() for i, m in enumerate(grid_members)}
    sel = select_lr_epochs(arm.name, lambda lr, sd, epochs: curves[lr, sd][:epochs], grid)
    check = None
    if check_epochs > 0 and sel.epochs > grid.epochs - check_epochs:  # before the runs are read at e*
        check = convergence_check(trainer, arm, sel, runs, targets, check_epochs)
    preds: dict[tuple[float, int], Prediction] = {}
    kept = None
    for i, m in enumerate(grid_members):
        if m.lr == sel.lr and m.seed in seeds:
            head = runs.head_at(i, sel.epochs)
            preds[rho_sel, m.seed] = trainer.test(head)
            if kept is None or m.seed == seeds[0]:
                kept = head
    rest = [Member(sel.lr, sd, rho) for rho in proportions for sd in seeds if (rho, sd) not in preds]
    if rest:  # read at their end only: no validation pass
        more = trainer.train_members(arm, rest, targets, sel.epochs, validate=False)
        for i, m in enumerate(rest):
            preds[m.rho, m.seed] = trainer.test(more.heads[i])
            if kept is None and (m.rho, m.seed) == (rho_sel, seeds[0]):
                kept = more.heads[i]
    return sel, preds, kept, check


def convergence_check(trainer: Trainer, arm: Arm, sel: Selection, runs: MemberRuns, targets: Callable,
                      extra: int) -> dict:
    """Would more epochs have helped an arm chosen near its budget's end (a peak there can be a
    dip in a curve still rising)? The grid's ``runs`` at the chosen lr (its seeds) are trained
    on from the budget's end to budget + ``extra`` epochs
    (:func:`~fgclip.studies.decoupling.stacked.continue_members`: the steps of a run that long
    from the start); the restored heads must score the grid's last validation point again.
    The choice stands (every arm keeps the one budget); the record says which epoch the selection's
    own rule (eq-selection-stop, the selection's patience) would pick on the mean validation curve
    over the longer horizon: ``converged`` when it is at or before the chosen epoch."""
    which = [i for i, m in enumerate(runs.members) if m.lr == sel.lr and m.seed in sel.seeds]
    if runs.curves.shape[1] != sel.budget or not which:
        raise ValueError(f"convergence check of {arm.name}: needs the grid's validated runs at lr {sel.lr:g}")
    more, deviation = trainer.continue_members(runs, which, targets, extra)
    if deviation > 5e-3:  # float noise moves a validation mAP by far less
        raise RuntimeError(f"convergence check of {arm.name}: the restored runs depart from the grid's last "
                           f"validation point by {deviation:.4f}")
    mean = np.concatenate([runs.curves[which], more.curves], axis=1).mean(axis=0)
    early = sel.rule == "early-stop"  # the selection's own rule
    best = int(np.argmax(mean[:stop_epoch(mean, sel.patience) if early else len(mean)])) + 1  # ties: the earlier epoch
    return {"arm": arm.name, "lr": sel.lr, "chosen": sel.epochs, "budget": sel.budget, "horizon": sel.budget + extra,
            "best epoch": best, "converged": best <= sel.epochs, "mean curve": mean.tolist(),
            "rerun deviation": deviation, "rule": f"early stop, patience {sel.patience}" if early else "best over the horizon"}


def run_sweep(trainer: Trainer, targets: dict, fit_idx: np.ndarray, val_idx: np.ndarray,
              proportions: list[float], seeds: list[int], grid: SelectionGrid,
              y_test: np.ndarray, fixed: dict[Arm, Callable], keep: Arm = FULL, check_epochs: int = 0) -> Sweep:
    """Every :data:`TRAINED` arm through :func:`select_and_evaluate` (the grid at the middle
    proportion), plus the untrained rows ``fixed[arm](ρ, seed) -> (s, log p)``; an arm chosen
    within ``check_epochs`` of its budget's end gets a :func:`convergence_check` that far beyond it.

    targets[(seed, ρ)]: (N_train, C) in {1, 0, -1} for every seed of ``seeds`` and of the grid.
    """
    rho_sel, runs, ap, selections, heads, attention = proportions[len(proportions) // 2], [], {}, {}, {}, []
    split = lambda m: (targets[m.seed, m.rho][fit_idx], targets[m.seed, m.rho][val_idx])  # noqa: E731

    def record(arm, rho, sd, s, log_p, epochs=np.nan):
        for kind, x in (("p", log_p), ("s", s)):
            ap.setdefault((arm, rho, kind), []).append(per_class_ap(x, y_test))
        runs.append({"variant": arm.name, "known": rho, "seed": sd, "epochs": epochs,
                     "mAP on p": ap[arm, rho, "p"][-1].mean(), "mAP on s": ap[arm, rho, "s"][-1].mean()})

    preds, checks = {}, {}
    for arm in TRAINED:
        selections[arm], preds[arm], heads[arm], check = select_and_evaluate(
            trainer, arm, grid, rho_sel, proportions, seeds, split, check_epochs)
        if check is not None:
            checks[arm] = check
    for rho in proportions:
        for sd in seeds:
            for arm, rows in fixed.items():
                record(arm, rho, sd, *rows(rho, sd))
            for arm in TRAINED:
                s, log_p, att = preds[arm][rho, sd]
                record(arm, rho, sd, s, log_p, selections[arm].epochs)
                if arm == keep and rho == rho_sel:
                    attention.append(att)
    ap = {k: np.stack(v) for k, v in ap.items()}
    return Sweep(pd.DataFrame(runs), ap, selections, heads, attention, checks=checks)


def run_protocol(trainer: Trainer, targets: dict, fit_idx: np.ndarray, val_idx: np.ndarray,
                 proportions: list[float], seeds: list[int], grid: SelectionGrid,
                 y_test: np.ndarray, zero_shot: nn.Module,
                 c_candidates: tuple[float, ...] = (0.1, 1.0, 10.0), check_epochs: int = 0) -> Sweep:
    """The chapter's whole comparison: :func:`run_sweep` over the trained arms plus three
    untrained rows (``zero_shot``'s head, the full model at its initialisation, and a
    logistic regression per category whose C is chosen on validation at the middle ρ,
    averaged over the grid's seeds), with the 'what was chosen on which split' table."""
    rho_mid = proportions[len(proportions) // 2]
    fit_x, val_x, test_x = trainer.fit_feats.pooled, trainer.val_feats.pooled, trainer.test_feats.pooled

    def val_score(c: float) -> float:
        return float(np.mean([known_map(logistic_scores(fit_x, targets[sd, rho_mid][fit_idx], val_x, c),
                                        targets[sd, rho_mid][val_idx]) for sd in grid.seeds]))

    c_reg, _ = choose(list(c_candidates), val_score)
    zs = trainer.test(zero_shot)

    at_init: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def untrained(rho: float, sd: int) -> tuple[np.ndarray, np.ndarray]:  # ρ only enters through training
        if sd not in at_init:
            pred = trainer.test(trainer.make(UNTRAINED.variant, UNTRAINED.scoring, sd))
            at_init[sd] = pred.scores, pred.log_p
        return at_init[sd]

    def logistic(rho: float, sd: int) -> tuple[np.ndarray, np.ndarray]:
        s = logistic_scores(fit_x, targets[sd, rho][fit_idx], test_x, c_reg)
        return s, s  # a decision value is its own log-odds ranking

    fixed = {ZERO_SHOT: lambda rho, sd: (zs.scores, zs.log_p), UNTRAINED: untrained, LOGISTIC: logistic}
    sweep = run_sweep(trainer, targets, fit_idx, val_idx, proportions, seeds, grid, y_test, fixed,
                      check_epochs=check_epochs)
    where = f"validation ({len(val_idx)} training images), {rho_mid:.0%} known, seeds {list(grid.seeds)}"
    sweep.selection = selection_table(sweep.selections, grid, where, sweep.checks, [{
        "hyperparameter": "C (logistic regression)", "candidates": str(list(c_candidates)), "chosen": c_reg,
        "converged": "-", "criterion": "mean validation mAP over the seeds", "split": where}])
    return sweep


def converged_cell(sel: Selection, check: dict | None) -> str:
    """A choice read through its :func:`convergence_check` (peaked within the longer horizon at or
    before the chosen epoch, or still improving); unchecked: 'yes' when the best epoch came at
    least the selection's patience before the budget's end."""
    if check is None:
        return "yes" if sel.converged else "NO"
    return (f"yes (to epoch {check['horizon']}: best at {check['best epoch']})" if check["converged"]
            else f"NO (to epoch {check['horizon']}: best at {check['best epoch']})")


def selection_table(selections: dict, grid: SelectionGrid, where: str, checks: dict | None = None,
                    extra: list[dict] = ()) -> pd.DataFrame:
    """'What was chosen on which split': lr and epochs per arm, read through ``checks``
    (:func:`convergence_check` by arm) (+ ``extra`` rows)."""
    rows = [{"hyperparameter": f"lr, epochs ({arm.name if isinstance(arm, Arm) else arm})",
             "candidates": f"lr in {list(grid.lrs)}, epochs 1..{grid.epochs}",
             "chosen": f"lr {sel.lr:g}, {sel.epochs} epochs" + (f" (lr at the grid's {sel.lr_edge} end)" if sel.lr_edge else ""),
             "converged": converged_cell(sel, (checks or {}).get(arm)),
             "criterion": "eq-selection-stop: best mean validation mAP on p (known entries) before an early stop"
             if grid.rule == "early-stop" else "eq-selection: best mean validation mAP on p (known entries)",
             "split": where}
            for arm, sel in selections.items()]
    return pd.DataFrame([*rows, *extra])


def more_seeds_ap(trainer: Trainer, arm: Arm, sel: Selection, rho: float, extra: list[int],
                  targets: dict, fit_idx: np.ndarray, val_idx: np.ndarray, y_test: np.ndarray) -> np.ndarray:
    """Per-category test AP on log p (len(extra), C) of ``arm`` trained at its selection's lr
    and epochs at ρ for each of the ``extra`` seeds (side by side, one loop); (0, C) when none.
    targets[(seed, ρ)]: (N_train, C) in {1, 0, -1}, split by fit_idx / val_idx."""
    if not extra:
        return np.zeros((0, y_test.shape[1]))
    split = lambda m: (targets[m.seed, m.rho][fit_idx], targets[m.seed, m.rho][val_idx])  # noqa: E731
    runs = trainer.train_members(arm, [Member(sel.lr, sd, rho) for sd in extra], split, sel.epochs, validate=False)
    return np.stack([per_class_ap(trainer.test(h).log_p, y_test) for h in runs.heads])


def a_a_seed_sets(seeds: list[int], per_side: int) -> tuple[list[int], list[int]]:
    """The 2 x ``per_side`` seeds of the A/A control: the evaluation ``seeds`` first, then further
    seeds max(seeds)+1, ...; returns (those seeds in order, which
    :func:`~fgclip.studies.decoupling.comparisons.a_a_verdict` deals alternately to set A and set
    B, the further seeds to train)."""
    if per_side < 2:
        raise ValueError(f"a_a_seeds must be >= 2 (seeds per side of the A/A control), got {per_side}")
    extra = [max(seeds) + 1 + k for k in range(max(0, 2 * per_side - len(seeds)))]
    return (list(seeds) + extra)[:2 * per_side], extra


def a_a_control(trainer: Trainer, sweep: Sweep, targets: dict, fit_idx: np.ndarray, val_idx: np.ndarray,
                y_test: np.ndarray, rho: float, extra: list[int], per_side: int, seed: int, margin: float):
    """The A/A negative control on two disjoint sets of ``per_side`` seeds: the paper's model
    (:data:`FULL`) at ρ, the sweep's seeds and then the ``extra`` ones trained at its
    selection (:func:`more_seeds_ap`), read by
    :func:`~fgclip.studies.decoupling.comparisons.a_a_verdict`. Returns the verdict and every
    seed's test mAP in seed order (even positions: set A, odd: set B), so another split of the
    same runs can be checked from the record."""
    more = more_seeds_ap(trainer, FULL, sweep.selections[FULL], rho, extra, targets, fit_idx, val_idx, y_test)
    per_seed = np.concatenate([sweep.ap[FULL, rho, "p"], more])[:2 * per_side].mean(axis=1)
    return a_a_verdict(sweep.ap, rho, seed, margin, more=more, per_side=per_side), per_seed.tolist()


def proportion_curves(trainer: Trainer, arm: Arm, sel: Selection, proportions: list[float], targets: dict,
                      fit_idx: np.ndarray, val_idx: np.ndarray, val_labels: np.ndarray, zero_shot: nn.Module) -> dict:
    """A diagnostic, not a choice: where training at each known-label proportion takes ``arm``.
    Its selection's seeds are trained at the chosen lr for the whole budget at every ρ of
    ``proportions`` and scored after every epoch on the validation images' *full* labels
    ``val_labels`` (N_val, C) in {0, 1} (labels the protocol hides; nothing is chosen on them),
    so the curves of different ρ are read on the same entries. Beside them, on the same labels:
    the zero-shot head and the arm at its initialisation (the mean over the seeds), and the
    median number of known positives per category of the fit split at each ρ (over the seeds).
    targets[(seed, ρ)]: (N_train, C) in {1, 0, -1}."""
    full = lambda m: (targets[m.seed, m.rho][fit_idx], val_labels)  # noqa: E731
    members = [Member(sel.lr, sd, rho) for rho in proportions for sd in sel.seeds]
    runs = trainer.train_members(arm, members, full, sel.budget)
    val_map = lambda head: known_map(predict(head, *trainer.val_feats, device=trainer.cfg.device).log_p,  # noqa: E731
                                     val_labels)
    init = float(np.mean([val_map(trainer.make(arm.variant, arm.scoring, sd)) for sd in sel.seeds]))
    out = {"arm": arm.name, "lr": sel.lr, "chosen": sel.epochs, "budget": sel.budget, "seeds": list(sel.seeds),
           "zero-shot": val_map(zero_shot), "untrained": init, "per known": []}
    for rho in proportions:
        rows = [i for i, m in enumerate(members) if m.rho == rho]
        mean = runs.curves[rows].mean(axis=0)
        known_pos = [np.median((targets[sd, rho][fit_idx] == 1).sum(0)) for sd in sel.seeds]
        out["per known"].append({"known": rho, "mean curve": mean.tolist(), "best epoch": int(np.argmax(mean)) + 1,
                                 "best": float(mean.max()), "at chosen": float(mean[sel.epochs - 1]),
                                 "median known positives": float(np.median(known_pos))})
    return out
