"""Chapter 3's schedules and fold loop: every trained arm trained alike, its learning rate and
number of epochs chosen on validation images, never on the retrieval gallery.

Schedules (:func:`select_schedules`): on one fold, every trained arm runs at every (lr, seed)
of one :class:`~fgclip.train.selection.SelectionGrid` for the same budget of E epochs. After
each epoch the head ranks the *validation* images (training images no head learns from) for
the fold's base categories, and its mean full AP is v_{lr,s}(e);
:func:`~fgclip.train.selection.select_lr_epochs` then picks (lr*, e*) for the arm
(eq-selection-stop). The selection's own runs at (lr*, e*) are kept as that fold's first evaluation
runs (their state after epoch e*). Every other (fold, seed) trains each arm from scratch at its
(lr*, e*) (:func:`fold_runs`): the same run, since a run's batches and initialisation depend
only on its seed.

Arms (:func:`arm_settings`): supervised only; FOR (both losses, the pooling's output
projection W_c trainable, the setting where forgetting can happen); the paper's head (FOR's
labels, the whole pooling frozen, no m-residual); and the teacher variants of
:func:`fgclip.studies.for_retrieval.folds.teacher_arms`.

The negative control is an A/A comparison (:func:`a_a_seeds`): supervised only's whole
protocol run twice on disjoint seeds. Side A is the chapter's own (its schedule chosen on the
chapter's selection seeds, its runs on the chapter's seeds, then fresh ones); side B chooses its
own (lr*, e*) on its own selection seeds and trains on its own seeds, every seed of side A moved
past all of them. Nothing differs between the sides but the seeds, the selection included.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from ...methods.cluster_clip import cluster_clip_embeddings
from ...methods.sumclip import SumClipHead
from ...metrics.object_retrieval import per_category_ap
from ...train.selection import Selection, SelectionGrid, select_lr_epochs
from ...verdicts import Verdict, compare, power_check  # noqa: F401 (power_check: the chapter calls it from here)
from .data import ForData
from .folds import (A_A, A_A_B, CLUSTER, prepare_fold, score_rows, FOR, GLOBAL, GLOBAL_SLOT, PAPER, SUPERVISED, UNTRAINED, Fold,
                    fold_units, global_slot_diagnostic, unit_matrix)
from .head import HeadTrainConfig, embed, label_matrix, train_head

Labels = tuple[list[torch.Tensor], torch.Tensor] | None  # (targets per fit image, the text they index); None: no L_pl


@dataclass(frozen=True)
class AASeeds:
    """The two sides of the A/A control: each side's evaluation seeds (paired in order) and the
    selection seeds its schedule is chosen on."""

    a: list[int]
    b: list[int]
    a_grid: tuple[int, ...]
    b_grid: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"side A": self.a, "side B": self.b, "side A selection": list(self.a_grid),
                "side B selection": list(self.b_grid)}


def a_a_seeds(seeds: Sequence[int], grid_seeds: Sequence[int], per_side: int) -> AASeeds:
    """Side A: the chapter's ``seeds`` (the first ``per_side`` of them), then fresh seeds after every
    seed in use; its selection seeds are the chapter's ``grid_seeds``. Side B: all of side A's
    seeds, selection seeds included, shifted past every one of them, so the sides share none and
    each side's selection seeds stand to its evaluation seeds as the chapter's do."""
    if per_side < 1:
        raise ValueError(f"the A/A control needs at least 1 seed per side, got {per_side}")
    taken = set(seeds) | set(grid_seeds)
    a = (list(seeds) + [max(taken) + 1 + k for k in range(max(0, per_side - len(seeds)))])[:per_side]
    used = set(a) | set(grid_seeds)
    shift = max(used) + 1 - min(used)
    return AASeeds(a, [s + shift for s in a], tuple(grid_seeds), tuple(s + shift for s in grid_seeds))


def arm_settings(fold: Fold, head_kw: dict) -> dict[str, tuple[Labels, dict]]:
    """Every trained arm of one fold: name -> (pseudo-labels, head settings)."""
    paper = {**head_kw, "residual": False, "train_out": False}
    arms: dict[str, tuple[Labels, dict]] = {SUPERVISED: (None, head_kw), FOR: (fold.teacher[FOR], head_kw),
                                            PAPER: (fold.teacher[FOR], paper)}
    for name, labels in fold.teacher.items():
        arms.setdefault(name, (labels, head_kw))
    return arms


def validation_score(head: SumClipHead, data: ForData, fold: Fold) -> float:
    """Mean full AP over the fold's base categories, ranking the validation images (0 when none
    of them holds a base category)."""
    val = data.val_idx.tolist()
    bq = [data.categories.index(c) for c in fold.base]
    relevant = label_matrix([data.train_labels[i] & set(fold.base) for i in val], fold.base).T
    emb, _ = embed(head, data.train.memory.select(data.val_idx))
    ap = per_category_ap(data.query_text[bq], emb.cpu(), relevant)["AP"].numpy()
    return float(np.nanmean(ap)) if np.isfinite(ap).any() else 0.0


@dataclass
class Run:
    """One trained head, its validation curve and (when kept) its trainable state after each epoch."""

    head: SumClipHead
    curve: list[float] = field(default_factory=list)
    states: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def restore(self, epoch: int) -> SumClipHead:
        """The head as it was after ``epoch`` (1-based)."""
        self.head.load_state_dict(self.states[epoch - 1], strict=False)
        return self.head


def train_run(data: ForData, fold: Fold, labels: Labels, head_kw: dict, seed: int, lr: float, epochs: int,
              train_kw: dict, track: bool = False) -> Run:
    """Train one SUM-CLIP head from ``seed`` on the fold's fit images, L = L_sup + L_pl (L_sup
    alone when ``labels`` is None). ``track``: score the validation images and keep the
    trainable state after every epoch."""
    torch.manual_seed(seed)
    memory = data.train.memory.select(data.fit_idx)
    head = SumClipHead(data.pool, **head_kw).to(memory.mean.device)
    targets, text = labels if labels is not None else ([None] * len(fold.supervised), data.vocab_text)
    cfg = HeadTrainConfig(seed=seed, lr=lr, epochs=epochs, w_pl=0.0 if labels is None else 1.0, **train_kw)
    bq = torch.tensor([data.categories.index(c) for c in fold.base])
    run = Run(head)

    def after_epoch(_row: dict) -> bool:
        run.curve.append(validation_score(head, data, fold))
        run.states.append({n: p.detach().clone() for n, p in head.named_parameters() if p.requires_grad})
        return False

    train_head(head, memory, fold.supervised, targets, data.query_text[bq], text, data.logit_scale, cfg,
               after_epoch=after_epoch if track else None)
    return run


def select_schedules(data: ForData, fold: Fold, grid: SelectionGrid, head_kw: dict, train_kw: dict,
                     arms: dict[str, tuple[Labels, dict]] | None = None,
                     ) -> tuple[dict[str, Selection], dict[tuple[str, int], SumClipHead]]:
    """(lr*, e*) of every trained arm (``arms``, by default :func:`arm_settings`) on ``fold``'s
    validation images (eq-selection-stop), and the heads of that fold at (lr*, e*) for each selection
    seed: arm -> Selection, (arm, seed) -> head."""
    selections, kept = {}, {}
    for arm, (labels, kw) in (arms or arm_settings(fold, head_kw)).items():
        runs: dict[tuple[float, int], Run] = {}

        def run(lr: float, seed: int, epochs: int, labels: Labels = labels, kw: dict = kw,
                runs: dict = runs) -> list[float]:
            runs[lr, seed] = train_run(data, fold, labels, kw, seed, lr, epochs, train_kw, track=True)
            return runs[lr, seed].curve

        sel = selections[arm] = select_lr_epochs(arm, run, grid)
        kept.update({(arm, s): runs[sel.lr, s].restore(sel.epochs) for s in grid.seeds})
    return selections, kept


def fold_runs(data: ForData, fold: Fold, seed: int, selections: dict[str, Selection], head_kw: dict,
              train_kw: dict, kept: dict | None = None, clusters: dict | None = None,
              ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Every arm's gallery embeddings (I, slots, D) for one (fold, seed), and FOR's attention.

    Trained arms at their chosen (lr*, e*) (a head in ``kept`` is used as it is); the untrained
    head (FOR's setting at its initialisation); CLIP global (L2-normalised); Cluster-CLIP (cached per (k, seed)
    in ``clusters``); FOR with CLIP's global embedding as one more slot.
    """
    kept = {} if kept is None else kept
    clusters = {} if clusters is None else clusters
    if (fold.k, seed) not in clusters:
        clusters[fold.k, seed] = cluster_clip_embeddings(data.gallery.dense, data.gallery.pooled, fold.k, seed)
    gallery = data.gallery.memory
    torch.manual_seed(seed)
    start = SumClipHead(data.pool, **head_kw).to(gallery.mean.device)
    # CLIP scores by cosine: the global embedding is L2-normalised, as every other arm's slots are
    runs = {GLOBAL: F.normalize(data.gallery.pooled.float().cpu(), dim=-1)[:, None], CLUSTER: clusters[fold.k, seed],
            UNTRAINED: embed(start, gallery)[0].cpu()}
    attention = None
    for arm, (labels, kw) in arm_settings(fold, head_kw).items():
        if arm not in selections:  # an arm the schedules' fold did not have (the fixed τ)
            continue
        sel = selections[arm]
        head = kept[arm, seed] if (arm, seed) in kept else \
            train_run(data, fold, labels, kw, seed, sel.lr, sel.epochs, train_kw).head
        emb, attn = embed(head, gallery)
        runs[arm] = emb.cpu()
        if arm == FOR:
            attention = attn.cpu()
    runs[GLOBAL_SLOT] = torch.cat([runs[GLOBAL], runs[FOR]], 1)
    return runs, attention


