"""Chapter 4's positive control through the pipeline under test: the toy world with category
pairs that always co-occur (``ToyWorldConfig.cooccur``), exported and read like the chapter's
own data, encoded by the chapter's frozen CLIP through its feature cache, and run through the
chapter's heads, stacked training and selection protocol at one known-label proportion."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from ... import verdicts
from ...metrics.multilabel import per_class_ap
from ...partial_labels import known_masks, partial_targets
from ...toyworld import ToyWorldConfig
from .arms import FULL, FULL_AFFINE, Arm, Trainer
from .comparisons import compare_categories
from .data import DetectionData, checked_validation_split, prepare_data
from .features import Features, frozen_features
from .heads import FitConfig
from .sweep import select_and_evaluate


def cooccur_pairs(categories: list[str], seed: int) -> tuple[tuple[str, str], ...]:
    """Every category paired with another by a permutation seeded by (``seed``, 'cooccur');
    with an odd number of categories the last one of the permutation stays unpaired."""
    if len(categories) < 2:
        raise ValueError(f"cooccur_pairs needs at least 2 categories, got {len(categories)}")
    order = [categories[i] for i in np.random.default_rng([seed, 0xC0]).permutation(len(categories))]
    return tuple((order[2 * k], order[2 * k + 1]) for k in range(len(order) // 2))


def planted_sizes(planted_n: list[int], n_train: int, n_test: int) -> dict[str, int]:
    """The planted world's {"train", "test"} sizes: ``planted_n``, a 0 standing for the chapter's
    n_train / n_test; refused, naming ``planted_n``, when a size is still 0 (a real run that reads a
    whole split) or there are not two sizes."""
    if len(planted_n) != 2:
        raise ValueError(f"planted_n must hold two sizes (train, test), got {planted_n}")
    sizes = dict(zip(("train", "test"), (a or b for a, b in zip(planted_n, (n_train, n_test)))))
    if any(n <= 0 for n in sizes.values()):
        raise ValueError(f"planted_n: the planted toy world needs a positive size per split, got {sizes}; set planted_n")
    return sizes


class PlantedWorld(NamedTuple):
    """What :func:`planted_data` made: the data as read, frozen features per split, the pairs."""

    data: DetectionData
    feats: dict  # split -> Features
    pairs: tuple  # ((a, b), ...) categories that always co-occur


def planted_data(clip, cache_dir, model: str, pretrained: str, data_format: str,
                 sizes: dict[str, int], seed: int, device: str = "cpu"
                 ) -> PlantedWorld:
    """The co-occurrence world: the toy world's categories in pairs (:func:`cooccur_pairs` by
    ``seed``), ``sizes`` images per split ("train", "test"), exported like the chapter's data
    (:func:`~fgclip.studies.decoupling.data.prepare_data` with ``ToyWorldConfig(cooccur=pairs)``,
    into its own ``toy-<digest>`` folder under ``cache_dir/planted``, never next to a real dataset)
    and encoded by the frozen ``clip`` through
    :func:`~fgclip.studies.decoupling.features.frozen_features` (its cache file is keyed by that
    folder, so it never meets the main world's)."""
    pairs = cooccur_pairs(sorted(ToyWorldConfig().categories), seed)
    data = prepare_data(Path(cache_dir) / "planted", data_format, sizes, seed, world=ToyWorldConfig(cooccur=pairs),
                        size_names={s: "planted_n" for s in sizes})
    feats = frozen_features(clip, Path(cache_dir), model, pretrained, data.root, data_format,
                            {s: data.splits[s].paths for s in sizes}, device)
    return PlantedWorld(data, feats, pairs)


@dataclass
class PlantedRun:
    """What :func:`planted_control` ran: the verdict, per-category test AP per arm (seeds x C),
    each arm's selection and convergence check (or None), the split sizes and the world."""

    verdict: verdicts.Verdict
    ap: dict  # Arm -> (n_seeds, C)
    selections: dict  # Arm -> Selection
    checks: dict  # Arm -> convergence check dict or None
    sizes: dict  # fit / validation / test images
    world: PlantedWorld
    reference_labels: float | None = None  # labels per image of the chapter's own world (training split)

    def labels_per_image(self) -> float:
        """Mean number of categories present per training image of the planted world."""
        return float((self.world.data.labels["train"] == 1).sum(1).mean())

    def summary(self) -> str:
        """One line: the folder read, the pairs, labels per image and the split sizes."""
        return (f"planted world {self.world.data.root.name}: {len(self.world.pairs)} pairs that always co-occur, "
                f"{self.labels_per_image():.2f} labels per image; {self.sizes}")

    def record(self) -> dict:
        """results.json's record: the verdict, the pairs, labels per image (training split; and of
        the chapter's own world, when given), the split sizes, and each arm's mAP, selection and
        convergence check."""
        return {"verdict": self.verdict, "pairs": [list(p) for p in self.world.pairs], "images": self.sizes,
                "labels per image": self.labels_per_image(), "labels per image, chapter's world": self.reference_labels,
                "arms": {arm.name: {"mAP": float(self.ap[arm].mean()), "selection": self.selections[arm].to_dict(),
                                    "check": self.checks[arm]} for arm in self.ap}}


def planted_control(make_for: Callable, world: PlantedWorld, cfg: FitConfig, grid, rho: float, seeds: list[int],
                    val_fraction: float, seed: int, margin: float, check_epochs: int = 0,
                    arms: tuple[Arm, Arm] = (FULL, FULL_AFFINE), claim: str = "planted co-occurrence world",
                    reference_labels: float | None = None) -> PlantedRun:
    """The chapter's protocol on a planted world: each of ``arms`` (default the paper's softmax and
    sigmoid+affine) chosen by ``grid`` on the world's own validation split at ρ = ``rho``
    (:func:`~fgclip.studies.decoupling.sweep.select_and_evaluate`, stacked training, convergence
    check within ``check_epochs``), evaluated at every seed of ``seeds`` with its own known-label
    mask, and compared on per-category test AP of log p (arms[0] - arms[1]) with the chapter's
    margin. make_for(category names) -> make(variant, scoring, seed), the chapter's heads for the
    world's categories; the world's splits are "train" and "test". ``reference_labels``: labels per
    image of the chapter's own world, kept in the record beside the planted world's."""
    (train, test), data, feats = ("train", "test"), world.data, world.feats
    make = make_for(list(data.class_names))
    y = data.labels[train]
    fit_idx, val_idx = checked_validation_split(y, val_fraction, seed, [rho], seeds)
    targets = {sd: partial_targets(y, known_masks(y.shape, [rho], sd)[rho]) for sd in seeds}
    trainer = Trainer(make, feats[train].subset(fit_idx), feats[train].subset(val_idx), feats[test], cfg)
    split = lambda m: (targets[m.seed][fit_idx], targets[m.seed][val_idx])  # noqa: E731
    ap, sels, checks = {}, {}, {}
    for arm in arms:
        sels[arm], preds, _, checks[arm] = select_and_evaluate(trainer, arm, grid, rho, [rho], seeds, split,
                                                                check_epochs)
        ap[arm] = np.stack([per_class_ap(preds[rho, sd].log_p, data.labels[test]) for sd in seeds])
    v = compare_categories(ap[arms[0]], ap[arms[1]], f"{claim}, {rho:.0%} known (mAP on p)",
                           ("softmax (paper)", arms[1].scoring), seed, margin)
    return PlantedRun(v, ap, sels, checks, {"fit": len(fit_idx), "validation": len(val_idx),
                                            "test": len(data.labels[test])}, world, reference_labels)
