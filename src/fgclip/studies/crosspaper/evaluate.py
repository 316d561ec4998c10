"""Chapter 5's table: every arm (four methods, the references) scored on every task, unit by unit.

An arm's score on a task is an (S, U) array: seed s, unit u, the units of the task's metric
(:mod:`fgclip.studies.crosspaper.tasks`), the same units in every arm so that any two arms pair:

=============  ==================================================  ===========  ============
task           unit u                                              value        cluster
=============  ==================================================  ===========  ============
pointing       (test image, name of an object in it)               hit (0/1)    the image
misalignment   FOIL caption whose replaced word names a category   1[hat j=j*]  the image
presence       drawable category                                   AP_c         (itself)
retrieval      drawable category                                   AP@50_c      (itself)
=============  ==================================================  ===========  ============

Misalignment keeps only the FOIL captions whose replaced word names a category (the toy world's
shape foils): chapter 4's head has a score for category words only, so on a colour, relation or
count foil it could never pick the wrong word, and a cell built on those would measure the
adapter, not the method. The captions dropped are counted (``Bench.n_foils_dropped``), in every
arm alike; chapter 2 measures CLIP4DM on every foil type.
A reference that draws nothing (CLIP's own readings, the centre, the object pointer's exact
expectation, the random content word's expected hit, the linear probe fitted by L-BFGS) has
the same row for every seed; Cluster-CLIP's k-means is seeded by the seed.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...evaluation import encode_texts
from ...methods.clip4dm import leave_one_word_out
from ...methods.cluster_clip import cluster_clip_embeddings
from ...metrics.misalignment import normalise_word
from ...metrics.pointing import pointing_hit
from ...train.probe import ProbeFit, fit_probe
from ..clip4dm.units import STOPWORDS
from ..for_retrieval.head import embed
from ..maximage.data import word_features
from . import adapters as ad
from .data import FoilItem, SharedFeatures, SharedSplit, name_embeddings
from .tasks import (CategoryAP, NameScores, WordScores, find_wrong_word, point_at_names, pointing, presence,
                    retrieval)
from .train import MethodRun, Stage, name_words

OWN_TASK = {"maximage": "pointing", "clip4dm": "misalignment", "sumclip": "retrieval", "decoupling": "presence"}
UNITS = {"pointing": ("(image, name) trials", "images"), "misalignment": ("FOIL captions", "images"),
         "presence": ("categories", "categories"), "retrieval": ("categories", "categories")}
PROBE_L2S = (1e-3, 1e-2, 1e-1, 1.0)  # wider than fit_probe's default: on 320 images its largest lambda won


@dataclass(frozen=True, eq=False)
class Bench:
    """The test side every arm is scored on: the split, its frozen features, the names' texts
    ("a {name}"), the names queried per image (every category with a box there) and the FOIL
    captions kept (those whose replaced word names a category)."""

    test: SharedSplit
    feats: SharedFeatures
    name_text: torch.Tensor  # (C, D)
    queried: tuple[tuple[str, ...], ...]  # (N,) names with a box in image i
    foils: tuple[FoilItem, ...]  # the FOIL captions whose replaced word names a category
    n_foils_dropped: int

    @property
    def categories(self) -> list[str]:
        return list(self.test.categories)

    def clusters(self, task: str) -> np.ndarray | None:
        """The cluster label of each unit of ``task`` (its image), None where units stand alone."""
        if task == "pointing":
            return np.array([i for i, ns in enumerate(self.queried) for _ in ns])
        if task == "misalignment":
            return np.array([f.image for f in self.foils])
        return None


def make_bench(clip, test: SharedSplit, feats: SharedFeatures, prompt: str = "a {}") -> Bench:
    """:class:`Bench` of a test split; fails when an image has no object to point at."""
    queried = tuple(tuple(b) for b in test.boxes)
    empty = [test.image_ids[i] for i, q in enumerate(queried) if not q]
    if empty:
        raise ValueError(f"test split {test.split!r} of {test.root}: images {empty[:5]} have no object box, "
                         f"so no pointing trial")
    kept = tuple(f for f in test.foils if f.categories[f.word_index] is not None)
    if not kept:
        raise ValueError(f"test split {test.root}: no FOIL caption replaces a category's name")
    return Bench(test, feats, name_embeddings(clip, test.categories, prompt), queried, kept,
                 len(test.foils) - len(kept))


# ----------------------------------------------------------------------- task readings
def score_pointing(maps: Sequence, bench: Bench) -> np.ndarray:
    """(T,) hits of maps, one NameMaps per image over its queried names (trial order: image, name)."""
    for m, q in zip(maps, bench.queried):
        if m.names != q:
            raise ValueError(f"maps name {m.names}, the bench queries {q}")
    return point_at_names(maps, bench.test.boxes, bench.test.hws).hit


def score_words(words: Sequence[WordScores], bench: Bench, seed: int) -> np.ndarray:
    """(F,) 1[hat j = j*] per kept caption, ties broken by a generator seeded with ``seed``."""
    return find_wrong_word(words, [f.word_index for f in bench.foils], np.random.default_rng(seed)).correct


def task_ap(scores: NameScores, labels: np.ndarray, task: str) -> CategoryAP:
    """AP_c (presence) or AP@50_c (retrieval) of (N, C) scores against (N, C) 0/1 labels."""
    return presence(scores, labels) if task == "presence" else retrieval(scores, labels.astype(bool))


def score_names(scores: NameScores, bench: Bench, task: str) -> np.ndarray:
    """(C,) AP_c (presence) or AP@50_c (retrieval) in the bench's category order."""
    return task_ap(scores.select(bench.categories), bench.test.labels, task).ap