def a_a_runs(data: ForData, fold: Fold, seeds: Sequence[int], selection: Selection, head_kw: dict,
             train_kw: dict, kept: dict | None = None) -> dict[int, torch.Tensor]:
    """Gallery embeddings (I, slots, D) per seed of supervised only trained from each of ``seeds``
    at ``selection``'s (lr*, e*), as its own runs are; a head in ``kept`` under (the selection's
    arm, seed) is used as it is."""
    kept = {} if kept is None else kept
    heads = {s: kept[selection.arm, s] if (selection.arm, s) in kept else
             train_run(data, fold, None, head_kw, s, selection.lr, selection.epochs, train_kw).head for s in seeds}
    return {s: embed(head, data.gallery.memory)[0].cpu() for s, head in heads.items()}


@dataclass
class Study:
    """What the fold loop returns: one row per (arm, fold, seed, category), the choices made on
    validation images, the teacher's acceptance per fold and threshold, every trained arm's
    schedule, and the last (fold, seed)'s gallery embeddings and FOR attention (for the widget)."""

    rows: pd.DataFrame
    choices: list[dict]
    acceptance: list[dict]
    schedules: dict[str, Selection]
    last_runs: dict[str, torch.Tensor]
    for_attention: torch.Tensor
    global_slot: list[dict] = field(default_factory=list)
    a_a: AASeeds | None = None  # the A/A control's seeds (its rows are arms A_A and A_A_B)


