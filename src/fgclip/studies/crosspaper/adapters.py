"""Chapter 5's adapters: each method's native outputs -> the common outputs of
:mod:`fgclip.studies.crosspaper.tasks` (NameMaps, WordScores, NameScores).

Issue 36's table, by function (``ADAPTERS`` holds it, ``NOT_APPLICABLE`` the '-' cells):

============  ====================  =======================  ===================  ===========================
task          MaxImage (ch1)        CLIP4DM (ch2)            SUM-CLIP / FOR (ch3) decoupling (ch4)
============  ====================  =======================  ===================  ===========================
pointing      maximage_name_maps    clip4dm_name_maps (ext.) sumclip_name_maps    decoupling_name_maps
misalignment  maximage_word_scores  clip4dm_word_scores      sumclip_word_scores  decoupling_word_scores
presence      maximage_name_scores  - (clip4dm_name_scores)  sumclip_name_scores  decoupling_presence_scores
retrieval     maximage_name_scores  -                        sumclip_name_scores  decoupling_retrieval_scores
============  ====================  =======================  ===================  ===========================

References: :func:`dense_similarity_maps` (CLIP dense similarity), :func:`dense_max_scores`
(CLIP dense max), :func:`centre_points`
(centre), :func:`global_scores` (zero-shot, CLIP global), :func:`random_word_scores` (random
content word) and :func:`sumclip_name_scores` on Cluster-CLIP's embeddings (Cluster-CLIP).
Text embeddings (names, words) are the caller's: each chapter encodes them its own way.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ...methods.clip4dm import TEMPLATE, Attributions, clip_score
from ...methods.decoupling import HeadOutput, score_log_probabilities
from ...methods.maximage import MaxImageHeads, colocalization_volume, pair_scores, phrase_map
from ...metrics.object_retrieval import max_similarity
from ...metrics.pointing import center_point
from .tasks import NameMaps, NameScores, Point, WordScores

METHODS = ("maximage", "clip4dm", "sumclip", "decoupling")
TASKS = ("pointing", "misalignment", "presence", "retrieval")
NOT_APPLICABLE = {
    ("clip4dm", "presence"): "CLIP4DM scores the words of a caption, not an image for a name: "
                             "its only per-image score is CLIPScore of 'A photo depicts a {name}', "
                             "2.5 max(cos, 0) of CLIP's global cosine, which ranks images as zero-shot "
                             "CLIP with another prompt does: no presence method of its own",
    ("clip4dm", "retrieval"): "CLIP4DM scores the words of a caption, not an image for a name: "
                              "its only per-image score is CLIPScore of 'A photo depicts a {name}', a monotone "
                              "function of CLIP's global cosine (the CLIP-global reference's reading, "
                              "with another prompt), so it adds no retrieval method of its own",
}

# cells filled by the book's own extension of a method, not by the method as its paper defines it:
# their verdicts are reported, named as extensions, and never counted for or against the paper's claim
EXTENSIONS = {
    ("clip4dm", "pointing"): "the book's image-side extension of CLIP4DM, whose paper attributes caption words only",
}


class NotApplicable(ValueError):
    """A '-' cell: the method cannot be asked this task; the message is the reason."""


def _grid_maps(rows: torch.Tensor, grid: tuple[int, int], name: str) -> torch.Tensor:
    """(K, h*w) position rows -> (K, h, w), row-major as ``flatten(2)`` lays out a map."""
    h, w = grid
    if rows.ndim != 2 or rows.shape[1] != h * w:
        raise ValueError(f"{name}: {tuple(rows.shape)} does not hold {h}x{w} = {h * w} positions per row")
    return rows.reshape(len(rows), h, w)


def _unit(x: torch.Tensor, name: str, ndim: int) -> torch.Tensor:
    if x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(x.shape)}")
    return F.normalize(x.detach().float(), dim=-1)


def _index(categories: Sequence[str], names: Sequence[str], name: str) -> list[int]:
    missing = [n for n in names if n not in categories]
    if missing:
        raise ValueError(f"{name}: {missing} are not among the head's categories")
    return [list(categories).index(n) for n in names]


# --------------------------------------------------------------------- MaxImage (ch1)
@torch.no_grad()
def maximage_name_maps(heads: MaxImageHeads, feats: torch.Tensor, name_words: Mapping[str, torch.Tensor],
                       mode: str = "vector", vectors: torch.Tensor | None = None) -> NameMaps:
    """Pointing: name c's map M_c[r, q] = <v_{r,q}, t_c>, t_c = f_text((1/n) sum_w x_w) over the
    name's words ("vector"), or the mean of its standardised word maps ("maps"), as
    :func:`fgclip.methods.maximage.phrase_map` defines them.
    feats (Di, h, w): one image's frozen features; name_words[c] (n_c, Dt): c's word features;
    ``vectors`` (E, h, w): ``heads.image_vectors(feats[None])[0]`` when the caller has it already."""
    if feats.ndim != 3 or not name_words:
        raise ValueError(f"feats must be one image's (Di, h, w) and name_words non-empty, got {tuple(feats.shape)}")
    v = heads.image_vectors(feats[None])[0] if vectors is None else vectors  # (E, h, w)
    maps = [phrase_map(heads, v, x, mode) for x in name_words.values()]  # C x (h, w)
    return NameMaps(tuple(name_words), torch.stack(maps))


@torch.no_grad()
def maximage_word_scores(heads: MaxImageHeads, feats: torch.Tensor, word_feats: torch.Tensor,
                         words: Sequence[str], vectors: torch.Tensor | None = None) -> WordScores:
    """Misalignment: score_d = max_{r,q} m_{r,q,d}, m = <v_{r,q}, t_d> (the co-localization
    volume): word d's best region. Their mean over d is the MaxImage score S(I, T).
    feats (Di, h, w): one image; word_feats (L, Dt): the caption's frozen word features;
    ``vectors`` (E, h, w): the image's ``heads.image_vectors``, when the caller has them already."""
    if feats.ndim != 3 or word_feats.ndim != 2 or len(word_feats) != len(words):
        raise ValueError(f"need feats (Di, h, w) and word_feats (L, Dt) with L = len(words) = {len(words)}, "
                         f"got {tuple(feats.shape)} and {tuple(word_feats.shape)}")
    v = heads.image_vectors(feats[None]) if vectors is None else vectors[None]  # (1, E, h, w)
    t = heads.word_vectors(word_feats)[None]  # (1, L, E)
    m = colocalization_volume(v, t)[0, 0]  # (P, L)
    return WordScores(tuple(words), m.max(dim=0).values)


