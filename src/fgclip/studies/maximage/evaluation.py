"""Chapter 1's evaluation protocol: per-phrase scores of the model and of every
caption-blind floor, on the same phrases, ready for :func:`fgclip.verdicts.compare`.

All arms are scored by the same pointing rule on the phrases the box-area filter keeps: by
default MultiGrounding's (``rule="resized"``: the map resized to the image, its argmax pixel,
box edges closed, :data:`~fgclip.studies.maximage.heads.POINT_RULES`), the floors' points
scored with the same closed edges. Notation: phrase k of image i(k) with boxes B_k;
O_i the distinct ground-truth boxes (objects) of image i; c(b) the centre of box b.

* object pointer (caption-blind, toy world only: it uses boxes), its exact expectation
  E_k = (1/|O_i|) sum_{o in O_i} hit(c(o), B_k);
* random point, its exact expectation E_k = area(union B_k) / (H W);
* caption-blind saliency: argmax of the image's mean map <v_{r,c}, mean_{d in D_i} t_d>,
  D_i every word of every caption of image i (one point per image, whatever the phrase).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ... import verdicts
from ...methods.maximage import MaxImageHeads
from ...metrics.pointing import AREA_RULES, box_coverage, center_point, pointing_hit, random_points
from .heads import head_word_points, map_points, phrase_points, project_images, rule_of

Point = tuple[float, float]


def evaluated(data, min_box_area: float, area_rule: str = "hull") -> np.ndarray:
    """(K,) bool: the phrases the area filter keeps (the same for every arm)."""
    c = data.corpus
    return np.array([AREA_RULES[area_rule](ph.boxes, c.image_hw[ph.image]) >= min_box_area
                     for ph in c.phrases])


def hits(points: Sequence[Point], data, keep: np.ndarray, rule: str = "resized") -> np.ndarray:
    """0/1 hit per kept phrase, box edges as the pointing ``rule`` has them: (n_kept,) float."""
    c, inclusive = data.corpus, rule_of(rule)[1]
    return np.array([float(pointing_hit(p, ph.boxes, c.image_hw[ph.image], inclusive=inclusive))
                     for p, ph, k in zip(points, c.phrases, keep) if k])


def object_pointer_expectation(data, keep: np.ndarray, rule: str = "resized") -> np.ndarray:
    """E_k = (1/|O_i|) sum_o hit(c(o), B_k) per kept phrase: the exact mean of a pointer at
    the centre of a uniformly drawn ground-truth object of the phrase's image
    (eq-object-pointer). (n_kept,)"""
    c, inclusive = data.corpus, rule_of(rule)[1]
    out = []
    for ph, k in zip(c.phrases, keep):
        if k:
            objs = c.objects[ph.image]
            if not objs:
                raise ValueError(f"image {ph.image} has no object boxes: no object pointer")
            hw = c.image_hw[ph.image]
            out.append(np.mean([pointing_hit(((o[0] + o[2]) / 2, (o[1] + o[3]) / 2), ph.boxes, hw, inclusive=inclusive)
                                for o in objs]))
    return np.array(out, dtype=float)


def random_point_expectation(data, keep: np.ndarray) -> np.ndarray:
    """E_k = area(union B_k) / (H W): a uniform random point's hit probability. (n_kept,)"""
    c = data.corpus
    return np.array([box_coverage(ph.boxes, c.image_hw[ph.image])
                     for ph, k in zip(c.phrases, keep) if k])


def object_pointer_points(data, seed: int) -> list[Point]:
    """One seeded draw of the object pointer: the centre of a random object of the image."""
    rng = np.random.default_rng(seed)
    c = data.corpus
    out = []
    for ph in c.phrases:
        o = c.objects[ph.image][rng.integers(len(c.objects[ph.image]))]
        out.append(((o[0] + o[2]) / 2, (o[1] + o[3]) / 2))
    return out