def run_study(data: ForData, folds: Sequence[Sequence[str]], seeds: Sequence[int], grid: SelectionGrid,
              head_kw: dict, train_kw: dict, k_candidates: Sequence[int], fixed_tau: float, seed: int,
              a_a_per_side: int) -> Study:
    """The fold loop: per fold the choices on validation (:func:`fgclip.studies.for_retrieval.folds.prepare_fold`),
    on the first fold every trained arm's schedule (:func:`select_schedules`), then every
    (fold, seed) scored on the gallery (:func:`fold_runs`); and the A/A control, ``a_a_per_side``
    seeds a side (:func:`a_a_seeds`): side A (arm ``A_A``) supervised only's runs at its chosen
    schedule, side B (``A_A_B``) its own schedule's (:func:`a_a_runs`)."""
    rows, choices, acceptance, clusters, kept, schedules, shares = [], [], [], {}, {}, {}, []
    aa = a_a_seeds(seeds, grid.seeds, a_a_per_side)
    for f, novel in enumerate(folds):
        fold = prepare_fold(data, f, novel, k_candidates, fixed_tau, seed)
        choices += fold.selection
        acceptance += fold.acceptance
        if f == 0:
            schedules, kept = select_schedules(data, fold, grid, head_kw, train_kw)
            side_b, kept_b = select_schedules(data, fold, replace(grid, seeds=aa.b_grid), head_kw, train_kw,
                                              arms={A_A_B: (None, head_kw)})
            schedules |= side_b
        for s in seeds:
            runs, attention = fold_runs(data, fold, s, schedules, head_kw, train_kw, kept if f == 0 else None,
                                        clusters)
            scored = [r for name, emb in runs.items()
                      for r in score_rows(name, f, s, data.query_text, emb, data.relevant, data.categories, novel)]
            rows += scored
            shares.append({"fold": f, "seed": s,
                           **global_slot_diagnostic(data.query_text.cpu(), runs[GLOBAL_SLOT], data.relevant)})
            if s in aa.a:  # side A's runs at the chapter's seeds are the chapter's own: their rows, renamed
                rows += [{**r, "arm": A_A} for r in scored if r["arm"] == SUPERVISED]
        side_a = a_a_runs(data, fold, [s for s in aa.a if s not in seeds], schedules[SUPERVISED], head_kw, train_kw)
        side_b = a_a_runs(data, fold, aa.b, schedules[A_A_B], head_kw, train_kw, kept_b if f == 0 else None)
        rows += [r for name, embs in ((A_A, side_a), (A_A_B, side_b)) for s, emb in embs.items()
                 for r in score_rows(name, f, s, data.query_text, emb, data.relevant, data.categories, novel)]
    table = pd.DataFrame(rows)  # an arm some fold leaves out (the fixed τ where it cannot decide) is dropped
    complete = table.groupby("arm")["fold"].nunique() == len(folds)
    table = table[table["arm"].isin(complete[complete].index)].reset_index(drop=True)
    return Study(table, selection_rows(schedules) + choices, acceptance, schedules, runs, attention, shares, aa)