@torch.no_grad()
def maximage_name_scores(heads: MaxImageHeads, feats: torch.Tensor,
                         name_words: Mapping[str, torch.Tensor]) -> NameScores:
    """Presence and retrieval: S_{i,c} = max_{r,q} <v_{i,r,q}, t_c>, the MaxImage score of the
    one-token caption t_c = f_text((1/n) sum_w x_w) (the name read as a "vector" phrase; its
    map is the pointing map, up to the positive factor of t's normalisation).
    feats (N, Di, h, w): the images' frozen features; name_words[c] (n_c, Dt)."""
    if feats.ndim != 4 or not name_words:
        raise ValueError(f"feats must be (N, Di, h, w) and name_words non-empty, got {tuple(feats.shape)}")
    v = heads.image_vectors(feats)  # (N, E, h, w)
    t = heads.word_vectors(torch.stack([x.mean(0) for x in name_words.values()]))[:, None]  # (C, 1, E)
    mask = torch.ones(len(t), 1, dtype=torch.bool)  # (C, 1): every name one word
    return NameScores(tuple(name_words), pair_scores(v, t, mask))  # (N, C)


# ---------------------------------------------------------------------- CLIP4DM (ch2)
def clip4dm_name_maps(relevance: Mapping[str, torch.Tensor | np.ndarray], grid: tuple[int, int]) -> NameMaps:
    """Pointing, an EXTENSION (the paper attributes text tokens only): the image-side
    analogue of Eq. (eq-clip4dm-relevance) for the pair (image, 'A photo depicts a {c}'),
    R_c[k] over the tokens of the CLIP's attention pooling
    (:func:`fgclip.methods.clip4dm.pooling_relevance`), its mean token (k = 0) dropped and
    the h*w map cells laid out row by row: M_c[r, q] = R_c[1 + r w + q]. relevance[c]: (1 + h*w,)."""
    if not relevance:
        raise ValueError("relevance: no name given")
    rows = torch.stack([torch.as_tensor(r, dtype=torch.float64).flatten() for r in relevance.values()])  # (C, 1+P)
    return NameMaps(tuple(relevance), _grid_maps(rows[:, 1:], grid, "relevance without its mean token"))


