"""Chapter 1's training arms: each arm is a named :class:`TrainConfig` (plus how its captions
are dealt), trained once per seed on the cached frozen features of the fit split.

The arms differ only in their configs, so every comparison between two arms is a
comparison of the one setting they differ in (the loss, the aggregator, the score, the
false-negative mask, the captions' links to images, or no training at all).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from ...methods.maximage import MaxImageHeads
from ...models import Clip
from ...train.selection import Selection, SelectionGrid, select_lr_epochs, stop_epoch
from .data import Split, load_split, subset_split
from .evaluation import shuffled_caption_image
from .heads import TrainConfig, make_heads, train_heads
from .init_census import seed_diagnostics
from .replicas import steps_per_pass, train_stacks


class Splits(NamedTuple):
    """The chapter's three splits: the last ``n_val`` training images held out as ``val``."""
    fit: Split
    val: Split
    test: Split

    def sizes(self) -> dict[str, int]:
        """Images per split: {"fit": ..., "val": ..., "test": ...}."""
        return {name: len(split.images) for name, split in self._asdict().items()}


def load_splits(clip: Clip, root: str | Path, train_split: str, test_split: str, n_train: int,
                n_val: int, n_test: int, word_kind: str, device: str = "cpu") -> Splits:
    """Read ``n_train`` training images (the last ``n_val`` become the validation split, never
    trained on) and ``n_test`` test images, with their frozen features."""
    full = load_split(clip, root, train_split, n_train, word_kind, device, keep_images=False)
    n_fit = len(full.images) - n_val
    if n_fit < 2:
        raise ValueError(f"n_val={n_val} leaves {n_fit} of the {len(full.images)} images read from "
                         f"{train_split!r} for training; lower n_val or raise n_train")
    return Splits(subset_split(full, list(range(n_fit))),
                  subset_split(full, list(range(n_fit, len(full.images)))),
                  load_split(clip, root, test_split, n_test, word_kind, device))


@dataclass(frozen=True)
class Arm:
    """A training arm: its name on the page and its config. ``shuffled``: the captions are
    dealt to the training images at random (a seeded permutation per seed: the no-grounding
    control); ``trained=False``: the heads stay at their seeded initialisation."""
    name: str
    cfg: TrainConfig
    shuffled: bool = False
    trained: bool = True


class ArmSet(NamedTuple):
    """The chapter's arms: the main one, the variants compared with it, and two controls."""
    main: Arm
    variants: tuple[Arm, ...]
    shuffled: Arm
    untrained: Arm

    def all(self) -> tuple[Arm, ...]:
        return (self.main, *self.variants, self.shuffled, self.untrained)

    def known_causes(self) -> dict[str, str]:
        """Why a control's seeds score low, known by construction: arm name -> the reason."""
        return {self.shuffled.name: "its captions are dealt to the images at random: no grounding signal, by construction",
                self.untrained.name: "its heads are never trained, by construction"}

    def flat_losses(self) -> dict[str, float]:
        """Arm name -> the validation loss of heads that score every pair alike, where it is
        exact: alpha for a triplet loss that takes one negative per anchor (Eq. eq-triplet-loss
        with S_ij = S_ii). N-Pair's (log B) moves with the same-text mask, so it is not given."""
        return {a.name: a.cfg.margin for a in self.all() if a.trained and a.cfg.loss.startswith("triplet-")}


def chapter_arms(base: TrainConfig) -> ArmSet:
    """N-Pair MaxImage (``base``) and its variants: the hardest-negative triplet, average
    pooling, the other false-negative rule, the other score; plus the shuffled-caption and
    untrained controls. Each variant changes one field of ``base``."""
    other = "dot" if base.score == "cosine" else "cosine"
    return ArmSet(Arm("N-Pair MaxImage", base),
                  (Arm("triplet (hardest)", replace(base, loss="triplet-hardest")),
                   Arm("N-Pair average pooling", replace(base, aggregator="average")),
                   Arm("N-Pair, same-text negatives kept", replace(base, mask_same_text=not base.mask_same_text)),
                   Arm(f"N-Pair, {other} score", replace(base, score=other))),
                  Arm("N-Pair, shuffled captions", base, shuffled=True),
                  Arm("untrained heads", base, trained=False))