def selection_rows(selections: dict[str, Selection]) -> list[dict]:
    """The "what was chosen" rows of the trained arms' schedules."""
    return [{"hyperparameter": f"lr, epochs: {arm}", "candidates": f"lr {list(s.curves)}, epochs 1..{s.budget}",
             "chosen": f"lr {s.lr:g}, {s.epochs} epochs" + s.caveat(),
             "criterion": f"base mAP, mean over seeds {list(s.seeds)}" + (f"; epochs up to an early stop (patience "
                                                                              f"{s.patience})" if s.rule == "early-stop" else ""),
             "split": "validation (training images)"}
            for arm, s in selections.items()]


def fold_verdict(rows: pd.DataFrame, a: str, b: str, claim: str, folds: Sequence[Sequence[str]],
                 categories: Sequence[str], seeds: Sequence[int], metric: str, margin: float,
                 role: str = "novel", seed: int = 0, seeds_a: Sequence[int] | None = None) -> Verdict:
    """Arm a against arm b on ``metric``, paired per (fold, category) and seed, the bootstrap
    resampling whole folds (one trained head each); with a single fold (one fixed split) the
    categories are the only units left to resample. ``seeds_a``: arm a's own seeds, paired in
    order with ``seeds`` (the A/A control); by default both arms' are ``seeds``."""
    units, folds_of = fold_units(folds, categories, role)
    m = [unit_matrix(rows, arm, metric, sd, units) for arm, sd in ((a, seeds_a or seeds), (b, seeds))]
    by_fold = len(folds) > 1
    return compare(*m, claim=f"{claim} ({role} {metric})", arms=(a, b), unit=f"{role} (fold, category) pairs",
                   clusters=folds_of if by_fold else None,
                   cluster_unit="folds (one trained head each)" if by_fold else "categories",
                   margin=margin, seed=seed)


def power_sentence(check: dict) -> str:
    """The power check in words (numbers from the run)."""
    met = "met" if check["met"] else "not met: more folds or seeds would be needed"
    return (f"Power check on the central comparison: the interval's half-width is {check['half_width']:.3f} "
            f"against a target of {check['target']:.3f} (half of the larger of |difference| and the margin), "
            f"with {check['n_seeds']} seeds and {check['n_clusters']} folds; {met}.")


def converged_sentence(selections: dict[str, Selection]) -> str:
    """Which trained arms chose an epoch within the budget's last P (the patience: they may not
    have converged) and which chose a lr at the edge of the grid."""
    first = next(iter(selections.values()))
    late = [a for a, s in selections.items() if not s.converged]
    edge = [f"{a} ({s.lr_edge})" for a, s in selections.items() if s.lr_edge]
    out = (f"Every trained arm's best validation epoch at its chosen learning rate came at least {first.patience} "
           f"epochs before the budget's end ({first.budget})." if not late else
           f"These arms chose an epoch within the budget's last {first.patience} ({first.budget} in all), so they may "
           f"not have converged: {', '.join(late)}.")
    cut = [f"{a} ({s.after_stop})" for a, s in selections.items() if s.after_stop]
    return out + (f" At the edge of the lr grid: {', '.join(edge)}." if edge else "") + \
        (f" A mean curve rose above the chosen score after its early stop, which may have cut a slow start, "
         f"for: {', '.join(cut)}." if cut else "")