def clip4dm_image_maps(relevance: torch.Tensor, names: Sequence[str], queried: Sequence[Sequence[str]],
                       grid: tuple[int, int]) -> list[NameMaps]:
    """:func:`clip4dm_name_maps` of every image: relevance (N, C, 1 + h*w) with its C columns in
    ``names`` order, ``queried[i]`` the names asked of image i (row i)."""
    return [clip4dm_name_maps({n: relevance[i, names.index(n)] for n in q}, grid) for i, q in enumerate(queried)]


def clip4dm_word_scores(att: Attributions, captions: Sequence[str]) -> list[WordScores]:
    """Misalignment, the paper's rule hat k = argmin_k w_k (Eq. (eq-clip4dm-rules),
    :func:`fgclip.methods.clip4dm.most_negative_word`) over the official words k, read on each
    caption's whitespace words j: score_j = min_{k : source_k = j} w_k, +inf for a word with
    no candidate (punctuation only). argmin_j score_j is the whitespace word of the paper's
    pick (ties aside). att: :func:`fgclip.methods.clip4dm.clip4dm` of these captions."""
    if att.source is None or len(att.w) != len(captions):
        raise ValueError(f"att must hold sources and one row per caption ({len(captions)}), "
                         f"got {len(att.w)} rows, source {'missing' if att.source is None else 'given'}")
    out = []
    for caption, w, src in zip(captions, att.w, att.source):
        words, src = caption.split(), np.asarray(src, dtype=int)
        if len(src) != len(w) or (len(src) and not 0 <= src.min() <= src.max() < len(words)):
            raise ValueError(f"att.source {src.tolist()} does not index the words of {caption!r}")
        scores = np.full(len(words), np.inf)  # (n_whitespace_words,)
        np.minimum.at(scores, src, np.asarray(w, dtype=np.float64))
        out.append(WordScores(tuple(words), scores))
    return out


def name_texts(names: Sequence[str], template: str = TEMPLATE) -> list[str]:
    """The texts whose embeddings :func:`clip4dm_name_scores` takes: template + 'a {name}'."""
    return [f"{template}a {n}" for n in names]


def clip4dm_name_scores(image_emb: torch.Tensor, name_text: torch.Tensor, names: Sequence[str]) -> NameScores:
    """Presence: CLIPScore(I_i, c) = 2.5 max(cos(f(I_i), g(T_c)), 0)
    (:func:`fgclip.methods.clip4dm.clip_score`), T_c = :func:`name_texts`; every name whose
    cosine is negative ties at 0. image_emb (N, D), name_text (C, D): CLIP embeddings."""
    cos = _unit(image_emb, "image_emb", 2) @ _unit(name_text, "name_text", 2).T  # (N, C)
    return NameScores(tuple(names), clip_score(cos.double().numpy()))


# ---------------------------------------------------------------- SUM-CLIP / FOR (ch3)
def sumclip_name_scores(emb: torch.Tensor, name_text: torch.Tensor, names: Sequence[str]) -> NameScores:
    """Presence and retrieval, FOR's set score: s_{i,c} = max_n cos(t_c, e_{i,n}) over image i's
    slot embeddings (:func:`fgclip.metrics.object_retrieval.max_similarity`). emb (B, N, D):
    :class:`fgclip.methods.sumclip.SumClipHead`'s first output; on Cluster-CLIP's embeddings
    (:func:`fgclip.methods.cluster_clip.cluster_clip_embeddings`) the Cluster-CLIP reference."""
    t, e = _unit(name_text, "name_text", 2), _unit(emb, "emb", 3)  # (C, D), (B, N, D)
    return NameScores(tuple(names), max_similarity(t, e).T)  # (B, C)


