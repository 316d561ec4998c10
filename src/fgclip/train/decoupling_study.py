"""Chapter 4's experimental protocol around the decoupling head: validation split, learning
rates chosen on it, seeded runs, a logistic-regression baseline, and planted worlds for the
softmax-vs-sigmoid controls. The notebook calls these; the algebra lives elsewhere
(``fgclip.methods.decoupling``, ``fgclip.losses.asymmetric``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..fileio import atomic_write_stream
from ..losses.asymmetric import UNKNOWN
from ..metrics.multilabel import known_map, per_class_ap
from ..partial_labels import known_masks, partial_targets
from .decoupling_head import FitConfig, FitResult, Prediction, encode_image_files, fit_early_stopping, predict


def split_validation(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of n training images into (fit indices, validation indices)."""
    if not 0 < fraction < 1:
        raise ValueError(f"val_fraction must lie in (0, 1), got {fraction}")
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, int(round(fraction * n)))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def known_positive_table(labels: np.ndarray, masks: dict[int, dict[float, np.ndarray]],
                         class_names: list[str], rows: np.ndarray | None = None) -> pd.DataFrame:
    """Known positives per category (rows) at each proportion (columns), min-max over seeds.

    labels (N, C) 0/1; masks[seed][ρ] (N, C) boolean; ``rows``: count only these images.
    """
    if rows is not None:
        labels, masks = labels[rows], {sd: {r: m[rows] for r, m in ms.items()} for sd, ms in masks.items()}
    out = {}
    for rho in next(iter(masks.values())):
        counts = np.stack([((labels == 1) & m[rho]).sum(0) for m in masks.values()])  # (S, C)
        out[f"{rho:.0%} known"] = [f"{lo}" if lo == hi else f"{lo}-{hi}"
                                   for lo, hi in zip(counts.min(0), counts.max(0))]
    return pd.DataFrame(out, index=class_names)


def logistic_scores(train_x: np.ndarray, targets: np.ndarray, test_x: np.ndarray,
                    c_reg: float = 1.0) -> np.ndarray:
    """One scikit-learn logistic regression per category on the L2-normalised global feature,
    fitted on that category's known entries only; decision values s (N_test, C).

    A category whose known entries hold a single class gets a constant score.
    """
    from sklearn.linear_model import LogisticRegression

    norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    xa, xb = norm(np.asarray(train_x, dtype=np.float64)), norm(np.asarray(test_x, dtype=np.float64))
    out = np.zeros((len(xb), targets.shape[1]))
    for c in range(targets.shape[1]):
        known = targets[:, c] != UNKNOWN
        y = targets[known, c]
        if len(np.unique(y)) < 2:
            continue
        out[:, c] = LogisticRegression(C=c_reg, max_iter=500).fit(xa[known], y).decision_function(xb)
    return out


def choose(candidates: list, score: Callable[[object], float]) -> tuple[object, dict]:
    """The candidate with the highest ``score`` (ties: the first); returns it and all scores."""
    if not candidates:
        raise ValueError("choose: no candidates")
    scores = {c: score(c) for c in candidates}
    return max(scores, key=scores.get), scores


# --- planted worlds for the softmax-vs-sigmoid controls --------------------------------

WORLDS = ("paired", "independent", "single", "null")


