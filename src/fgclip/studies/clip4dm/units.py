"""Chapter 2's units: one row per caption, clustered by its image, and the comparison on them.

Units are captions, clustered by their image (an image's original and foils move together
in the bootstrap); the seeds are the test draws (:mod:`fgclip.studies.clip4dm.data`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ... import verdicts
from ...methods.clip4dm import Attributions, clip_score, f_clip_score
from ...metrics.misalignment import (ap_contributions, caption_auc, caption_f1, foil_ap, most_negative, span_labels,
                                     word_matches)
from ...toyworld import COLORS, COUNT_WORDS, RELATIONS, SHAPES, SIZE_WORDS

STOPWORDS = frozenset("a an the of to on in at and with is are".split())
POSITION_RULE = "CLIP4DM (position rule)"  # the main rule's LA by the foil's word position, a named arm


def word_role(word: str) -> str:
    """The slot a toy-caption word fills (colour, shape, relation/position, count, size,
    function word); 'other' for anything else (real captions)."""
    table = ((COLORS, "colour"), (SHAPES, "shape"), (RELATIONS, "relation/position"),
             (COUNT_WORDS, "count"), (SIZE_WORDS, "size"), (STOPWORDS, "function word"))
    return next((name for vocab, name in table if word.lower() in vocab), "other")


def labels_of(attr: Attributions, df: pd.DataFrame) -> list[np.ndarray]:
    """Span labels of every caption (multi-word foils labelled whole)."""
    return [span_labels(src, None if np.isnan(st) else int(st), max(int(n), 1))
            for src, st, n in zip(attr.source, df.start, df.length)]


def word_labels_of(attr: Attributions, df: pd.DataFrame) -> list[np.ndarray]:
    """Per caption, the words equal to its foil word (:func:`~fgclip.metrics.misalignment.word_matches`,
    the official rule's labels); all 0 for an original."""
    return [word_matches(words, fw).astype(int) for words, fw in zip(attr.words, df.foil_word)]


def localization_units(attr: Attributions, df: pd.DataFrame, rng: np.random.Generator
                       ) -> pd.DataFrame:
    """Per caption, Eq. (eq-clip4dm-la) of chapter 2: hit (the most negative word equals the foil
    word after stripping punctuation and lower-casing, the official rule; NaN for originals),
    hit_pos (the position rule: it lies in the foil span), tie (argmin tied, broken at random),
    the within-caption AUC of the span, Eq. (eq-clip4dm-auc), the argmin word's role and index."""
    out = []
    for w, y, yw, words in zip(attr.w, labels_of(attr, df), word_labels_of(attr, df), attr.words):
        j, tie = most_negative(w, rng)
        foil = bool(y.any())
        out.append(dict(hit=float(yw[j]) if foil else np.nan, hit_pos=float(y[j]) if foil else np.nan, tie=tie,
                        auc=caption_auc(w, y), role=word_role(words[j]), argmin=j))
    return pd.DataFrame(out, index=df.index)


def random_content_hit(words: Sequence[str], y: np.ndarray) -> float:
    """Expected hit of a uniformly drawn content word (stop words excluded when any other
    word is left): |y ∩ content| / |content|, with y the words a hit counts (the word rule's
    matches or the foil span); 0 when y holds none."""
    y = np.asarray(y, dtype=bool)
    content = np.array([w.lower() not in STOPWORDS for w in words])
    content = content if content.any() else np.ones_like(content)
    return float((y & content).sum() / content.sum())


def informed_floor_hit(words: Sequence[str], y: np.ndarray, span: np.ndarray | None = None) -> float:
    """Expected hit of a word drawn uniformly from the foil's own word class (the role of the
    first word of the foil ``span``, default ``y``: a colour for a colour foil): |y ∩ class| /
    |class|; the random content word where the class is 'other'; NaN without a foil span."""
    y = np.asarray(y, dtype=bool)
    span = y if span is None else np.asarray(span, dtype=bool)
    if not span.any():
        return float("nan")
    role = word_role(words[int(np.flatnonzero(span)[0])])
    if role in ("other", "function word"):
        return random_content_hit(words, y)
    same = np.array([word_role(w) == role for w in words])
    return float((y & same).sum() / same.sum())


def f_scores(attr: Attributions, eps: dict[str, float | None]) -> dict[str, np.ndarray]:
    """F-CLIPScore of every pair in each form of ``eps`` ({form: ε}), plus CLIPScore."""
    out = {form: np.array([f_clip_score(float(c), w, e, form) for c, w in zip(attr.cos, attr.w)])
           for form, e in eps.items()}
    out["CLIPScore"] = clip_score(attr.cos)
    return out


def seed_matrix(units: pd.DataFrame, values, where) -> np.ndarray:
    """(n_seeds, n_rows) with row u's value in its own seed's row and NaN elsewhere, for
    the rows where ``where``; the seeds are independent test draws, not paired units."""
    sub = units[np.asarray(where, dtype=bool)]
    vals = np.asarray(values, dtype=np.float64)[np.asarray(where, dtype=bool)]
    seeds = sorted(units.seed.unique())
    mat = np.full((len(seeds), len(sub)), np.nan)
    for k, s in enumerate(seeds):
        mat[k, (sub.seed == s).to_numpy()] = vals[(sub.seed == s).to_numpy()]
    return mat


@dataclass(frozen=True)
class Margins:
    """The margins of practical equivalence, one per kind of score, declared before the run:
    ``share`` for shares of captions (LA, hit rates), ``rank`` for rank and overlap scores
    (AP, pairwise accuracy, word AUC, word F1), ``attr`` for attribution values (the minimum
    w_j) in units of the chosen |ε|, ``flag`` for the share of a caption's words below ε (a
    rate whose base is small, a few per cent when the margin was declared, so the share margin
    would hide a large relative change)."""

    share: float
    rank: float
    attr: float = 0.1
    flag: float = 0.01

    def __post_init__(self):
        if not (self.share > 0 and self.rank > 0 and self.attr > 0):
            raise ValueError(f"margins must be > 0, got share={self.share}, rank={self.rank}, attr={self.attr}")


def compare_units(units: pd.DataFrame, a, b, where, *, claim: str, arms: tuple[str, str],
                  unit: str, seed: int, margin: float, higher_is_better: bool = True) -> verdicts.Verdict:
    """:func:`fgclip.verdicts.compare` on per-caption values a, b (arrays over ``units``
    rows) restricted to ``where``, seeds = test draws, captions clustered by image (the
    ``cluster_unit`` of the record), judged against ``margin``."""
    where = np.asarray(where, dtype=bool) & ~np.isnan(np.asarray(a, dtype=float)) \
        & ~np.isnan(np.asarray(b, dtype=float))
    return verdicts.compare(seed_matrix(units, a, where), seed_matrix(units, b, where),
                            claim=claim, arms=arms, unit=unit,
                            clusters=units.cluster[where].to_numpy(), cluster_unit="images",
                            seed=seed, higher_is_better=higher_is_better, margin=margin)


def per_seed(units: pd.DataFrame, where, fn) -> np.ndarray:
    """Apply ``fn(rows of one seed) -> (len(rows),) array`` seed by seed; NaN outside where."""
    out = np.full(len(units), np.nan)
    where = np.asarray(where, dtype=bool)
    for s in units.seed.unique():
        sel = where & (units.seed == s).to_numpy()
        if sel.any():
            out[sel] = fn(units[sel])
    return out


def subset(attr: Attributions, keep) -> Attributions:
    """The captions of ``attr`` where ``keep`` (bool mask)."""
    idx = np.flatnonzero(np.asarray(keep, dtype=bool))
    return Attributions([attr.words[i] for i in idx], [attr.w[i] for i in idx], attr.cos[idx],
                        None if attr.source is None else [attr.source[i] for i in idx])


def build_units(df: pd.DataFrame, attrs: dict[str, Attributions], main: str,
                rng: np.random.Generator, eps: dict[str, float | None], eps_f1: float,
                partial: dict[str, tuple[Attributions, np.ndarray]] | None = None) -> pd.DataFrame:
    """One row per caption of one test draw: for every method m of ``attrs`` the columns
    hit|m, tie|m, auc|m; the random content word's expected hit; cos; F|<form> and
    F|CLIPScore; the role of the main method's argmin; the share of words flagged at
    ``eps_f1`` and the caption's word F1 there. ``partial[m] = (attributions, mask)``
    adds a method scored on the rows where mask only (NaN elsewhere)."""
    out = df.copy()
    items = [(name, a, np.ones(len(df), bool)) for name, a in attrs.items()]
    items += [(name, a, np.asarray(m, bool)) for name, (a, m) in (partial or {}).items()]
    for name, a, mask in items:
        u = localization_units(a, df[mask], rng)
        for col in ("hit", "tie", "auc"):
            out[f"{col}|{name}"] = np.nan
            out.loc[mask, f"{col}|{name}"] = u[col].to_numpy(dtype=float)
        if name == main:
            out["role"], out["argmin"] = u.role, u.argmin
            out[f"hit|{POSITION_RULE}"] = u.hit_pos.to_numpy(dtype=float)
    a = attrs[main]
    labels, y_word = labels_of(a, df), word_labels_of(a, df)
    foil = [bool(y.any()) for y in labels]  # the random arms are scored by the word rule, as the method is
    out["hit|random content word"] = [random_content_hit(w, yw) if f else np.nan
                                      for w, yw, f in zip(a.words, y_word, foil)]
    out["hit|informed floor"] = [informed_floor_hit(w, yw, y) if f else np.nan
                                 for w, yw, y, f in zip(a.words, y_word, labels, foil)]
    out["words"], out["source"] = list(a.words), list(a.source)
    out["cos"] = a.cos
    for form, v in f_scores(a, eps).items():
        out[f"F|{form}"] = v
    out["flagged"] = [float(np.mean(w < eps_f1)) for w in a.w]
    out["w_min"] = [float(np.min(w)) for w in a.w]
    out["f1"] = [caption_f1(w, y, eps_f1) for w, y in zip(a.w, labels)]
    out["random role share"] = [np.mean([word_role(x) == "colour" for x in ws]) for ws in a.words]
    return out


def ap_units(units: pd.DataFrame, score, foils) -> np.ndarray:
    """Per-original AP contributions (see ``ap_contributions``) of ``score`` for originals
    against the foil rows where ``foils``, seed by seed; NaN for every other row."""
    orig = units.foil_type.eq("original").to_numpy()
    where = orig | np.asarray(foils, dtype=bool)
    score = np.asarray(score, dtype=np.float64)
    out = np.full(len(units), np.nan)
    for s in units.seed.unique():
        sel = where & (units.seed == s).to_numpy()
        out[sel] = ap_contributions(score[sel], orig[sel])
    return out


def type_tables(units: pd.DataFrame, methods: Sequence[str], scores: Sequence[str],
                types: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(LA and within-caption word AUC per method and foil type, pooled over draws;
    AP per score and foil type, the mean over draws of each draw's AP)."""
    la = {}
    for m in methods:
        for t in list(types) + ["all types"]:
            sel = units.foil_type.isin(types if t == "all types" else [t])
            la[(m, t)] = {"LA": units.loc[sel, f"hit|{m}"].mean(),
                          "word AUC": units.loc[sel, f"auc|{m}"].mean() if f"auc|{m}" in units else np.nan}
    la = pd.DataFrame(la).T.unstack()
    ap = {}
    for sc in scores:
        for t in list(types) + ["all types"]:
            keep = units.foil_type.isin(list(types) if t == "all types" else [t]) | units.foil_type.eq("original")
            ap[(sc, t)] = np.mean([foil_ap(g[f"F|{sc}"], g.foil_type.eq("original"))
                                   for _, g in units[keep].groupby("seed")])
    return la, pd.Series(ap).unstack()