def sumclip_name_maps(emb: torch.Tensor, attn: torch.Tensor, name_text: torch.Tensor, names: Sequence[str],
                      grid: tuple[int, int]) -> NameMaps:
    """Pointing: the slot matched to the name, n*_c = argmax_n cos(t_c, e_n), and its attention
    over the map, M_c = a_{n*_c, 1:} (head-averaged, Eq. (eq-attnpool); the self column j = 0
    dropped), row by row on the (h, w) grid. emb (N, D), attn (N, 1 + h*w): one image's rows
    of :class:`fgclip.methods.sumclip.SumClipHead`'s output; name_text (C, D)."""
    t, e = _unit(name_text, "name_text", 2), _unit(emb, "emb", 2)  # (C, D), (N, D)
    if attn.shape[0] != len(e):
        raise ValueError(f"attn has {attn.shape[0]} slots, emb {len(e)}")
    best = (t @ e.T).argmax(dim=1)  # (C,) n*_c
    return NameMaps(tuple(names), _grid_maps(attn.detach()[best, 1:], grid, "attn without its self column"))


def sumclip_word_scores(emb: torch.Tensor, word_text: torch.Tensor, words: Sequence[str]) -> WordScores:
    """Misalignment: score_j = max_n cos(t_j, e_n), word j's best slot (t_j: the text embedding
    of word j alone); the lowest is the wrong word. emb (N, D): one image's slots."""
    t, e = _unit(word_text, "word_text", 2), _unit(emb, "emb", 2)  # (L, D), (N, D)
    return WordScores(tuple(words), (t @ e.T).max(dim=1).values)


# ------------------------------------------------------------------- decoupling (ch4)
def decoupling_name_maps(out: HeadOutput, i: int, categories: Sequence[str], names: Sequence[str]) -> NameMaps:
    """Pointing: the category's attention a_{c,wh} of image i (Eq. (eq-decoupling-attention)),
    for each queried name (a category of the head). out.attention (B, C, h, w)."""
    if out.attention is None:
        raise ValueError("out.attention is None: a head without semantic decoupling has no category map")
    return NameMaps(tuple(names), out.attention.detach()[i, _index(categories, names, "names")])


def decoupling_word_scores(out: HeadOutput, i: int, categories: Sequence[str], words: Sequence[str],
                           word_category: Mapping[str, str]) -> WordScores:
    """Misalignment: score_j = s_{i,c(j)} (Eq. (eq-category-score)) for a word j that names a
    category c(j) (``word_category``, the caller's word -> category map), +inf for every
    other word (the head has no score for it); the lowest is the wrong word."""
    col = {w: _index(categories, [word_category[w]], "word_category")[0] for w in words if w in word_category}
    s = out.scores.detach()[i].double()  # (C,)
    return WordScores(tuple(words), [float(s[col[w]]) if w in col else np.inf for w in words])


def decoupling_presence_scores(out: HeadOutput, categories: Sequence[str], scoring: str) -> NameScores:
    """Presence: the paper's p_c (Eq. (eq-softmax-over-categories) for "softmax"), ranked as
    log p_c (:func:`fgclip.methods.decoupling.score_log_probabilities`: the order of p, without
    underflow ties). ``scoring``: the head's."""
    return NameScores(tuple(categories), score_log_probabilities(out.scores.detach(), scoring))


def decoupling_retrieval_scores(out: HeadOutput, categories: Sequence[str]) -> NameScores:
    """Retrieval: the category score s_{i,c} = cos(f^v_{i,c}, f^t_c) / τ (Eq. (eq-category-score))."""
    return NameScores(tuple(categories), out.scores.detach())


