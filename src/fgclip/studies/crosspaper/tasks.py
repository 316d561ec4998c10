"""Chapter 5's four tasks, each read off one method-independent output.

Every method of chapters 1-4 is turned by :mod:`fgclip.studies.crosspaper.adapters` into one
of three common outputs, and each task reads one of them with the metric its chapter used:

=============  ===========  ==========================================================  ===============
task           output       reading                                                     unit
=============  ===========  ==========================================================  ===============
pointing       NameMaps     p = argmax of the name's map; hit = 1[p in a box of name]   (image, name)
misalignment   WordScores   hat j = argmin_j score_j; LA = mean 1[hat j = j*]           caption
presence       NameScores   AP_c of the images ranked by scores[:, c] (known labels)    category
retrieval      NameScores   AP@K_c of the images ranked by scores[:, c]                 category
=============  ===========  ==========================================================  ===============

Each result keeps its units (trial hits with their image, per-caption correctness, AP per
category), so a bootstrap can resample them by image or by category.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...metrics.misalignment import localization_accuracy, most_negative
from ...metrics.multilabel import per_class_ap
from ...metrics.object_retrieval import average_precision_at_k
from ...metrics.pointing import box_coverage, pointing_hit
from ..maximage.heads import rule_of

Box = tuple[float, float, float, float]
Point = tuple[float, float]


def _numpy(x, name: str) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().double().numpy()
    x = np.asarray(x, dtype=np.float64)
    if np.isnan(x).any():
        raise ValueError(f"{name} contains NaN")
    return x


@dataclass(frozen=True, eq=False)
class NameMaps:
    """One image's maps, one per queried name, on the image's grid: ``maps[k]`` (h, w) is
    the map of ``names[k]``; higher = more likely the name is there."""

    names: tuple[str, ...]
    maps: np.ndarray  # (K, h, w) float64

    def __post_init__(self) -> None:
        maps, names = _numpy(self.maps, "NameMaps.maps"), tuple(self.names)
        if maps.ndim != 3 or 0 in maps.shape or not np.isfinite(maps).all():
            raise ValueError(f"NameMaps.maps must be a non-empty, finite (K, h, w), got shape {maps.shape}")
        if len(names) != len(maps) or len(set(names)) != len(names):
            raise ValueError(f"NameMaps.names must be {len(maps)} distinct names, got {names}")
        object.__setattr__(self, "maps", maps)
        object.__setattr__(self, "names", names)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.maps[self.names.index(name)]


@dataclass(frozen=True, eq=False)
class WordScores:
    """One caption: a score per word, lower = more likely the wrong word; +inf where the
    method has no opinion on a word (it is never picked)."""

    words: tuple[str, ...]
    scores: np.ndarray  # (n_words,) float64

    def __post_init__(self) -> None:
        scores, words = _numpy(self.scores, "WordScores.scores"), tuple(self.words)
        if scores.ndim != 1 or len(scores) != len(words) or len(words) == 0:
            raise ValueError(f"WordScores.scores must be (n_words,) = ({len(words)},) and non-empty, "
                             f"got shape {scores.shape}")
        if not (scores < np.inf).any():
            raise ValueError(f"WordScores.scores: no word of {words} has a finite score")
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "words", words)


@dataclass(frozen=True, eq=False)
class NameScores:
    """Scores of C names in N images, higher = the name more likely in the image."""

    names: tuple[str, ...]
    scores: np.ndarray  # (N, C) float64

    def __post_init__(self) -> None:
        scores, names = _numpy(self.scores, "NameScores.scores"), tuple(self.names)
        if scores.ndim != 2 or 0 in scores.shape or not np.isfinite(scores).all():
            raise ValueError(f"NameScores.scores must be a non-empty, finite (N, C), got shape {scores.shape}")
        if len(names) != scores.shape[1] or len(set(names)) != len(names):
            raise ValueError(f"NameScores.names must be {scores.shape[1]} distinct names, got {names}")
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "names", names)

    def select(self, names: Sequence[str]) -> "NameScores":
        """The columns of ``names``, in that order (to align with a label matrix)."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise ValueError(f"NameScores.select: no scores for names {missing}")
        return NameScores(tuple(names), self.scores[:, [self.names.index(n) for n in names]])


