"""Chapter 5's trained methods: each chapter's method trained once per seed on the ONE shared split.

Every method is trained by its own chapter's code (its loss, its training loop, its selection),
on the shared root (:func:`fgclip.studies.crosspaper.data.shared_root`) and the ONE frozen CLIP:

==========  ====================================  =======================================  ==================
method      what is trained (chapter's code)       loss                                      selected on
==========  ====================================  =======================================  ==================
maximage    N-Pair MaxImage heads (ch1 main arm)   N-Pair over captions, MaxImage score      validation loss
decoupling  full model, paper's softmax (ch4)      P-ASL, every label known (rho = 1)        validation mAP
sumclip     SUM-CLIP head, FOR arm (ch3)           L_sup (every category) + L_pl (teacher)   validation mAP
clip4dm     nothing (training-free, ch2)           -                                         LA (text layers)
==========  ====================================  =======================================  ==================

One validation split for all four: the LAST ``n_val`` images of the shared training split
(the rule chapter 1's :func:`fgclip.studies.maximage.arms.load_splits` imposes; chapters 3 and 4
take index arrays, so they get the same images). lr and epochs come from each chapter's own
log-spaced grid and budget by :func:`fgclip.train.selection.select_lr_epochs` (eq-selection-stop)
over the first two seeds; later seeds train afresh at the choice. Nothing here reads the test
split except CLIP4DM's outputs (it has nothing to train) and chapter 1's loader, which encodes
its test images (they are returned for the adapters, never scored here). All in fp32.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from ...methods.clip4dm import Attributions, clip4dm, clip4dm_variants, pooling_relevance
from ...models import Clip
from ...partial_labels import known_masks, partial_targets
from ...toyworld.export import load_toyworld_meta
from ...train.selection import Selection, SelectionGrid
from ..clip4dm.arms import last_layers
from ..clip4dm.selection import choose_layers
from ..decoupling import arms as darms, data as ddata, heads as dheads, sweep as dsweep
from ..decoupling.features import Features
from ..for_retrieval import folds as ff, protocol as fp
from ..for_retrieval.data import ForData, open_vocabulary
from ..for_retrieval.head import FrozenFeatures, label_matrix
from ..maximage import arms as ma, data as mdata, heads as mh, init_census as mic
from .adapters import name_texts
from .data import SharedFeatures, SharedSplit, encode_shared, name_embeddings, read_shared
from .extension import IMAGE_RULES, choose_image_rule

# each chapter's grid and budget, as its notebook sets them (lrs, epochs), and the head settings
# copied from its parameters cell (tests/test_ch5_train.py holds them to runner.chapter_defaults)
CH1_GRID = ((1e-3, 3e-3, 1e-2), 18)  # periods of one pass over the fit images
CH3_GRID = ((1e-4, 3e-4, 1e-3, 3e-3), 10)
CH4_GRID = ((1e-3, 1e-2, 1e-1), 12)
CH1_HEADS = dict(batch_size=64, embed_dim=64, temperature=0.1, margin=0.2, score="cosine", mask_same_text=True)
CH4_FIT = dict(gamma_pos=1.0, gamma_neg=2.0, clip=0.05, scalar_lr=0.1)
SELECTION_SEEDS = 2  # lr and epochs chosen on the mean over the first two seeds


@dataclass(frozen=True, eq=False)
class Stage:
    """The shared training split, its frozen features and the frozen CLIP; its last ``n_val``
    images are the validation split every method is selected on (never trained on)."""

    clip: Clip
    train: SharedSplit
    feats: SharedFeatures
    n_val: int
    device: str = "cpu"

    def __post_init__(self) -> None:
        n = len(self.train)
        if isinstance(self.n_val, bool) or not isinstance(self.n_val, int) or not 2 <= self.n_val <= n - 2:
            raise ValueError(f"parameter 'n_val' must be an int in 2..{n - 2} (of {n} training images), "
                             f"got {self.n_val!r}")

    @property
    def fit_idx(self) -> np.ndarray:
        return np.arange(len(self.train) - self.n_val)

    @property
    def val_idx(self) -> np.ndarray:
        return np.arange(len(self.train) - self.n_val, len(self.train))


def make_stage(clip: Clip, root: str | Path, n_train: int, n_val: int, cache_dir: str | Path,
               device: str = "cpu") -> Stage:
    """The first ``n_train`` images of the shared root's train split
    (:func:`~fgclip.studies.crosspaper.data.read_shared`), their cached features
    (:func:`~fgclip.studies.crosspaper.data.encode_shared`), the last ``n_val`` held out."""
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 4:
        raise ValueError(f"parameter 'n_train' must be an int >= 4, got {n_train!r}")
    train = read_shared(root, "train", n_train)
    return Stage(clip, train, encode_shared(clip, train, cache_dir, device), n_val, device)


@dataclass(frozen=True)
class Record:
    """What was chosen for one method, on what, from which curves: ``curves[(lr, seed)]`` is the
    validation curve of one grid run (one point per epoch or period); ``extra``: method specifics."""

    method: str
    arm: str
    lr: float | None
    epochs: int | None
    unit: str  # what one of ``epochs`` is
    lrs: tuple[float, ...]
    budget: int
    seeds: tuple[int, ...]
    curves: dict[tuple[float, int], list[float]]
    criterion: str
    split: str
    converged: bool | None = None
    extra: dict = field(default_factory=dict)
    selection: Selection | None = None  # the routine's own record (plots, to_dict); None for CLIP4DM


def _record(method: str, sel: Selection, unit: str, criterion: str, stage: Stage, **extra) -> Record:
    curves = {(lr, s): list(c) for lr, cs in sel.curves.items() for s, c in zip(sel.seeds, cs)}
    return Record(method, sel.arm, sel.lr, sel.epochs, unit, tuple(sel.curves), sel.budget, tuple(sel.seeds), curves,
                  criterion, f"validation: the last {stage.n_val} of {len(stage.train)} shared training images",
                  sel.converged, {"caveat": sel.caveat().strip(), **extra}, sel)


@dataclass(eq=False)
class MethodRun:
    """One method on the shared split: ``modules[k]`` is what the adapters read for ``seeds[k]``;
    ``context``: what else they need (chapter 1's splits with their test features; None)."""

    method: str
    seeds: tuple[int, ...]
    modules: list
    record: Record
    seconds: float  # wall time of training and selection (features excluded)
    context: Any = None


def _check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    seeds = tuple(seeds)
    if len(seeds) < SELECTION_SEEDS or len(set(seeds)) != len(seeds) or \
            any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise ValueError(f"parameter 'seeds' must hold at least {SELECTION_SEEDS} distinct ints, got {seeds!r}")
    return seeds


def _grid(lrs: Sequence[float], epochs: int, seeds: tuple[int, ...], higher_is_better: bool) -> SelectionGrid:
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"parameter 'epochs' must be an int >= 1, got {epochs!r}")
    try:
        return SelectionGrid(tuple(float(x) for x in lrs), seeds[:SELECTION_SEEDS], epochs, higher_is_better)
    except ValueError as err:
        raise ValueError(f"parameter 'lrs': {err}") from None