def train_arm(arm: Arm, data: Split, seeds: Sequence[int]) -> list[MaxImageHeads]:
    """The arm's heads for each seed (on the CPU), trained on ``data``'s cached features."""
    out = []
    for s in seeds:
        cfg = replace(arm.cfg, seed=s)
        if not arm.trained:
            out.append(make_heads(data.img.shape[1], data.words.dim, cfg.embed_dim, s, cfg.score, cfg.bias_init))
            continue
        links = data.corpus.caption_image
        links = shuffled_caption_image(links, s) if arm.shuffled else links
        out.append(train_heads(data.img, data.words, None, links, cfg, data.text_ids)[0].cpu())
    return out


class Trained(NamedTuple):
    """An arm's heads per seed, its selection (None when untrained) and every seed's curves:
    {"arm", "lr", "chosen_periods", "seeds": {seed: {"train": [...], "val": [...],
    "selection": bool}}} with the mean training loss of each period's batches and the
    validation loss after it, at the chosen lr (None when untrained)."""
    heads: list[MaxImageHeads]
    selection: Selection | None
    curves: dict | None


def train_selected(arm: Arm, data: Splits, grid: SelectionGrid, seeds: Sequence[int], period: int) -> Trained:
    """The arm's heads for each of ``seeds``, trained at the lr and number of periods that
    :func:`fgclip.train.selection.select_lr_epochs` picks (eq-selection-stop) on the validation loss.

    Every (lr, seed) of ``grid`` trains side by side (:func:`~fgclip.studies.maximage.replicas.train_stacks`)
    for ``grid.epochs`` periods of ``period`` optimiser steps, its validation loss recorded
    after each; the selection seeds' own heads at the chosen (lr, period) are their
    evaluation heads, and every other seed trains afresh at that lr for that many periods
    (the same heads, batches and steps it would have had as a selection seed; its
    validation loss is recorded, never used). An untrained arm returns its initial heads.
    """
    if not arm.trained:
        return Trained([make_heads(data.fit.img.shape[1], data.fit.words.dim, arm.cfg.embed_dim, s, arm.cfg.score,
                                   arm.cfg.bias_init)
                        for s in seeds], None, None)
    if grid.higher_is_better:
        raise ValueError("chapter 1 selects on the validation loss: the grid needs higher_is_better=False")
    run = train_stacks(data.fit, data.val, arm.cfg, grid.lrs, grid.seeds, grid.epochs, period,
                       shuffled=arm.shuffled, keep_states=True)
    sel = select_lr_epochs(arm.name, lambda lr, s, e: run.curves[(lr, s)][:e], grid)
    heads = {s: h.cpu() for s, h in zip(grid.seeds, run.heads(sel.lr, sel.epochs))}
    curves = {s: {"train": run.train_curves[(sel.lr, s)], "val": run.curves[(sel.lr, s)], "selection": True}
              for s in grid.seeds}
    more_heads, more_curves = _fresh_seeds(arm, data, sel, [s for s in seeds if s not in heads], period)
    heads |= more_heads
    curves |= more_curves
    record = {"arm": arm.name, "lr": sel.lr, "chosen_periods": sel.epochs, "seeds": {s: curves[s] for s in seeds}}
    return Trained([heads[s] for s in seeds], sel, record)


def _fresh_seeds(arm: Arm, data: Splits, sel: Selection, seeds: Sequence[int], period: int
                 ) -> tuple[dict[int, MaxImageHeads], dict[int, dict]]:
    """Seeds outside the selection, each trained afresh at ``sel``'s lr for its periods: their
    heads and their curves (validation loss recorded, never used); ({}, {}) for no seeds."""
    if not seeds:
        return {}, {}
    run = train_stacks(data.fit, data.val, replace(arm.cfg, lr=sel.lr), [sel.lr], seeds, sel.epochs, period,
                       shuffled=arm.shuffled)
    return (dict(zip(seeds, run.heads(sel.lr))),
            {s: {"train": run.train_curves[(sel.lr, s)], "val": run.curves[(sel.lr, s)], "selection": False} for s in seeds})


def train_more(arm: Arm, data: Splits, selections: Sequence[Selection], seeds: Sequence[int],
               period: int, curves: list[dict] | None = None) -> list[MaxImageHeads]:
    """More seeds of a trained arm: each trained afresh at the lr and number of periods its
    selection in ``selections`` chose (what :func:`train_selected` does for a seed outside the
    selection), on the CPU; [] for no seeds. Their curves are appended to ``curves`` as one
    record named "<arm>, more seeds" (the format of :func:`train_selected`'s)."""
    sel = {s.arm: s for s in selections if s}.get(arm.name)
    if sel is None:
        raise ValueError(f"train_more: no selection for arm {arm.name!r}; train it with train_logged first")
    if not seeds:
        return []
    heads, more = _fresh_seeds(arm, data, sel, seeds, period)
    if curves is not None:
        curves.append({"arm": f"{arm.name}, more seeds", "lr": sel.lr, "chosen_periods": sel.epochs, "seeds": more})
    return [heads[s] for s in seeds]