# ------------------------------------------------------------------------------ methods
def text_inputs(method: str, clip, bench: Bench) -> dict[str, object]:
    """The frozen text features a method's adapters read, the same for every seed: MaxImage's
    word features of the names and of the kept captions, SUM-CLIP's embedding of each word alone."""
    if method == "maximage":
        return {"names": name_words(clip, bench.categories),
                "captions": word_features(clip, [list(f.words) for f in bench.foils], "contextual", ragged=True)}
    if method == "sumclip":
        return {"words": word_texts(clip, bench.foils)}
    return {}


def _method_outputs(run: MethodRun, k: int, clip, bench: Bench, text: Mapping[str, object] | None = None
                    ) -> dict[str, object]:
    """Seed k's native outputs read through the adapters: maps per image, words per caption, name
    scores. ``text``: :func:`text_inputs` of the method (computed here when not given)."""
    m, cats, feats, foils = run.modules[k], bench.categories, bench.feats, bench.foils
    text = text_inputs(run.method, clip, bench) if text is None else text
    if run.method == "maximage":
        img = run.context.test.img  # (N, Di, h, w) chapter 1's own frozen features of the test images
        ids = [int(Path(p).stem) for p in run.context.test.corpus.image_paths]
        if ids != list(bench.test.image_ids):
            raise ValueError(f"MaxImage's test images (first ids {ids[:3]}) are not the bench's "
                             f"({list(bench.test.image_ids[:3])}): train it with n_test = {len(bench.test)}")
        words, bank = text["names"], text["captions"]
        scores = ad.maximage_name_scores(m, img, words)
        with torch.no_grad():
            v = m.image_vectors(img)  # (N, E, h, w), once for every map and caption of the seed
        return {"pointing": [ad.maximage_name_maps(m, img[i], {n: words[n] for n in q}, vectors=v[i])
                             for i, q in enumerate(bench.queried)],
                "misalignment": [ad.maximage_word_scores(m, img[f.image], bank.caption(j), f.words, vectors=v[f.image])
                                 for j, f in enumerate(foils)],
                "presence": scores, "retrieval": scores}
    if run.method == "decoupling":
        with torch.no_grad():
            out = m(feats.dense, feats.pooled)
        return {"pointing": [ad.decoupling_name_maps(out, i, cats, q) for i, q in enumerate(bench.queried)],
                "misalignment": [ad.decoupling_word_scores(out, f.image, cats, f.words,
                                                           {w: c for w, c in zip(f.words, f.categories) if c})
                                 for f in foils],
                "presence": ad.decoupling_presence_scores(out, cats, m.scoring),
                "retrieval": ad.decoupling_retrieval_scores(out, cats)}
    if run.method == "sumclip":
        with torch.no_grad():
            emb, attn = embed(m, feats.memory(clip))  # (N, Q, D), (N, Q, 1 + h w)
        words = text["words"]
        scores = ad.sumclip_name_scores(emb, bench.name_text, cats)
        return {"pointing": [ad.sumclip_name_maps(emb[i], attn[i], bench.name_text[[cats.index(n) for n in q]], q,
                                                  feats.grid) for i, q in enumerate(bench.queried)],
                "misalignment": [ad.sumclip_word_scores(emb[f.image], torch.stack([words[w] for w in f.words]), f.words)
                                 for f in foils],
                "presence": scores, "retrieval": scores}
    if run.method == "clip4dm":
        at = {id(f): j for j, f in enumerate(bench.test.foils)}  # the kept items are the split's own objects
        words = ad.clip4dm_word_scores(m.attributions, m.captions)  # every test FOIL caption
        return {"pointing": ad.clip4dm_image_maps(m.relevance, list(m.names), bench.queried, feats.grid),
                "misalignment": [words[at[id(f)]] for f in foils]}  # presence: '-' (NOT_APPLICABLE)
    raise ValueError(f"run.method must be one of {ad.METHODS}, got {run.method!r}")