@torch.no_grad()
def saliency_points(heads: MaxImageHeads, v: torch.Tensor, data, rule: str = "resized") -> list[Point]:
    """Caption-blind saliency per phrase: the argmax of its image's mean map
    <v_{r,c}, mean_{d in D_i} t_d> (mean of all word maps of all the image's captions)."""
    c = data.corpus
    bank = data.words
    caption_of_word, rows = bank.words_in_order()  # (W,), (W,)
    t = heads.word_vectors(bank.rows)[rows]  # (W, E)
    n_img = len(c.image_hw)
    idx = torch.tensor(c.caption_image)[caption_of_word]  # (W,) the image of each word
    tsum = torch.zeros(n_img, t.shape[1]).index_add_(0, idx, t)
    cnt = torch.zeros(n_img).index_add_(0, idx, torch.ones(len(idx)))
    heat = torch.einsum("nehw,ne->nhw", v, tsum / cnt.clamp_min(1)[:, None])  # (N, h, w)
    per_image = map_points(heat, [c.image_hw[i] for i in range(n_img)], rule)
    return [per_image[ph.image] for ph in c.phrases]


def in_centre_cells(points: Sequence[Point], hws: Sequence[tuple[int, int]],
                    grid: tuple[int, int]) -> np.ndarray:
    """1[the map cell of point p touches the image centre]: the 2x2 middle cells of an even
    grid, the middle cell of an odd one. (n,) float."""
    gh, gw = grid
    out = []
    for (x, y), (h, w) in zip(points, hws):
        j, i = min(int(x * gw / w), gw - 1), min(int(y * gh / h), gh - 1)
        out.append(abs((j + 0.5) * w / gw - w / 2) <= w / (2 * gw) + 1e-9
                   and abs((i + 0.5) * h / gh - h / 2) <= h / (2 * gh) + 1e-9)
    return np.array(out, dtype=float)


def centre_points(data) -> list[Point]:
    """The centre baseline's point for every phrase."""
    return [center_point(data.corpus.image_hw[ph.image]) for ph in data.corpus.phrases]


def shuffled_caption_image(caption_image: Sequence[int], seed: int) -> list[int]:
    """Captions dealt to images at random (a seeded permutation of the caption -> image
    links; each image keeps its number of captions): nothing about where words are
    can be learned, the positive control of the grounding test."""
    perm = np.random.default_rng(seed).permutation(len(caption_image))
    return [int(caption_image[j]) for j in perm]


def selectivity_hits(points: dict[int, Point], pairs: Sequence[tuple[int, int]], corpus,
                     rule: str = "resized") -> np.ndarray:
    """Per pair (a, b) of phrases of one caption: 1[both head nouns land on their own
    objects]. (n_pairs,) float; cluster the pairs by ``corpus.phrases[a].image``."""
    out, inc = [], rule_of(rule)[1]
    for a, b in pairs:
        hw = corpus.image_hw[corpus.phrases[a].image]
        out.append(pointing_hit(points[a], corpus.phrases[a].boxes, hw, inclusive=inc)
                   and pointing_hit(points[b], corpus.phrases[b].boxes, hw, inclusive=inc))
    return np.array(out, dtype=float)


@torch.no_grad()
def model_points(heads: MaxImageHeads, data, mode: str = "vector", rule: str = "resized") -> list[Point]:
    """The heads' point for every phrase of a split (parse ``mode``, pointing ``rule``)."""
    return phrase_points(heads, project_images(heads, data.img), data.words, data.corpus, mode, rule)


def off_objects(points: Sequence[Point], data, keep: np.ndarray, rule: str = "resized") -> np.ndarray:
    """Per kept phrase 1[its point lies in none of its image's object boxes] (the map peaks on
    background), box edges as the pointing ``rule`` has them: (n_kept,) float. A miss is either
    this or a point on another object of the image."""
    c, inclusive = data.corpus, rule_of(rule)[1]
    return np.array([float(not pointing_hit(p, c.objects[ph.image], c.image_hw[ph.image], inclusive=inclusive))
                     for p, ph, k in zip(points, c.phrases, keep) if k])


def arm_points_read(heads_per_seed: Sequence[MaxImageHeads], data, keep: np.ndarray, mode: str = "vector",
                    rule: str = "resized", saliency: bool = False) -> tuple[np.ndarray, ...]:
    """(hits, off-object) of one trained arm, each (n_seeds, n_kept): :func:`hits` and
    :func:`off_objects` of every seed's points, computed once; with ``saliency``, a third:
    each seed's own caption-blind saliency hits (:func:`saliency_scores`)."""
    pts = [model_points(h, data, mode, rule) for h in heads_per_seed]
    return (np.stack([hits(p, data, keep, rule) for p in pts]),
            np.stack([off_objects(p, data, keep, rule) for p in pts]),
            *([saliency_scores(heads_per_seed, data, keep)] if saliency else []))