def train_logged(arm: Arm, data: Splits, grid: SelectionGrid, seeds: Sequence[int], period: int,
                 log: list[Selection], curves: list[dict] | None = None) -> list[MaxImageHeads]:
    """:func:`train_selected`, its selection appended to ``log`` and its per-seed curves to
    ``curves`` (a trained arm's), each seed's with its collapse diagnostics on the validation
    images (:func:`~fgclip.studies.maximage.init_census.seed_diagnostics`: no boxes read, so a
    low seed of any arm can be read for a mechanism): the heads."""
    heads, sel, record = train_selected(arm, data, grid, seeds, period)
    if sel is not None:
        log.append(sel)
        if curves is not None:
            diag = seed_diagnostics(heads, data.val)  # name -> (n_seeds,)
            for k, s in enumerate(seeds):
                record["seeds"][s]["diagnostics"] = {n: float(x[k]) for n, x in diag.items()}
            curves.append(record)
    return heads


class Longer(NamedTuple):
    """What :func:`train_longer` returns, per seed: the heads at the longer run's chosen period,
    and the heads at the period the arm's own selection chose (the same run's snapshot there)."""
    heads: list[MaxImageHeads]
    at_budget: list[MaxImageHeads]
    chosen: int  # the longer run's chosen period
    budget_chosen: int  # the period the arm's own selection chose