def word_texts(clip, foils: Sequence[FoilItem]) -> dict[str, torch.Tensor]:
    """word -> (D,) the text embedding of the word alone, for every word of the captions."""
    vocab = sorted({w for f in foils for w in f.words})
    return dict(zip(vocab, encode_texts(clip, vocab).cpu()))


def method_scores(run: MethodRun, clip, bench: Bench) -> dict[str, np.ndarray]:
    """task -> (S, U) scores of one method over its seeds, for every task it can be asked here."""
    rows: dict[str, list[np.ndarray]] = {}
    text = text_inputs(run.method, clip, bench)
    for k, seed in enumerate(run.seeds):
        out = _method_outputs(run, k, clip, bench, text)
        for task, value in out.items():
            if task == "pointing":
                rows.setdefault(task, []).append(score_pointing(value, bench))
            elif task == "misalignment":
                rows.setdefault(task, []).append(score_words(value, bench, seed))
            else:
                rows.setdefault(task, []).append(score_names(value, bench, task))
    return {t: np.stack(v) for t, v in rows.items()}


def cell_reason(method: str, task: str) -> str | None:
    """Why a cell stays '-' (the method cannot be asked it); None if it is filled."""
    return ad.NOT_APPLICABLE.get((method, task))


# --------------------------------------------------------------------------- references
def object_pointer_hits(bench: Bench) -> np.ndarray:
    """(T,) E[hit] of a pointer at the centre of a uniformly drawn object of the image (any
    category): (1/|O_i|) sum_o hit(centre(o), B_{i,c}) per trial (chapter 1's eq-object-pointer)."""
    out = []
    for boxes, hw, q in zip(bench.test.boxes, bench.test.hws, bench.queried):
        centres = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for bs in boxes.values() for b in bs]
        out += [np.mean([pointing_hit(p, boxes[c], hw, inclusive=True) for p in centres]) for c in q]
    return np.array(out, dtype=float)


def random_word_hits(bench: Bench) -> np.ndarray:
    """(F,) E[1[hat j = j*]] of a uniformly drawn content word (stop words out):
    1[j* is content] / |content| (chapter 2's random content word)."""
    out = []
    for f in bench.foils:
        content = np.array([normalise_word(w) not in STOPWORDS for w in f.words])
        content = content if content.any() else np.ones_like(content)
        out.append(float(content[f.word_index]) / content.sum())
    return np.array(out)