# ------------------------------------------------------------------------- references
def dense_similarity_maps(dense: torch.Tensor, name_text: torch.Tensor, names: Sequence[str]) -> NameMaps:
    """CLIP dense similarity: M_c[r, q] = cos(v_{r,q}, t_c), v one image's dense features in
    the joint space (D, h, w) (:func:`fgclip.models.dense.encode_image_dense`)."""
    v = _unit(dense.movedim(0, -1), "dense", 3)  # (h, w, D)
    return NameMaps(tuple(names), torch.einsum("hwd,cd->chw", v, _unit(name_text, "name_text", 2)))


def dense_max_scores(dense: torch.Tensor, name_text: torch.Tensor, names: Sequence[str]) -> NameScores:
    """CLIP dense max: S_{i,c} = max_{r,q} cos(v_{i,r,q}, t_c), the best position of the dense
    similarity map (the training-free region-level reading of presence and retrieval).
    dense (N, D, h, w), name_text (C, D)."""
    if dense.ndim != 4:
        raise ValueError(f"dense must be (N, D, h, w), got {tuple(dense.shape)}")
    v = _unit(dense.flatten(2).transpose(1, 2), "dense", 3)  # (N, h*w, D)
    return NameScores(tuple(names), (v @ _unit(name_text, "name_text", 2).T).max(dim=1).values)  # (N, C)


def centre_points(names: Sequence[str], image_hw: tuple[int, int]) -> dict[str, Point]:
    """The centre pointer: p_c = (W/2, H/2) for every name; scored by
    :func:`~fgclip.studies.crosspaper.tasks.pointing`."""
    return {n: center_point(image_hw) for n in names}


def global_scores(image_emb: torch.Tensor, name_text: torch.Tensor, names: Sequence[str]) -> NameScores:
    """Zero-shot / CLIP global: s_{i,c} = cos(f(I_i), t_c). image_emb (N, D), name_text (C, D)."""
    return NameScores(tuple(names), _unit(image_emb, "image_emb", 2) @ _unit(name_text, "name_text", 2).T)


def random_word_scores(words: Sequence[str], content: Sequence[bool], rng: np.random.Generator) -> WordScores:
    """Random content word: u_j ~ U(0, 1) on the content words, +inf elsewhere, so argmin_j is
    a uniformly drawn content word."""
    content = np.asarray(content, dtype=bool)
    if content.shape != (len(words),) or not content.any():
        raise ValueError(f"content must flag each of the {len(words)} words, at least one True, got {content}")
    return WordScores(tuple(words), np.where(content, rng.random(len(words)), np.inf))


ADAPTERS: dict[tuple[str, str], Callable] = {
    ("maximage", "pointing"): maximage_name_maps, ("maximage", "misalignment"): maximage_word_scores,
    ("maximage", "presence"): maximage_name_scores, ("maximage", "retrieval"): maximage_name_scores,
    ("clip4dm", "pointing"): clip4dm_name_maps, ("clip4dm", "misalignment"): clip4dm_word_scores,
    # ("clip4dm", "presence"): NOT_APPLICABLE; clip4dm_name_scores stays, to show why
    ("sumclip", "pointing"): sumclip_name_maps, ("sumclip", "misalignment"): sumclip_word_scores,
    ("sumclip", "presence"): sumclip_name_scores, ("sumclip", "retrieval"): sumclip_name_scores,
    ("decoupling", "pointing"): decoupling_name_maps, ("decoupling", "misalignment"): decoupling_word_scores,
    ("decoupling", "presence"): decoupling_presence_scores, ("decoupling", "retrieval"): decoupling_retrieval_scores,
}


def adapter(method: str, task: str) -> Callable:
    """The adapter of one cell; :class:`NotApplicable` with the reason for a '-' cell."""
    if method not in METHODS or task not in TASKS:
        raise ValueError(f"method must be one of {METHODS} and task one of {TASKS}, got {method!r}, {task!r}")
    if (method, task) in NOT_APPLICABLE:
        raise NotApplicable(f"{method} x {task}: {NOT_APPLICABLE[(method, task)]}")
    return ADAPTERS[(method, task)]