def train_longer(arm: Arm, data: Splits, grid: SelectionGrid, log: list[Selection], seeds: Sequence[int],
                 period: int, periods: int, curves: list[dict] | None = None) -> Longer:
    """The budget check: ``arm`` trained again on ``seeds`` at the lr its selection in ``log``
    chose, for a budget of ``periods`` periods instead of ``grid.epochs``, and stopped at the
    period of lowest mean validation loss over the grid's selection seeds before an early stop with
    a quarter of the longer budget as patience (eq-selection-stop with the lr held). The lr is constant, so the same run's snapshot at the selection's own period follows
    the protocol :func:`train_more` follows for a seed (same start, batches, lr and periods): both
    come back (:class:`Longer`). It is the same head only up to floating-point rounding, which
    differs between stacks of another size, and training can amplify it (the chapter measures how
    far).
    Its Selection ("<arm>, <periods> periods"; converged or not by the same patience rule, a
    quarter of its budget) is appended to ``log``; to ``curves``, its record and, for the seeds
    outside the arm's own record, the "<arm>, more seeds" record :func:`train_more` would write."""
    sel = {s.arm: s for s in log if s}.get(arm.name)
    if sel is None:
        raise ValueError(f"train_longer: no selection for arm {arm.name!r}; train it with train_logged first")
    if periods <= grid.epochs:
        raise ValueError(f"the budget check needs more periods than the budget ({grid.epochs}), got {periods}")
    run = train_stacks(data.fit, data.val, replace(arm.cfg, lr=sel.lr), [sel.lr], seeds, periods, period,
                       shuffled=arm.shuffled, keep_states=True)
    picked = [s for s in grid.seeds if s in seeds] or list(seeds)
    mean = np.mean([run.curves[(sel.lr, s)] for s in picked], axis=0)  # (periods,)
    patience = max(1, periods // 4)
    best = int(np.argmin(mean[:stop_epoch(-mean, patience)])) + 1  # a loss: the stopper watches -mean
    name = f"{arm.name}, {periods} periods"
    log.append(Selection(arm=name, lr=sel.lr, epochs=best, score=float(mean[best - 1]),
                         curves={sel.lr: [run.curves[(sel.lr, s)] for s in picked]}, seeds=tuple(picked), budget=periods,
                         converged=best <= periods - patience, rule="early-stop"))
    if curves is not None:
        def rec(s: int, k: int, selection: bool) -> dict:
            return {"train": run.train_curves[(sel.lr, s)][:k], "val": run.curves[(sel.lr, s)][:k], "selection": selection}
        own = next((set(c["seeds"]) for c in curves if c["arm"] == arm.name), set())
        curves.append({"arm": name, "lr": sel.lr, "chosen_periods": best, "seeds": {s: rec(s, periods, s in picked) for s in seeds}})
        if more := [s for s in seeds if s not in own]:
            curves.append({"arm": f"{arm.name}, more seeds", "lr": sel.lr, "chosen_periods": sel.epochs,
                           "seeds": {s: rec(s, sel.epochs, False) for s in more}})
    return Longer(run.heads(sel.lr, best), run.heads(sel.lr, sel.epochs), best, sel.epochs)


def pass_steps(data: Splits, batch_size: int) -> int:
    """Optimiser steps of one pass over the fit split at ``batch_size``: the period every arm
    counts its budget in (an arm with another batch size gets the same steps)."""
    return steps_per_pass(len(data.fit.images), batch_size)


def arm_table(arms: Sequence[Arm]) -> pd.DataFrame:
    """One row per arm: the config fields the arms differ in, and how its captions are dealt."""
    return pd.DataFrame([dict(arm=a.name, loss=a.cfg.loss, aggregator=a.cfg.aggregator, score=a.cfg.score,
                              mask_same_text=a.cfg.mask_same_text, batch_size=a.cfg.batch_size,
                              captions="shuffled" if a.shuffled else "own", trained=a.trained) for a in arms])


def selection_table(parse: str, val_acc: dict[str, float], n_val_images: int, base: TrainConfig,
                    min_box_area: float, area_rule: str, planted_effect: float | str,
                    selections: Sequence[Selection | None] = (), period: int = 0) -> pd.DataFrame:
    """What was chosen on which split: lr and periods per trained arm and the parse mode on
    the validation split; every other setting fixed beforehand (columns hyperparameter,
    candidates, chosen, criterion, split)."""
    val = f"validation ({n_val_images} held-out training images)"
    return pd.DataFrame([
        *((f"lr, periods: {s.arm}", f"lr {list(s.curves)}, 1..{s.budget} periods of {period} steps",
           f"{s.lr:g}, {s.epochs}" + s.caveat(),
           f"lowest mean validation loss over seeds {list(s.seeds)}", val) for s in selections if s),
        ("parse mode", {m: round(a, 3) for m, a in val_acc.items()}, parse, "mean pointing accuracy "
         "over the seeds", val),
        ("temperature, triplet margin, embed_dim", "-", f"{base.temperature}, {base.margin}, {base.embed_dim}",
         "fixed beforehand (the paper's losses at toy size), not tuned", "none"),
        ("min_box_area, area_rule", "-", f"{min_box_area}, {area_rule}", "the public protocol", "none"),
        ("planted effect (positive controls)", "-", planted_effect, "the declared margins, fixed before any run", "none")],
        columns=["hyperparameter", "candidates", "chosen", "criterion", "split"])


def selection_caveats(selections: Sequence[Selection | None]) -> dict[str, str]:
    """Arm name -> what to doubt of its selection, in words (:meth:`Selection.caveat` without
    its brackets: not converged within the budget, lr at an end of the grid); "" when nothing."""
    return {s.arm: s.caveat().strip()[1:-1] if s.caveat() else "" for s in selections if s}


def convergence_sentence(selections: Sequence[Selection | None], budget: int) -> str:
    """The arms whose best period lies within the budget's last P (the selection's patience, a
    quarter of the budget), each with how much its mean validation
    loss (selection seeds, chosen lr) still fell over the last third of the budget: a relative
    drop near 0 is a flat curve that stops at the end by noise, a few percent is still learning."""
    if budget < 2:
        raise ValueError(f"convergence_sentence: the budget must be at least 2 periods, got {budget}")
    done = [s for s in selections if s]
    late = [s for s in done if not s.converged]

    def drop(s: Selection) -> str:  # an arm with its own budget (the budget check) says so
        m, own = s.mean_curve(), s.budget or budget
        k = max(own // 3, 1)
        return (f"{s.arm} ({f'budget {own} periods, ' if own != budget else ''}down "
                f"{100 * (m[-k - 1] - m[-1]) / abs(m[-k - 1]):.1f}% over the last {k} periods)")
    edge = [f"{s.arm} ({s.lr:g}, the {s.lr_edge})" for s in done if s.lr_edge]
    return (f"not converged within the budget ({budget} periods unless said): {', '.join(drop(s) for s in late) or 'none'} "
            f"(of {len(done)} trained arms); lr at an end of the grid, so a value beyond it might have done better: "
            f"{', '.join(edge) or 'none'}")