def category_word_scores(scores: NameScores, bench: Bench) -> list[WordScores]:
    """A training-free reading of misalignment with decoupling's candidate set: score_j = S_{i,c(j)}
    (an image-name score, e.g. CLIP dense max) for each word j naming a category c(j), +inf for
    every other word, so the wrong word is the named category the image scores lowest."""
    col = {c: k for k, c in enumerate(scores.names)}
    return [WordScores(f.words, [scores.scores[f.image, col[c]] if c else np.inf for c in f.categories])
            for f in bench.foils]


def random_category_word_hits(bench: Bench) -> np.ndarray:
    """(F,) E[hit] of a uniformly drawn word among those naming a category: 1 / |category words|
    (the kept foils' wrong word always names one)."""
    return np.array([1.0 / sum(c is not None for c in f.categories) for f in bench.foils])


READINGS = {"presence": ("zero-shot", "CLIP dense max", "Cluster-CLIP"),
            "retrieval": ("CLIP global", "CLIP dense max", "Cluster-CLIP")}  # the frozen CLIP's training-free readings
READING_SCORES = {"zero-shot": "global", "CLIP global": "global"}  # arm -> its scores in _name_readings (else its own name)


def _name_readings(feats: SharedFeatures, name_text: torch.Tensor, cats: Sequence[str], cluster_k: int, seed: int
                   ) -> dict[str, NameScores]:
    """The frozen CLIP's training-free (image, name) scores: global cosine, dense max, Cluster-CLIP."""
    glob = ad.global_scores(feats.pooled, name_text, cats)
    return {"global": glob, "CLIP dense max": ad.dense_max_scores(feats.dense, name_text, cats),
            "Cluster-CLIP": ad.sumclip_name_scores(cluster_clip_embeddings(feats.dense, feats.pooled, cluster_k, seed),
                                                   name_text, cats)}


def choose_readings(stage: Stage, name_text: torch.Tensor, cluster_k: int, seed: int) -> dict[str, dict]:
    """For presence and retrieval, the frozen CLIP's reading to compare every method with: the best of
    READINGS by the task's metric on the stage's VALIDATION images (never the test split).
    Returns task -> {"chosen": arm, "validation": arm -> mAP or mean AP@50}."""
    val = stage.val_idx
    feats = SharedFeatures(stage.feats.dense[val], stage.feats.pooled[val], stage.feats.feature_map[val],
                           stage.feats.path)
    cats, labels = list(stage.train.categories), stage.train.labels[val]
    scores = _name_readings(feats, name_text, cats, cluster_k, seed)
    out = {}
    for task, arms in READINGS.items():
        metric = {a: task_ap(scores[READING_SCORES.get(a, a)], labels, task).mean for a in arms}
        out[task] = {"chosen": max(arms, key=lambda a: (metric[a], -arms.index(a))), "validation": metric}
    return out