# ------------------------------------------------------------------------ MaxImage (ch1)
def maximage_splits(stage: Stage, root: str | Path, n_test: int, word_kind: str = "contextual") -> ma.Splits:
    """Chapter 1's fit/val/test splits (:func:`fgclip.studies.maximage.arms.load_splits`) of the
    shared root's ``flickr30k_entities/`` export: the stage's training images (same order, checked)
    and the first ``n_test`` test images, with chapter 1's own frozen features (its loader has no cache)."""
    data = ma.load_splits(stage.clip, Path(root) / "flickr30k_entities", "train", "test", len(stage.train),
                          stage.n_val, n_test, word_kind, stage.device)
    ids = [int(Path(p).stem) for s in (data.fit, data.val) for p in s.corpus.image_paths]
    if ids != list(stage.train.image_ids):
        raise ValueError(f"parameter 'root': its flickr30k_entities/ train images are not the shared split's "
                         f"(first ids {ids[:3]} vs {list(stage.train.image_ids[:3])})")
    return data


def train_maximage(stage: Stage, root: str | Path, n_test: int, seeds: Sequence[int] = (0, 1),
                   lrs: Sequence[float] = CH1_GRID[0], epochs: int = CH1_GRID[1], bias_init: str = "zero",
                   census_seeds: int = 0, word_kind: str = "contextual") -> MethodRun:
    """Chapter 1's main arm, N-Pair MaxImage (:func:`fgclip.studies.maximage.arms.chapter_arms` of
    the notebook's TrainConfig: B = 64, E = 64, temperature 0.1, cosine score, same-text negatives
    masked), trained by :func:`fgclip.studies.maximage.arms.train_selected`: N-Pair loss on the
    MaxImage score over the captions, ``epochs`` periods of one pass over the fit images, lr and
    period by the lowest mean validation loss over the first two seeds (eq-selection-stop).

    ``bias_init``: "zero" (default; the census, 2 x 16 seeds over the whole budget, would not fit
    chapter 5's time: zero makes the untrained map depend on the word, and the book run's
    validation-pointing diagnostic favoured it, the replicate could not tell), "default", or
    "select" (chapter 1's census on ``census_seeds`` seeds seed + 500, ..., at the grid's middle lr).
    Modules: :class:`~fgclip.methods.maximage.MaxImageHeads` per seed; context: chapter 1's splits
    (``context.test.img``: the test features the heads read)."""
    seeds = _check_seeds(seeds)
    grid = _grid(lrs, epochs, seeds, higher_is_better=False)
    if bias_init != "select":
        mic.resolve_bias_init(bias_init, None)  # an unknown start fails here, naming 'bias_init', before any work
    elif isinstance(census_seeds, bool) or not isinstance(census_seeds, int) or census_seeds < 1:
        raise ValueError(f"parameter 'census_seeds': bias_init 'select' needs an int >= 1, got {census_seeds!r}")
    data = maximage_splits(stage, root, n_test, word_kind)
    t0 = time.perf_counter()
    base = mh.TrainConfig(**CH1_HEADS, device=stage.device, precision="fp32")
    period = ma.pass_steps(data, base.batch_size)
    census = None
    if bias_init == "select":
        census = mic.run_init_census(data, base, sorted(grid.lrs)[len(grid.lrs) // 2],
                                     [seeds[0] + 500 + k for k in range(census_seeds)], epochs, period, 0.05, "hull")
    base = replace(base, bias_init=mic.resolve_bias_init(bias_init, census))
    heads, sel, curves = ma.train_selected(ma.chapter_arms(base).main, data, grid, seeds, period)
    record = _record("maximage", sel, f"period ({period} steps of {base.batch_size} images)",
                     "lowest mean validation loss (N-Pair)", stage, bias_init=base.bias_init,
                     census=census.to_dict() if census else None, seed_curves=curves["seeds"])
    return MethodRun("maximage", seeds, heads, record, time.perf_counter() - t0, data)


def name_words(clip: Clip, names: Sequence[str], kind: str = "contextual", prompt: str = "a {}"
               ) -> dict[str, torch.Tensor]:
    """name -> (n_c, Dt) chapter 1's frozen word features (:func:`fgclip.studies.maximage.data.word_features`)
    of the name's words read inside ``prompt`` (the MaxImage adapters' ``name_words``)."""
    words = prompt.split()
    if words.count("{}") != 1:
        raise ValueError(f"parameter 'prompt' must hold one '{{}}' as a word, got {prompt!r}")
    at = words.index("{}")
    bank = mdata.word_features(clip, [prompt.format(n).split() for n in names], kind, ragged=True)
    return {n: bank.caption(k)[at:at + len(n.split())] for k, n in enumerate(names)}


# ---------------------------------------------------------------------- decoupling (ch4)
class _KeepingTrainer(darms.Trainer):
    """Chapter 4's Trainer that keeps each head it predicts with, by the Prediction it returns:
    :func:`fgclip.studies.decoupling.sweep.select_and_evaluate` returns one head, ch5 needs each seed's."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kept: dict[int, torch.nn.Module] = {}

    def test(self, head: torch.nn.Module) -> dheads.Prediction:
        pred = super().test(head)
        self.kept[id(pred)] = head
        return pred


def train_decoupling(stage: Stage, seeds: Sequence[int] = (0, 1), rho: float = 1.0,
                     lrs: Sequence[float] = CH4_GRID[0], epochs: int = CH4_GRID[1], rank: int = 32,
                     hand_prompt: str = "a", batch_size: int = 256) -> MethodRun:
    """Chapter 4's full model (:data:`fgclip.studies.decoupling.arms.FULL`: semantic decoupling +
    category-specific prompts, the paper's softmax) on the shared features, P-ASL (gamma+ 1,
    gamma- 2, clip 0.05) on the known labels, known with probability ``rho`` (default 1: every label,
    as every other method sees them), through :func:`fgclip.studies.decoupling.sweep.select_and_evaluate`:
    lr and epochs by the best mean validation mAP (known entries) over the first two seeds, the
    other seeds trained afresh at the choice. Its "test" predictions are made on the validation
    features (unused): nothing here sees the test split. Modules: the heads
    (:class:`~fgclip.methods.decoupling.MultiLabelCLIPHead`, categories in ``stage.train.categories`` order)."""
    seeds = _check_seeds(seeds)
    if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not 0 < rho <= 1:
        raise ValueError(f"parameter 'rho' must lie in (0, 1], got {rho!r}")
    grid = _grid(lrs, epochs, seeds, higher_is_better=True)
    labels, fit_idx, val_idx = stage.train.labels, stage.fit_idx, stage.val_idx
    ddata.check_validation_positives(labels, [rho], list(seeds), val_idx)
    t0 = time.perf_counter()
    clip = stage.clip
    tau = 1.0 / float(clip.model.logit_scale.detach().exp())
    make = dheads.head_maker(clip, "", hand_prompt, tau, rank, 0)(list(stage.train.categories))
    feats = Features(stage.feats.dense, stage.feats.pooled)
    cfg = dheads.FitConfig(batch_size=batch_size, **CH4_FIT, device=stage.device, precision="fp32")
    trainer = _KeepingTrainer(make, feats.subset(fit_idx), feats.subset(val_idx), feats.subset(val_idx), cfg)
    targets = {s: partial_targets(labels, known_masks(labels.shape, [rho], s)[float(rho)]) for s in seeds}
    split = lambda m: (targets[m.seed][fit_idx], targets[m.seed][val_idx])  # noqa: E731
    sel, preds, _, _ = dsweep.select_and_evaluate(trainer, darms.FULL, grid, rho, [rho], list(seeds), split)
    heads = [trainer.kept[id(preds[rho, s])].eval() for s in seeds]
    record = _record("decoupling", sel, "epoch", "best mean validation mAP on log p (known entries)", stage,
                     rho=rho, scoring=darms.FULL.scoring)
    return MethodRun("decoupling", seeds, heads, record, time.perf_counter() - t0)


# -------------------------------------------------------------------- SUM-CLIP / FOR (ch3)
def shared_for_data(stage: Stage, prompt: str = "a {}", vocab: Sequence[str] | None = None) -> ForData:
    """Chapter 3's :class:`~fgclip.studies.for_retrieval.data.ForData` from the stage's cached
    features, not from images (its :func:`~fgclip.studies.for_retrieval.data.for_data` encodes
    pixels and draws its own validation part): the stage's fit/val images, the toy world's open
    vocabulary (or ``vocab``). No gallery: selection never looks at one."""
    clip, train = stage.clip, stage.train
    vocab = list(vocab) if vocab is not None else open_vocabulary(load_toyworld_meta(train.root / "coco"), "")
    cats = list(train.categories)
    names = [{c for c, y in zip(cats, row) if y} for row in train.labels]
    memory = stage.feats.memory(clip)
    return ForData(pool=clip.model.visual.attnpool, train=FrozenFeatures(stage.feats.pooled, stage.feats.dense, memory),
                   gallery=None, fit_idx=torch.as_tensor(stage.fit_idx), val_idx=torch.as_tensor(stage.val_idx),
                   train_labels=names, truth=label_matrix([n & set(vocab) for n in names], vocab),
                   relevant=torch.zeros(len(cats), 0, dtype=torch.bool), query_text=name_embeddings(clip, cats, prompt),
                   vocab_text=name_embeddings(clip, vocab, prompt), categories=cats, vocab=vocab,
                   logit_scale=clip.model.logit_scale.exp().item())


def train_sumclip(stage: Stage, seeds: Sequence[int] = (0, 1), novel: Sequence[str] = (),
                  lrs: Sequence[float] = CH3_GRID[0], epochs: int = CH3_GRID[1], n_queries: int = 6,
                  d_model: int = 16, batch_size: int = 32, k_candidates: Sequence[int] = (1, 2, 3, 4, 6),
                  fixed_threshold: float = 5e-4, prompt: str = "a {}") -> MethodRun:
    """Chapter 3's FOR arm: a SUM-CLIP head (N = 6 queries, 1 decoder layer, d = 16, no m-residual,
    W_c a trainable copy: the notebook's head), L = L_sup + L_pl (Hungarian-matched set losses,
    :func:`fgclip.studies.for_retrieval.head.train_head`), L_pl on the Cluster-CLIP teacher's names
    at its held-out threshold, k and tau chosen on the validation images
    (:func:`fgclip.studies.for_retrieval.folds.prepare_fold`); lr and epochs by the best mean
    validation mAP over the first two seeds (:func:`fgclip.studies.for_retrieval.protocol.select_schedules`).

    ``novel=()`` (default): L_sup on EVERY drawable category. Chapter 5 asks every method about
    every category, and decoupling (rho = 1) and MaxImage (captions) see them all; holding a fold
    out would make SUM-CLIP the only method blind to some names. The pseudo-label loss still adds
    what FOR adds, the teacher's open-vocabulary names. ``novel``: one held-out fold, the chapter's
    own setting. Modules: :class:`~fgclip.methods.sumclip.SumClipHead` per seed."""
    seeds = _check_seeds(seeds)
    unknown = sorted(set(novel) - set(stage.train.categories))
    if unknown or len(novel) >= len(stage.train.categories):
        raise ValueError(f"parameter 'novel' must be a proper subset of the categories, got unknown {unknown}")
    grid = _grid(lrs, epochs, seeds, higher_is_better=True)
    data = shared_for_data(stage, prompt)
    t0 = time.perf_counter()
    fold = ff.prepare_fold(data, 0, list(novel), list(k_candidates), fixed_threshold, seeds[0])
    head_kw = dict(n_queries=n_queries, n_layers=1, d_model=d_model, residual=False, train_out=True)
    train_kw = dict(batch_size=batch_size, precision="fp32")
    labels, kw = fp.arm_settings(fold, head_kw)[ff.FOR]
    selections, kept = fp.select_schedules(data, fold, grid, head_kw, train_kw, arms={ff.FOR: (labels, kw)})
    sel = selections[ff.FOR]
    heads = [kept[ff.FOR, s] if (ff.FOR, s) in kept else
             fp.train_run(data, fold, labels, kw, s, sel.lr, sel.epochs, train_kw).head for s in seeds]
    record = _record("sumclip", sel, "epoch", "best mean validation mAP over the base categories", stage,
                     novel=list(novel), k=fold.k, tau=fold.taus["held-out"])
    return MethodRun("sumclip", seeds, [h.eval() for h in heads], record, time.perf_counter() - t0)


# ------------------------------------------------------------------------- CLIP4DM (ch2)
@dataclass(eq=False)
class Clip4dmOutputs:
    """CLIP4DM on one split: w_j of each FOIL caption (``captions``, the foil texts in the split's
    order), CLIP's image embeddings, the texts 'A photo depicts a {name}' and, the image-side
    extension, each (image, name text)'s relevance over the pooling's tokens (the adapters' inputs)."""

    attributions: Attributions
    captions: list[str]
    image_emb: torch.Tensor  # (N, D)
    name_text: torch.Tensor  # (C, D)
    names: tuple[str, ...]
    relevance: torch.Tensor  # (N, C, 1 + h w): pooling_relevance of every test image and name text


@contextlib.contextmanager
def _differentiable(module: torch.nn.Module):
    """Every parameter of ``module`` requiring grad for the block, its flags restored after:
    CLIP4DM differentiates the score through the text tower's attention maps, and chapter 4's
    prompt learner freezes the shared CLIP in place (requires_grad False), which leaves no graph."""
    flags = [(p, p.requires_grad) for p in module.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(True)
        yield module
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def _foil_rows(items) -> pd.DataFrame:
    """Chapter 2's caption rows (start, length, foil word) of FOIL items (one replaced word each)."""
    return pd.DataFrame({"start": [f.word_index for f in items], "length": 1,
                         "foil_word": [f.foil_word for f in items]})


def clip4dm_outputs(stage: Stage, test: SharedSplit, test_feats: SharedFeatures, seeds: Sequence[int] = (0, 1),
                    n_last_layers: int = 0, batch_size: int = 128) -> MethodRun:
    """CLIP4DM, training-free (:func:`fgclip.methods.clip4dm.clip4dm`: gradient x attention on the
    frozen text tower, negatives kept), its last-n text layers chosen as chapter 2 does
    (:func:`fgclip.studies.clip4dm.selection.choose_layers`: the best LA on the validation images'
    FOIL captions; ``n_last_layers`` > 0 fixes n), then run on ``test``'s FOIL captions; and the
    image-side extension (:func:`fgclip.methods.clip4dm.pooling_relevance`) of every test image
    with every name text, for pointing. The same outputs for every seed (nothing is drawn; ties
    are broken by the task's rng)."""
    seeds = _check_seeds(seeds)
    clip, val = stage.clip, set(stage.val_idx.tolist())
    items = [f for f in stage.train.foils if f.image in val]
    if not items or not test.foils:
        raise ValueError("parameter 'stage'/'test': CLIP4DM needs FOIL captions on the validation images and on test")
    n_layers = len(clip.model.transformer.resblocks)
    t0 = time.perf_counter()
    cfgs = [last_layers(n) for n in range(1, n_layers + 1)]
    captions = [f.foil for f in test.foils]
    with _differentiable(clip.model):
        attr_val = clip4dm_variants(clip, stage.feats.pooled, [f.foil for f in items], {c: c for c in cfgs},
                                    device=stage.device, batch_size=batch_size, image_index=[f.image for f in items])
        la, main = choose_layers(attr_val, _foil_rows(items), n_layers, np.random.default_rng(seeds[0]), n_last_layers)
        att = clip4dm(clip, test_feats.pooled, captions, main, device=stage.device, batch_size=batch_size,
                      image_index=[f.image for f in test.foils])
    if tuple(test.categories) != tuple(stage.train.categories):
        raise ValueError("parameter 'test': its categories are not the stage's (another world?)")
    name_text = name_embeddings(clip, name_texts(test.categories), "{}")  # (C, D)
    pool = clip.model.visual.attnpool
    relu, rules = choose_image_rule(pool, stage, name_text)
    relevance = pooling_relevance(pool, test_feats.feature_map.to(stage.device), name_text.to(stage.device),
                                  relu).cpu()  # (N, C, 1 + h w)
    out = Clip4dmOutputs(att, captions, test_feats.pooled, name_text, tuple(test.categories), relevance)
    record = Record("clip4dm", "CLIP4DM", None, None, "-", (), 0, (), {}, "LA of the most negative word",
                    f"validation: FOIL captions of the last {stage.n_val} shared training images",
                    extra={"layers": main.label, "LA by layers": la.to_dict(), "image-side rule": IMAGE_RULES[relu],
                           "validation pointing by image-side rule": rules})
    return MethodRun("clip4dm", seeds, [out] * len(seeds), record, time.perf_counter() - t0)