def planted_world(kind: str, n: int, n_classes: int = 16, dim: int = 32, noise: float = 0.6,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features x (n, dim) and labels y (n, C) of a planted multi-label world.

    x_i = sum_c y_ic mu_c / sqrt(k_i) + noise * eps_i / sqrt(dim), mu_c fixed random unit
    prototypes (seeded by ``seed``, the same for every call with that seed), k_i = sum_c y_ic.

    * ``"paired"``: categories come in fixed pairs (2j, 2j+1) that always co-occur, and an
      image holds either 1 pair or 4 pairs (probability 1/2 each), so the number of
      categories present varies between 2 and 8 and a category is present mostly in
      crowded images. A softmax over categories shares its mass among the present ones,
      so it must rank a category lower on crowded images: coupling must change mAP.
    * ``"independent"``: each image holds 2 categories drawn uniformly without replacement
      (the number present never varies).
    * ``"single"``: each image holds exactly one category, drawn uniformly: no category
      co-occurs with another, so a shared denominator has no second positive to take mass
      from, but it can explain a category away when another one scores higher.
    * ``"null"``: independent categories (each present with probability 2/C, at least one
      per image) and features that carry no label information (x_i is noise only): every
      ranking is chance, so no scoring rule can beat another.
    """
    if kind not in WORLDS:
        raise ValueError(f"kind must be one of {WORLDS}, got {kind!r}")
    if n_classes % 2 or n_classes < 8:
        raise ValueError(f"n_classes must be even and >= 8, got {n_classes}")
    proto_rng = np.random.default_rng(seed)
    mu = proto_rng.standard_normal((n_classes, dim))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)  # (C, dim)
    rng = np.random.default_rng([seed, n, WORLDS.index(kind)])
    y = np.zeros((n, n_classes), dtype=np.int64)
    for i in range(n):
        if kind == "paired":
            pairs = rng.choice(n_classes // 2, size=1 if rng.random() < 0.5 else 4, replace=False)
            y[i, np.concatenate([2 * pairs, 2 * pairs + 1])] = 1
        elif kind == "null":
            y[i] = rng.random(n_classes) < 2 / n_classes
            if not y[i].any():
                y[i, rng.integers(n_classes)] = 1
        else:
            y[i, rng.choice(n_classes, size=2 if kind == "independent" else 1, replace=False)] = 1
    x = (y @ mu) / np.sqrt(y.sum(1, keepdims=True)) * (kind != "null")
    x += noise * rng.standard_normal((n, dim)) / np.sqrt(dim)
    return x.astype(np.float32), y


class FreeText(nn.Module):
    """Learnable category vectors f^t (C, D), a stand-in for the prompts in planted worlds."""

    def __init__(self, n_classes: int, dim: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = nn.Parameter(torch.randn(n_classes, dim, generator=g) * 0.1)

    def forward(self) -> torch.Tensor:
        return self.weight  # (C, D)


def planted_control(kind: str, scorings: tuple[str, str], seeds: list[int], tau: float,
                    cfg: FitConfig, lr_candidates: list[float], proportion: float = 0.5,
                    n_train: int = 800, n_val: int = 200, n_test: int = 500, world_seed: int = 0,
                    noise: float = 0.6) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Train the same cosine head under each scoring rule on a planted world, each rule with
    its own learning rate chosen on the planted validation split (first seed), every run
    early-stopped there. Returns per-category test AP on log p, {scoring: (n_seeds, C)},
    and the chosen learning rates. Masks, initialisation and batches follow each seed; the
    world (prototypes and images) follows ``world_seed``."""
    from ..methods.decoupling import MultiLabelCLIPHead

    x, y = planted_world(kind, n_train + n_val + n_test, noise=noise, seed=world_seed)
    xt = torch.as_tensor(x)
    dense = torch.zeros(len(x), 1, 1, 1)  # unused: the head scores the global feature
    tr, va, te = (slice(0, n_train), slice(n_train, n_train + n_val),
                  slice(n_train + n_val, None))

    def run(scoring: str, sd: int, lr: float):
        known = known_masks(y[:n_train + n_val].shape, [proportion], sd)[proportion]
        targets = partial_targets(y[:n_train + n_val], known)
        torch.manual_seed(sd)
        head = MultiLabelCLIPHead(None, None, FreeText(y.shape[1], x.shape[1], sd), None, tau,
                                  scoring)
        res = fit_early_stopping(head, dense[tr], xt[tr], targets[tr], FitConfig(
            **{**cfg.__dict__, "seed": sd, "lr": lr}), dense[va], xt[va], targets[n_train:])
        return per_class_ap(predict(head, dense[te], xt[te])[1], y[te]), max(res.val_map)

    out, chosen = {}, {}
    for scoring in scorings:
        first = {lr: run(scoring, seeds[0], lr) for lr in lr_candidates}
        chosen[scoring] = max(lr_candidates, key=lambda lr: first[lr][1])
        out[scoring] = np.stack([first[chosen[scoring]][0]] + [
            run(scoring, sd, chosen[scoring])[0] for sd in seeds[1:]])
    return out, chosen


# --- the chapter's seeded sweep over variants --------------------------------------------

@dataclass(frozen=True)
class Arm:
    """One row of the chapter's tables: its display ``name`` (the results' "variant"), the
    :func:`~fgclip.train.decoupling_head.make_head` ``variant`` it builds (untrained rows name
    their own kind) and its scoring rule (``fgclip.methods.decoupling.SCORINGS``)."""

    name: str
    variant: str
    scoring: str


LINEAR_PROBE = Arm("linear probe", "linear probe", "sigmoid")
PROMPTS_ONLY = Arm("prompts only", "prompts only", "softmax")
DECOUPLING_ONLY = Arm("decoupling only", "decoupling only", "softmax")
FULL = Arm("full (paper, softmax)", "full", "softmax")
FULL_BIAS = Arm("full, sigmoid+bias", "full", "sigmoid+bias")
FULL_AFFINE = Arm("full, sigmoid+affine", "full", "sigmoid+affine")
TRAINED = (LINEAR_PROBE, PROMPTS_ONLY, DECOUPLING_ONLY, FULL, FULL_BIAS, FULL_AFFINE)
ZERO_SHOT = Arm("zero-shot", "zero-shot", "softmax")
UNTRAINED = Arm("untrained init", "full", "softmax")
LOGISTIC = Arm("logistic regression", "logistic regression", "sigmoid")
ROWS = (ZERO_SHOT, UNTRAINED, LOGISTIC, *TRAINED)  # the order of the chapter's tables


class Features(NamedTuple):
    """Frozen-CLIP features of N images."""

    dense: torch.Tensor  # (N, D, h, w) the map f
    pooled: torch.Tensor  # (N, D) the global feature

    def subset(self, idx) -> "Features":
        return Features(self.dense[idx], self.pooled[idx])


class Trained(NamedTuple):
    head: nn.Module
    result: FitResult


class Trainer:
    """Trains one :class:`Arm` on the fit split with early stopping on the validation split;
    the frozen CLIP, its cached features and the base FitConfig are fixed.

    make: ``lambda variant, scoring, seed: nn.Module`` (a bound ``make_head``).
    """

    def __init__(self, make: Callable, fit_feats: Features, val_feats: Features,
                 test_feats: Features, cfg: FitConfig) -> None:
        self.make, self.fit_feats, self.val_feats, self.test_feats = make, fit_feats, val_feats, test_feats
        self.cfg = cfg

    def train(self, arm: Arm, fit_targets: np.ndarray, val_targets: np.ndarray, lr: float,
              seed: int) -> Trained:
        """The head of ``arm`` trained at learning rate lr and training seed, and its FitResult."""
        head = self.make(arm.variant, arm.scoring, seed)
        cfg = FitConfig(**{**self.cfg.__dict__, "lr": lr, "seed": seed})
        return Trained(head, fit_early_stopping(head, *self.fit_feats, fit_targets, cfg,
                                                *self.val_feats, val_targets))

    def test(self, head: nn.Module) -> Prediction:
        """(scores s, log p, attention) of ``head`` on the test features."""
        return predict(head, *self.test_feats, device=self.cfg.device)


# --- frozen features: square resize, one cache file per (model, data, split, transform) ----

def square_transform(preprocess):
    """open_clip's eval transform with Resize(short side) + CenterCrop(S) replaced by one
    Resize((S, S)): the whole image, stretched to a square, as HCP-MLR-PL and DualCoOp do.
    The feature grid then covers the full image, which is what pointing and overlays assume."""
    from torchvision import transforms as T

    steps = list(preprocess.transforms)
    crops = [t for t in steps if isinstance(t, T.CenterCrop)]
    resizes = [t for t in steps if isinstance(t, T.Resize)]
    if len(crops) != 1 or len(resizes) != 1:
        raise ValueError(f"expected one Resize and one CenterCrop in {preprocess}")
    size = tuple(crops[0].size) if not isinstance(crops[0].size, int) else (crops[0].size,) * 2
    square = T.Resize(size, interpolation=resizes[0].interpolation, antialias=True)
    return T.Compose([square if t is resizes[0] else t for t in steps if t is not crops[0]])


def feature_cache_path(cache_dir, model: str, pretrained: str, data_root, data_format: str,
                       split: str, transform) -> Path:
    """A cache file named by everything the features depend on: model, weights, the data
    root (resolved), format, split and the image transform (hashed)."""
    import hashlib

    key = repr((model, str(pretrained), str(Path(data_root).resolve()), data_format, split,
                repr(transform)))
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return Path(cache_dir) / f"{Path(model).stem}_{Path(str(pretrained)).stem}_{split}_{digest}.pt"


def files_fingerprint(paths: list) -> str:
    """SHA-1 over each file's path, size and modification time (ns): it changes when a file
    is added, removed, renamed or rewritten. Size and mtime, not a content hash: a stat per
    file costs nothing on 120k COCO images, while hashing would read every byte on every run."""
    import hashlib
    import os

    h = hashlib.sha1()
    for p in paths:
        st = os.stat(p)
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def cached_features(path, paths: list, encode: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """(dense, pooled) from ``path`` when it holds features of exactly these image files as
    they are now (:func:`files_fingerprint`: names, sizes, mtimes), else ``encode(paths)``,
    saved to ``path``. The transform and model are in ``path`` (:func:`feature_cache_path`)."""
    path, names = Path(path), [str(p) for p in paths]
    fingerprint = files_fingerprint(names)
    if path.is_file():
        blob = torch.load(path, weights_only=True)
        if blob.get("files") == names and blob.get("fingerprint") == fingerprint:
            return blob["features"]
    feats = encode(paths)
    blob = {"files": names, "fingerprint": fingerprint, "features": feats}
    atomic_write_stream(path, lambda f: torch.save(blob, f))  # streamed to disk, no RAM copy
    return feats


def frozen_features(clip, cache_dir, model: str, pretrained: str, root, data_format: str,
                    paths: dict[str, list], device: str = "cpu") -> dict[str, Features]:
    """:class:`Features` of each split's image files (``paths[split]``) through the frozen
    CLIP and :func:`square_transform`, read from / written to a cache file per split
    (:func:`feature_cache_path`, :func:`cached_features`)."""
    transform = square_transform(clip.preprocess)
    encode = lambda files: encode_image_files(clip, files, device=device, transform=transform)  # noqa: E731
    return {s: Features(*cached_features(feature_cache_path(
        cache_dir, model, pretrained, root, data_format, s, transform), files, encode))
        for s, files in paths.items()}


def zero_shot_diagnostic(text_features: torch.Tensor, test: Features, labels: np.ndarray,
                         tau: float) -> dict[str, float]:
    """Test mAP of s = cos/τ against the hand-prompt text features (C, D), for the global
    feature and for the mean of the dense features (roughly where f^v_c starts)."""
    from ..methods.decoupling import category_scores
    from ..metrics.multilabel import mean_average_precision

    feats = {"global feature": test.pooled, "mean of dense features": test.dense.mean((2, 3))}
    return {k: mean_average_precision(category_scores(v, text_features, tau).numpy(), labels)
            for k, v in feats.items()}


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


class PointingTrials(NamedTuple):
    """Per-class pointing trials, one per (image, category present)."""

    attention_hits: np.ndarray  # (n_maps, T) 0/1: the argmax of a_c falls in a box of c
    centre_hits: np.ndarray  # (T,) 0/1: the image centre does
    images: np.ndarray  # (T,) the trial's image index (the bootstrap's cluster)


def pointing_hits(attention: list[np.ndarray], objects: list, hws: list,
                  class_names: list[str]) -> PointingTrials:
    """Per-class pointing trials (one per image and category present): 0/1 hits of each
    attention map's argmax (n_maps, T), of the image centre (T,), and the trials' image ids."""
    from ..metrics.pointing import argmax_point, center_point, class_pointing

    trials = [(i, c) for i, objs in enumerate(objects) for c in sorted({n for n, _ in objs})]
    boxes = [[b for n, b in objects[i] if n == c] for i, c in trials]
    t_hws, classes = [hws[i] for i, _ in trials], [c for _, c in trials]
    att_hits = [class_pointing([argmax_point(att[i, class_names.index(c)], hws[i]) for i, c in trials],
                               boxes, t_hws, classes, 0.0).hits for att in attention]
    centre = class_pointing([center_point(hw) for hw in t_hws], boxes, t_hws, classes, 0.0).hits
    return PointingTrials(np.array(att_hits, float), np.array(centre, float),
                          np.array([i for i, _ in trials]))


# --- data: a real root read as it is, or the toy world exported into a keyed cache folder ----

DIFFICULT = ("ignore", "positive")


class SplitData(NamedTuple):
    """One split as read: image files, their objects and sizes."""

    paths: list  # image files
    objects: list  # [(category, box (x0, y0, x1, y1))] per image
    hws: list  # (h, w) per image


class DetectionData(NamedTuple):
    """What :func:`prepare_data` read."""

    root: Path  # the folder actually read
    splits: dict  # split -> SplitData
    class_names: list  # sorted category names
    labels: dict  # split -> (N, C) labels in {1, 0, -1} (:func:`label_matrix`)


def label_matrix(objects: list, class_names: list[str], difficult: list | None = None,
                 policy: str = "ignore") -> np.ndarray:
    """(N, C) labels: 1 if a category is present, 0 if not; with VOC ``difficult`` flags
    (one list of booleans per image, aligned with ``objects``) a category present only as
    difficult objects is -1 (ignored by the metrics and unknown in training) under
    ``policy='ignore'`` (HCP-MLR-PL, DualCoOp) or 1 under ``'positive'``."""
    if policy not in DIFFICULT:
        raise ValueError(f"difficult must be one of {DIFFICULT}, got {policy!r}")
    y = np.zeros((len(objects), len(class_names)), dtype=np.int64)
    col = {c: k for k, c in enumerate(class_names)}
    for i, objs in enumerate(objects):
        flags = difficult[i] if difficult is not None else [False] * len(objs)
        for (c, _), hard in zip(objs, flags):
            if not hard:
                y[i, col[c]] = 1
            elif y[i, col[c]] != 1:
                y[i, col[c]] = 1 if policy == "positive" else UNKNOWN
    return y


def holds_detection_data(root, splits) -> bool:
    """True when ``root`` holds a COCO instances file or a VOC2007 ImageSets list of any of
    ``splits`` (a real dataset or an earlier export): then it is read as it is."""
    root = Path(root)
    return any((root / "annotations" / f"instances_{s}.json").is_file()
               or (root / "VOC2007" / "ImageSets" / "Main" / f"{s}.txt").is_file() for s in splits)


def subsample(n_have: int, n_want: int, seed: int, split: str, param: str) -> np.ndarray:
    """Sorted indices of a seeded uniform draw of ``n_want`` of a split's ``n_have`` images
    (all of them when ``n_want`` is 0 or equals ``n_have``); the draw follows (seed, split).
    Raises ValueError naming ``param`` when the split holds fewer images than asked."""
    import zlib

    if n_want < 0:
        raise ValueError(f"{param} must be at least 0, got {n_want}")
    if n_want > n_have:
        raise ValueError(f"{param}={n_want} but split {split!r} holds only {n_have} images; "
                         f"set {param} to at most {n_have} (0: the whole split)")
    if n_want in (0, n_have):
        return np.arange(n_have)
    rng = np.random.default_rng([seed, zlib.crc32(split.encode())])
    return np.sort(rng.choice(n_have, size=n_want, replace=False))


def prepare_data(root, data_format: str, sizes: dict[str, int], seed: int,
                 difficult: str = "ignore", size_names: dict[str, str] | None = None
                 ) -> DetectionData:
    """Read every split of ``sizes`` with the reader of ``data_format``.

    ``root`` holding a dataset (:func:`holds_detection_data`) is read as it is and never
    written to; otherwise the toy world (COCO JSON + VOC XML + toyworld.json) is exported
    once into ``root/toy-<digest>/``, keyed by world, seed and sizes
    (:func:`fgclip.toyworld.cache.toy_export`). A split holding more images than asked is
    subsampled (:func:`subsample`, seeded by ``seed``); fewer raises, naming the parameter
    (``size_names[split]``, e.g. "n_train"). On a toy export both readers must agree.

    Returns a :class:`DetectionData`: the folder read, splits[split] (:class:`SplitData`),
    the sorted class names and labels[split] (N, C) (:func:`label_matrix`).
    """
    from ..datasets import read_detection_split
    from ..datasets.voc import read_voc
    from ..toyworld import ToyWorldConfig, generate
    from ..toyworld.cache import toy_export
    from ..toyworld.export import export_coco, export_voc, write_toyworld_meta

    size_names = size_names or {s: f"the size of split {s!r}" for s in sizes}
    world = ToyWorldConfig()

    def export(folder: Path) -> None:
        for split, n in sizes.items():
            if n <= 0:
                raise ValueError(f"{size_names[split]} must be > 0 for the toy export, got {n}")
            scenes = generate(world, n, seed=seed, split=split)
            export_coco(scenes, folder, split, world, seed)
            export_voc(scenes, folder, split)
        write_toyworld_meta(folder, world, seed)

    folder = toy_export(root, lambda r: holds_detection_data(r, sizes), export,
                        world=world, seed=seed, sizes=sizes)
    data = {s: read_detection_split(folder, s, data_format) for s in sizes}
    keep = {s: subsample(len(data[s][0]), n, seed, s, size_names[s]) for s, n in sizes.items()}
    data = {s: SplitData(*([part[i] for i in keep[s]] for part in d)) for s, d in data.items()}
    if (folder / "toyworld.json").is_file():  # the toy export has both formats: they must agree
        other = "voc" if data_format == "coco" else "coco"
        for s in sizes:
            b = read_detection_split(folder, s, other)[1]
            same = [sorted({c for c, _ in o}) for o in data[s].objects] == \
                [sorted({c for c, _ in b[i]}) for i in keep[s]]
            if not same:
                raise AssertionError(f"COCO and VOC readers disagree on the labels of split {s}")
    names = sorted({c for d in data.values() for objs in d.objects for c, _ in objs})
    voc = {s: read_voc(folder, s) for s in sizes} if data_format == "voc" else {}
    hard = {s: [[o.difficult for o in voc[s][i].objects] for i in keep[s]] if voc else None for s in sizes}
    labels = {s: label_matrix(d.objects, names, hard[s], difficult) for s, d in data.items()}
    return DetectionData(folder, data, names, labels)


def planted_verdicts(kinds: tuple[str, ...], seeds: list[int], tau: float, cfg: FitConfig,
                     lr_candidates: list[float], seed: int, noise: float = 1.5
                     ) -> tuple[dict, list[dict]]:
    """:func:`planted_control` (softmax vs sigmoid+affine) on each planted world, read as
    ``fgclip.verdicts.compare`` over seeds x categories; also the 'chosen on which split'
    rows of the learning rates picked on each world's validation split."""
    from .. import verdicts

    out, rows = {}, []
    for kind in kinds:
        ap, lrs = planted_control(kind, ("softmax", "sigmoid+affine"), seeds, tau, cfg,
                                  lr_candidates, noise=noise, world_seed=seed)
        out[kind] = verdicts.compare(ap["softmax"], ap["sigmoid+affine"],
                                     claim=f"planted world '{kind}'",
                                     arms=("softmax (paper)", "sigmoid+affine"),
                                     unit="categories", seed=seed)
        rows += [{"hyperparameter": f"lr (planted '{kind}', {sc})", "candidates": str(lr_candidates),
                  "chosen": lr, "criterion": f"best validation mAP on p, seed {seeds[0]}",
                  "split": "the planted world's validation split"} for sc, lr in lrs.items()]
    return out, rows


def init_gradients(make: Callable, scorings: tuple[str, ...], dense: torch.Tensor,
                   pooled: torch.Tensor, targets: np.ndarray, seed: int, cfg: FitConfig
                   ) -> pd.DataFrame:
    """Mean |dL/ds| on known positives, known negatives and unknown entries of one batch
    (the first cfg.batch_size images of dense/pooled/targets), for the full head at its
    initialisation under each scoring rule (controls calibrated on all given images)."""
    from ..losses.asymmetric import score_gradients

    n, rows = min(cfg.batch_size, len(dense)), {}
    for scoring in scorings:
        head = make("full", scoring, seed)
        head.calibrate(dense, pooled)
        with torch.no_grad():
            s = head(dense[:n], pooled[:n]).scores  # (n, C)
        rows[scoring] = score_gradients(s, targets[:n], scoring, cfg.gamma_pos, cfg.gamma_neg,
                                        cfg.clip)
    return pd.DataFrame(rows).T.rename_axis("mean |dL/ds| per entry")


def partial_label_draws(labels: np.ndarray, proportions: list[float], seeds: list[int],
                        out_dir) -> tuple[dict, dict]:
    """Each training seed's nested known-label masks (``fgclip.partial_labels.known_masks``),
    saved as ``out_dir/known_masks_seed<seed>.npz``, and the targets in {1, 0, -1} they make:
    masks[seed][ρ] (N, C) boolean, targets[(seed, ρ)] (N, C)."""
    from ..partial_labels import save_masks

    masks = {sd: known_masks(labels.shape, proportions, sd) for sd in seeds}
    for sd in seeds:
        save_masks(Path(out_dir) / f"known_masks_seed{sd}.npz", masks[sd], sd)
    targets = {(sd, r): partial_targets(labels, m) for sd in seeds for r, m in masks[sd].items()}
    return masks, targets


def scoring_verdicts(ap: dict, proportions: list[float], seed: int,
                     controls: tuple[Arm, ...] = (FULL_BIAS, FULL_AFFINE)) -> dict:
    """The falsification's test: at each proportion, the paper's softmax (:data:`FULL`)
    against each calibrated sigmoid, judged on per-category test AP of log p over seeds x
    categories (``fgclip.verdicts.compare``); keyed by (control Arm, ρ)."""
    from .. import verdicts

    return {(ctrl, rho): verdicts.compare(
        ap[FULL, rho, "p"], ap[ctrl, rho, "p"],
        claim=f"scoring rule of the full model, {rho:.0%} known (mAP on p)",
        arms=("softmax (paper)", ctrl.scoring), unit="categories", seed=seed)
        for rho in proportions for ctrl in controls}


def summary_verdicts(ap: dict, proportions: list[float], seed: int) -> list:
    """The full model (:data:`FULL`) against each baseline and ablation on per-category AP of
    log p averaged over the proportions, and the full model ranked by p against by s."""
    from .. import verdicts

    avg = lambda arm, kind="p": np.mean([ap[arm, r, kind] for r in proportions], axis=0)  # noqa: E731
    out = [verdicts.compare(avg(FULL), avg(b), claim=f"average over {len(proportions)} proportions, mAP on p",
                            arms=("full (paper)", b.name), unit="categories", seed=seed)
           for b in (ZERO_SHOT, UNTRAINED, LOGISTIC, DECOUPLING_ONLY, PROMPTS_ONLY)]
    out.append(verdicts.compare(avg(FULL, "p"), avg(FULL, "s"), claim="full model, ranked by p or by s",
                                arms=("p (Eq. 9)", "s"), unit="categories", seed=seed))
    return out