# ------------------------------------------------------------------------------ pointing
@dataclass(frozen=True, eq=False)
class PointingTrials:
    """One trial per (image, queried name): its image (the bootstrap's cluster), name, hit."""

    image: np.ndarray  # (T,) int
    name: tuple[str, ...]  # (T,)
    hit: np.ndarray  # (T,) float 0/1
    n_skipped: int = 0  # trials whose boxes cover less than min_box_area

    @property
    def accuracy(self) -> float:
        """(1/T) sum_k hit_k."""
        return float(self.hit.mean())

    def per_name(self) -> dict[str, float]:
        """Accuracy per name, (hits of name) / (trials of name): TorchRay's per-class figure."""
        names = np.array(self.name)
        return {n: float(self.hit[names == n].mean()) for n in dict.fromkeys(self.name)}


def map_points(maps: NameMaps, image_hw: tuple[int, int], rule: str = "resized") -> dict[str, Point]:
    """p_c = the pointing rule's point of each name's map on an image of size (H, W):
    "resized" (MultiGrounding, chapter 1: the argmax pixel of the bilinearly resized map,
    :func:`fgclip.metrics.pointing.resized_argmax_point`) or "cell-centre" (the centre of the
    argmax cell, :func:`fgclip.metrics.pointing.argmax_point`)."""
    read = rule_of(rule)[0]  # chapter 1's rules (fgclip.studies.maximage.heads.POINT_RULES)
    return {n: read(m, image_hw) for n, m in zip(maps.names, maps.maps)}


def pointing(points: Sequence[Mapping[str, Point]], boxes: Sequence[Mapping[str, Sequence[Box]]],
             image_hws: Sequence[tuple[int, int]], inclusive: bool = True, tolerance: float = 0.0,
             min_box_area: float = 0.0) -> PointingTrials:
    """hit_{i,c} = 1[p_{i,c} lies in (or within ``tolerance`` px of) a box of name c in image i]
    (:func:`fgclip.metrics.pointing.pointing_hit`), one trial per name of ``points[i]``.

    boxes[i][c]: the boxes of name c in image i; trials whose boxes cover less than
    ``min_box_area`` of the image are skipped (chapter 1's filter). ``inclusive`` closes the
    far box edges (MultiGrounding's rule, with the "resized" points).
    """
    if not len(points) == len(boxes) == len(image_hws) or len(points) == 0:
        raise ValueError(f"points, boxes and image_hws need one entry per image, got "
                         f"{len(points)}, {len(boxes)} and {len(image_hws)}")
    image, name, hit, skipped = [], [], [], 0
    for i, (pts, bxs, hw) in enumerate(zip(points, boxes, image_hws)):
        for c, p in pts.items():
            if c not in bxs:
                raise ValueError(f"boxes[{i}] has no boxes for the queried name {c!r}")
            if box_coverage(bxs[c], hw) < min_box_area:
                skipped += 1
                continue
            image.append(i)
            name.append(c)
            hit.append(float(pointing_hit(p, bxs[c], hw, tolerance, inclusive)))
    if not hit:
        raise ValueError(f"no pointing trial left (queried names empty, or all {skipped} skipped)")
    return PointingTrials(np.array(image), tuple(name), np.array(hit), skipped)


def point_at_names(maps: Sequence[NameMaps], boxes: Sequence[Mapping[str, Sequence[Box]]],
                   image_hws: Sequence[tuple[int, int]], rule: str = "resized",
                   tolerance: float = 0.0, min_box_area: float = 0.0) -> PointingTrials:
    """The pointing task on maps: :func:`pointing` of :func:`map_points`, box edges closed
    for the "resized" rule and half-open for "cell-centre" (with tolerance 15: TorchRay's
    :func:`fgclip.metrics.pointing.class_pointing`)."""
    if len(maps) != len(image_hws):
        raise ValueError(f"maps has {len(maps)} images but image_hws {len(image_hws)}")
    points = [map_points(m, hw, rule) for m, hw in zip(maps, image_hws)]
    return pointing(points, boxes, image_hws, rule_of(rule)[1], tolerance, min_box_area)