def reference_scores(clip, stage: Stage, bench: Bench, seeds: Sequence[int], cluster_k: int,
                     device: str = "cpu") -> tuple[dict[str, dict[str, np.ndarray]], ProbeFit]:
    """arm -> task -> (S, U): the references of issue 36's table on the bench.

    pointing: CLIP dense similarity cos(v_{r,q}, t_c), the centre, the object pointer;
    misalignment: leave-one-word-out s(T) - s(T without j), the random content word;
    presence and retrieval: the frozen CLIP's readings (zero-shot / CLIP global cos(f(I), t_c),
    CLIP dense max, Cluster-CLIP's k-means regions at SUM-CLIP's chosen k, seeded by the seed)
    and a linear probe (eq-probe) on the pooled features of the stage's fit images, lambda
    chosen on its validation images. Returns the scores and the probe's selection record."""
    S, feats, cats, test = len(seeds), bench.feats, bench.categories, bench.test
    rep = lambda x: np.repeat(np.asarray(x, float)[None], S, axis=0)  # noqa: E731 (U,) -> (S, U)
    dense = [ad.dense_similarity_maps(feats.dense[i], bench.name_text[[cats.index(n) for n in q]], q)
             for i, q in enumerate(bench.queried)]
    centre = pointing([ad.centre_points(q, hw) for q, hw in zip(bench.queried, test.hws)], test.boxes, test.hws)
    captions = [f.foil for f in bench.foils]
    loo = leave_one_word_out(clip, feats.pooled, captions, device=device, image_index=[f.image for f in bench.foils])
    fit, val = stage.fit_idx, stage.val_idx
    y = torch.as_tensor(stage.train.labels, dtype=torch.float32)
    probe, probe_fit = fit_probe(stage.feats.pooled[fit], y[fit], stage.feats.pooled[val], y[val], "linear probe",
                                 l2s=PROBE_L2S)
    with torch.no_grad():
        probe_scores = NameScores(tuple(cats), probe(feats.pooled.float()))
    readings = [_name_readings(feats, bench.name_text, cats, cluster_k, s) for s in seeds]  # Cluster-CLIP per seed
    both = lambda x: {t: x(t) for t in ("presence", "retrieval")}  # noqa: E731
    out = {
        "CLIP dense similarity": {"pointing": rep(score_pointing(dense, bench))},
        "centre": {"pointing": rep(centre.hit)},
        "object pointer": {"pointing": rep(object_pointer_hits(bench))},
        "leave-one-word-out": {"misalignment": np.stack([score_words(ad.clip4dm_word_scores(loo, captions), bench, s)
                                                         for s in seeds])},
        "random content word": {"misalignment": rep(random_word_hits(bench))},
        "CLIP dense max, category words": {"misalignment": np.stack([score_words(category_word_scores(
            readings[0]["CLIP dense max"], bench), bench, s) for s in seeds])},
        "random category word": {"misalignment": rep(random_category_word_hits(bench))},
        "zero-shot": {"presence": rep(score_names(readings[0]["global"], bench, "presence"))},
        "CLIP global": {"retrieval": rep(score_names(readings[0]["global"], bench, "retrieval"))},
        "CLIP dense max": both(lambda t: rep(score_names(readings[0]["CLIP dense max"], bench, t))),
        "Cluster-CLIP": both(lambda t: np.stack([score_names(r["Cluster-CLIP"], bench, t) for r in readings])),
        "linear probe": both(lambda t: rep(score_names(probe_scores, bench, t))),
    }
    return out, probe_fit


def figure_picks(bench: Bench, n: int = 4) -> list[tuple[int, str]]:
    """The four-images figure's (image, name) pairs: the first ``n`` test images with objects of
    at least two categories (a map must choose), each with its first queried name."""
    picks = [(i, q[0]) for i, q in enumerate(bench.queried) if len(q) >= 2][:n]
    if len(picks) < n:
        raise ValueError(f"the test split has {len(picks)} images with two categories, the figure needs {n}")
    return picks


def example_maps(runs: Mapping[str, MethodRun], clip, bench: Bench, picks: Sequence[tuple[int, str]]
                 ) -> dict[str, list[np.ndarray | None]]:
    """arm -> the (h, w) map of each picked (image, name): every method's first seed through its
    pointing adapter, CLIP dense similarity beside them; None where the cell is '-'."""
    out: dict[str, list[np.ndarray | None]] = {}
    for method, run in runs.items():
        if cell_reason(method, "pointing"):
            out[method] = [None] * len(picks)
            continue
        maps = _method_outputs(run, 0, clip, bench)["pointing"]
        out[method] = [maps[i][name] for i, name in picks]
    cats = bench.categories
    out["CLIP dense similarity"] = [ad.dense_similarity_maps(bench.feats.dense[i], bench.name_text[[cats.index(c)]],
                                                             [c])[c] for i, c in picks]
    return out