def grid_of(data) -> tuple[int, int]:
    """(h, w) of the frozen feature grid of a split."""
    return tuple(data.img.shape[2:])


def centre_share(points: Sequence[Point], data, keep: np.ndarray) -> np.ndarray:
    """Per kept phrase 1[its point lies in the centre cells] (:func:`in_centre_cells`)."""
    c = data.corpus
    hws = [c.image_hw[ph.image] for ph in c.phrases]
    return in_centre_cells(points, hws, grid_of(data))[keep]


def random_draw_points(data, seed: int) -> list[Point]:
    """One seeded draw of the random-point baseline, one uniform point per phrase."""
    c = data.corpus
    return random_points([c.image_hw[ph.image] for ph in c.phrases], seed)


def arm_scores(heads_per_seed: Sequence[MaxImageHeads], data, keep: np.ndarray,
               mode: str = "vector", rule: str = "resized") -> np.ndarray:
    """(n_seeds, n_kept) 0/1 hits of one trained arm under the pointing ``rule``, one row per
    seed's heads."""
    return np.stack([hits(model_points(h, data, mode, rule), data, keep, rule) for h in heads_per_seed])


def floor_scores(data, keep: np.ndarray, seeds: Sequence[int],
                 heads_per_seed: Sequence[MaxImageHeads]) -> dict[str, np.ndarray]:
    """Every caption-blind floor as (n_seeds, n_kept) scores on the kept phrases: centre
    point, object pointer and random point (exact expectations, repeated over seeds), one
    random draw per seed, and each seed's caption-blind saliency (:func:`saliency_points`)."""
    rep = lambda x: np.tile(x, (len(seeds), 1))  # noqa: E731  (deterministic arm)
    return {"centre point": rep(hits(centre_points(data), data, keep)),
            "object pointer": rep(object_pointer_expectation(data, keep)),
            "random point": rep(random_point_expectation(data, keep)),
            "random point (one draw)": np.stack([hits(random_draw_points(data, s), data, keep)
                                                 for s in seeds]),
            "caption-blind saliency": saliency_scores(heads_per_seed, data, keep)}


def saliency_scores(heads_per_seed: Sequence[MaxImageHeads], data, keep: np.ndarray) -> np.ndarray:
    """(n_seeds, n_kept) hits of each seed's caption-blind saliency (:func:`saliency_points`)."""
    return np.stack([hits(saliency_points(h, project_images(h, data.img), data), data, keep)
                     for h in heads_per_seed])


def non_centre(data, keep: np.ndarray) -> np.ndarray:
    """(n_kept,) bool: the kept phrases none of whose boxes contains the image centre, with the
    hit rule's closed box edges (so the centre point scores exactly zero on them)."""
    return ~np.array([pointing_hit(center_point(hw := data.corpus.image_hw[ph.image]), ph.boxes, hw, inclusive=True)
                      for ph, k in zip(data.corpus.phrases, keep) if k])


def kept_images(data, keep: np.ndarray) -> np.ndarray:
    """(n_kept,) image index of each kept phrase: the bootstrap's clusters."""
    return np.array([ph.image for ph, k in zip(data.corpus.phrases, keep) if k])


def bias_records(bias: float, seeds: Sequence[int], heads_per_seed: Sequence[MaxImageHeads],
                 own, own_keep: np.ndarray, zero, zero_keep: np.ndarray, mode: str):
    """The centre-bias test of models trained at ``bias``: per seed, accuracy on their own
    world's test (all and non-centre phrases) beside its centre and object-pointer floors, the
    share of its points there off every object, its own caption-blind saliency there (a floor),
    accuracy on the bias-0 test (cross-evaluation) and the share of argmaxes there in the
    centre cells. Returns (rows, hits on bias 0 (S, K0), centre share on bias 0 (S, K0),
    the points on bias 0 per seed)."""
    nc, znc = non_centre(own, own_keep), non_centre(zero, zero_keep)
    centre = hits(centre_points(own), own, own_keep).mean()
    objp = object_pointer_expectation(own, own_keep).mean()
    zpts = [model_points(h, zero, mode) for h in heads_per_seed]
    on_zero = np.stack([hits(p, zero, zero_keep) for p in zpts])
    share = np.stack([centre_share(p, zero, zero_keep) for p in zpts])
    sal = saliency_scores(heads_per_seed, own, own_keep).mean(axis=1)  # (S,) each seed's own floor
    rows = []
    for j, (s, h) in enumerate(zip(seeds, heads_per_seed)):
        pts = model_points(h, own, mode)
        acc = hits(pts, own, own_keep)
        rows.append({"train_bias": bias, "seed": s, "model": acc.mean(),
                     "off objects": off_objects(pts, own, own_keep).mean(), "caption-blind saliency": sal[j],
                     "model, non-centre": acc[nc].mean(), "centre point": centre,
                     "object pointer": objp, "model on bias-0 test": on_zero[j].mean(),
                     "… non-centre": on_zero[j][znc].mean(),
                     "centre-cell share on bias-0 test": share[j].mean()})
    return rows, on_zero, share, zpts