# -------------------------------------------------------------------------- misalignment
@dataclass(frozen=True, eq=False)
class Localization:
    """One foil caption per row: the picked word, the wrong word, whether the pick was a tie."""

    predicted: np.ndarray  # (N,) int
    target: np.ndarray  # (N,) int
    tied: np.ndarray  # (N,) bool

    @property
    def correct(self) -> np.ndarray:
        """(N,) float: 1[hat j_i = j*_i], the units of LA."""
        return (self.predicted == self.target).astype(float)

    @property
    def accuracy(self) -> float:
        """LA = (1/N) sum_i 1[hat j_i = j*_i] (:func:`fgclip.metrics.misalignment.localization_accuracy`)."""
        return localization_accuracy(self.predicted, self.target)


def find_wrong_word(scores: Sequence[WordScores], target: Sequence[int],
                    rng: np.random.Generator | None = None) -> Localization:
    """hat j_i = argmin_j score_{i,j} per caption; ties go to the first word, or with ``rng``
    to a uniformly drawn one (:func:`fgclip.metrics.misalignment.most_negative`).
    target[i]: the index of caption i's wrong word among ``scores[i].words``."""
    target = np.asarray(target, dtype=int)
    if len(scores) == 0 or target.shape != (len(scores),):
        raise ValueError(f"target must hold one index per caption ({len(scores)}, non-empty), "
                         f"got shape {target.shape}")
    bad = [i for i, (s, t) in enumerate(zip(scores, target)) if not 0 <= t < len(s.words)]
    if bad:
        raise ValueError(f"target indices outside their caption's words at captions {bad}")
    picks = []
    for s in scores:
        n_min = int((s.scores == s.scores.min()).sum())
        picks.append((int(np.argmin(s.scores)), n_min > 1) if rng is None else most_negative(s.scores, rng))
    predicted, tied = (np.array(x) for x in zip(*picks))
    return Localization(predicted.astype(int), target, tied.astype(bool))


# ---------------------------------------------------------------- presence and retrieval
@dataclass(frozen=True, eq=False)
class CategoryAP:
    """AP per name (NaN where the name has no positive image): the units of (m)AP."""

    names: tuple[str, ...]
    ap: np.ndarray  # (C,) float64

    @property
    def mean(self) -> float:
        """mAP = mean of AP_c over the names with at least one positive (for presence, the
        macro mAP of :func:`fgclip.metrics.multilabel.mean_average_precision` on those names)."""
        return float(np.nanmean(self.ap))


def _labels(labels, scores: NameScores, name: str) -> np.ndarray:
    labels = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
    if labels.shape != scores.scores.shape:
        raise ValueError(f"{name} must be (N, C) = {scores.scores.shape} like the scores, got {labels.shape}")
    return labels.astype(int)


def presence(scores: NameScores, targets) -> CategoryAP:
    """Is the category in the image: AP_c = sum_n (R_n - R_{n-1}) P_n over the images ranked
    by scores[:, c] (:func:`fgclip.metrics.multilabel.per_class_ap`); targets (N, C) in
    {1, 0, -1}, -1 (unknown) ignored. Names without a known positive get NaN."""
    t = _labels(targets, scores, "targets")
    has_pos = (t == 1).any(axis=0)
    if has_pos.sum() < 2:
        raise ValueError(f"targets: presence needs at least 2 names with a known positive, got {int(has_pos.sum())}")
    ap = np.full(len(scores.names), np.nan)
    ap[has_pos] = per_class_ap(scores.scores[:, has_pos], t[:, has_pos])
    return CategoryAP(scores.names, ap)


def retrieval(scores: NameScores, relevant, k: int | None = 50, normalise: str = "hits") -> CategoryAP:
    """Retrieve images by name: AP@K_c = (1/R) sum_j j / r_j over the relevant images at ranks
    r_1 < ... < r_R <= K of the images ranked by scores[:, c], ties by image order
    (:func:`fgclip.metrics.object_retrieval.average_precision_at_k`); relevant (N, C) bool.
    Names without a relevant image get NaN."""
    rel = _labels(relevant, scores, "relevant").astype(bool)
    if not rel.any():
        raise ValueError("relevant: no name has a relevant image")
    ap = average_precision_at_k(torch.from_numpy(scores.scores.T.copy()), torch.from_numpy(rel.T.copy()),
                                k, normalise).double().numpy()
    return CategoryAP(scores.names, np.where(rel.any(axis=0), ap, np.nan))