def choose_parse_mode(heads_per_seed: Sequence[MaxImageHeads], val, modes: Sequence[str],
                      min_box_area: float, area_rule: str) -> tuple[str, dict[str, float]]:
    """The parse mode with the highest mean pointing accuracy over the seeds' heads on the
    validation split (ties: the first of ``modes``), and every mode's accuracy."""
    if not modes:
        raise ValueError("parse_modes must name at least one mode")
    keep = evaluated(val, min_box_area, area_rule)
    acc = {m: float(np.mean([hits(model_points(h, val, m), val, keep).mean() for h in heads_per_seed]))
           for m in modes}
    return max(acc, key=acc.get), acc


def selectivity_scores(heads_per_seed: Sequence[MaxImageHeads], data,
                       pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """(n_seeds, n_pairs) token selectivity (:func:`selectivity_hits`) of each seed's heads,
    each phrase read through its head noun's map."""
    ids = sorted({k for p in pairs for k in p})
    return np.stack([selectivity_hits(head_word_points(h, project_images(h, data.img), data.words,
                                                       data.corpus, ids), pairs, data.corpus)
                     for h in heads_per_seed])


def kept_pairs(pairs: Sequence[tuple[int, int]], keep: np.ndarray) -> list[tuple[int, int]]:
    """The pairs (a, b) of phrase indices both of whose phrases the area filter keeps
    (``keep``: (K,) bool over all phrases, :func:`evaluated`)."""
    if any(max(p) >= len(keep) for p in pairs):
        raise ValueError(f"kept_pairs: a phrase index is past the {len(keep)} phrases of keep")
    return [(a, b) for a, b in pairs if keep[a] and keep[b]]


def object_pointer_pairs(data, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per pair (a, b): E_a E_b, the exact chance that the object pointer (an independent
    uniform draw of the image's objects for each phrase, :func:`object_pointer_expectation`) sends
    both phrases to their own boxes: token selectivity's caption-blind floor. (n_pairs,)"""
    if not pairs:
        return np.zeros(0)
    ids = sorted({k for p in pairs for k in p})
    mask = np.zeros(len(data.corpus.phrases), bool)
    mask[ids] = True
    e = dict(zip(ids, object_pointer_expectation(data, mask)))
    return np.array([e[a] * e[b] for a, b in pairs], dtype=float)


def pair_images(data, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """(n_pairs,) the image of each phrase pair: the bootstrap's clusters for selectivity."""
    return np.array([data.corpus.phrases[a].image for a, _ in pairs])


@dataclass(frozen=True)
class ArmJudge:
    """Verdicts between arms scored on the same kept phrases (:func:`fgclip.verdicts.compare`):
    paired seed by seed and phrase by phrase, the phrases of one image resampled together."""
    scores: Mapping[str, np.ndarray]  # arm -> (n_seeds, n_kept) per-phrase scores
    strata: Mapping[str, np.ndarray]  # stratum -> (n_kept,) bool, "all" among them
    images: np.ndarray  # (n_kept,) image of each kept phrase: the bootstrap's clusters
    seed: int
    margin: float | None = None  # the margin of practical equivalence of pointing accuracy

    def __call__(self, a: str, b: str, claim: str, on: str = "all") -> verdicts.Verdict:
        """Arm a vs arm b on the phrases of stratum ``on`` (named in the claim unless "all")."""
        m = self.strata[on]
        return self.paired(a, b, claim + ("" if on == "all" else f" ({on} phrases)"),
                           self.scores[a][:, m], self.scores[b][:, m], self.images[m])

    def paired(self, a: str, b: str, claim: str, x: np.ndarray, y: np.ndarray, clusters: np.ndarray,
               unit: str = "phrases") -> verdicts.Verdict:
        """a vs b on given (n_seeds, n_units) scores x, y whose units sit in ``clusters`` (images)."""
        return verdicts.compare(x, y, claim=claim, arms=(a, b), unit=unit, clusters=clusters,
                                cluster_unit="images", seed=self.seed, margin=self.margin)


def seed_frame(scores: Mapping[str, np.ndarray], seeds: Sequence[int],
               strata: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """One row per (arm, seed): the arm's mean score on the phrases of each stratum."""
    return pd.DataFrame([dict(arm=a, seed=s, **{k: x[j][m].mean() for k, m in strata.items()})
                         for a, x in scores.items() for j, s in enumerate(seeds)])


def batch_size_verdicts(judge: ArmJudge, bs_scores: Mapping[int, np.ndarray], bs_off: Mapping[int, np.ndarray] | None,
                        seeds: Sequence[int], bs_sal: Mapping[int, np.ndarray] | None = None
                        ) -> tuple[pd.DataFrame, list[verdicts.Verdict]]:
    """The batch-size study read out: one row per (batch size, seed) with its pointing accuracy
    (given ``bs_off``, the share of its points off every object; given ``bs_sal``, the seed's own
    caption-blind saliency, a floor), and the largest batch against the smallest, paired on the
    judge's phrases (none when fewer than two sizes ran). ``bs_scores``, ``bs_off``, ``bs_sal``:
    batch size -> (n_seeds, n_kept) hits, off-object flags, saliency hits."""
    table = pd.DataFrame([dict(batch_size=bs, negatives=bs - 1, seed=s, pointing=x[j].mean(),
                               **({"off objects": bs_off[bs][j].mean()} if bs_off else {}),
                               **({"caption-blind saliency": bs_sal[bs][j].mean()} if bs_sal else {}))
                          for bs, x in bs_scores.items() for j, s in enumerate(seeds)])
    small, large = min(bs_scores, default=0), max(bs_scores, default=0)
    return table, [judge.paired(f"B={large}", f"B={small}", f"N-Pair at an equal step budget, B={large} vs B={small}",
                                bs_scores[large], bs_scores[small], judge.images)] if small != large else []


def planted_effect_scores(arm: np.ndarray, comparator: np.ndarray, effect: float) -> np.ndarray:
    """A positive control planted into the arm under test: its own (n_seeds, n_units) scores
    moved by one constant so that their mean lies ``effect`` above the ``comparator``'s,

        P[s, k] = A[s, k] + (mean(B) + effect - mean(A)).

    P - B is the test's own difference seed by seed and unit by unit, re-centred at
    ``effect``: a true effect of known size with exactly the test's seed-to-seed and
    image-to-image noise, so the control fires when, and only when, the test can resolve an
    effect of that size. (Planting a share of hits into A instead gives an arm whose truth
    against B is A's unknown gap plus the plant: it cannot fire when A lies far below B.)"""
    a, b = np.asarray(arm, float), np.asarray(comparator, float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"planted_effect_scores: arm and comparator must be (n_seeds, n_units) of one shape, "
                         f"got {a.shape} and {b.shape}")
    if not effect > 0:
        raise ValueError(f"planted_effect_scores: effect must be > 0, got {effect}")
    return a + (np.nanmean(b) + effect - np.nanmean(a))


def grounding_falsification(judge: ArmJudge, model: str, pointer: str, planted: str, shuffled: str,
                            shuffled_saliency: str) -> verdicts.Falsification:
    """The grounding test, ``model`` against the caption-blind ``pointer`` ('A better' is the
    effect), read through its controls: the ``planted`` arm (the model's own scores with an
    effect of known size planted, :func:`planted_effect_scores`) must beat the pointer, and the ``shuffled``-caption arm, which cannot learn where words
    are, must be 'equivalent' to its own caption-blind saliency within the judge's margin."""
    return verdicts.falsify(judge(model, pointer, f"{model} vs {pointer}"),
                            judge(planted, pointer, f"{planted} vs {pointer}"),
                            judge(shuffled, shuffled_saliency, f"{shuffled} vs {shuffled_saliency}"))
