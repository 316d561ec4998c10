"""Metrics for word-level misalignment detection (FOIL-style benchmarks).

- LA, localization accuracy: the share of foil captions whose predicted word is the foil
  word, LA = (1/N) sum_i [hat j_i = j_i*].
- AP of separating originals (positives) from foils by a pair score (higher = more
  aligned), with scikit-learn's average_precision_score, as the paper's code does.
- Word-level AUC: ROC AUC of -w_j for misaligned (positive) versus aligned words, with
  scikit-learn's roc_auc_score; 1 means every foil word is more negative than every
  correct word.
"""
from __future__ import annotations

import string
from typing import Sequence

import numpy as np
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score


def localization_accuracy(predicted: Sequence[int], target: Sequence[int]) -> float:
    """LA = mean_i [predicted_i == target_i] over foil captions."""
    predicted, target = np.asarray(predicted), np.asarray(target)
    if predicted.shape != target.shape or predicted.size == 0:
        raise ValueError(f"localization_accuracy: predicted {predicted.shape} and target "
                         f"{target.shape} must be equal, non-empty 1-D")
    return float(np.mean(predicted == target))


def foil_ap(scores: Sequence[float], is_original: Sequence[bool]) -> float:
    """AP of ranking originals above foils by ``scores`` (higher = more aligned)."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(is_original, dtype=bool)
    if scores.shape != labels.shape:
        raise ValueError(f"foil_ap: scores {scores.shape} and is_original {labels.shape} differ")
    if labels.all() or not labels.any():
        raise ValueError("foil_ap: needs both original and foil captions")
    return float(average_precision_score(labels, scores))


def word_labels(n_words: int, foil_index: int | None) -> np.ndarray:
    """1 for the foil word, 0 elsewhere (all 0 for an original caption)."""
    labels = np.zeros(n_words, dtype=int)
    if foil_index is not None:
        if not 0 <= foil_index < n_words:
            raise ValueError(f"word_labels: foil_index {foil_index} outside {n_words} words")
        labels[foil_index] = 1
    return labels


def word_auc(attributions: Sequence[np.ndarray], labels: Sequence[np.ndarray]) -> float:
    """ROC AUC of -w_j for misaligned (label 1) vs aligned (label 0) words, pooled over captions."""
    if len(attributions) != len(labels):
        raise ValueError(f"word_auc: {len(attributions)} captions of attributions, {len(labels)} of labels")
    for i, (w, y) in enumerate(zip(attributions, labels)):
        if len(w) != len(y):
            raise ValueError(f"word_auc: caption {i} has {len(w)} attributions and {len(y)} labels")
    w = np.concatenate([np.asarray(a, dtype=np.float64) for a in attributions])
    y = np.concatenate([np.asarray(b, dtype=int) for b in labels])
    if y.all() or not y.any():
        raise ValueError("word_auc: needs both misaligned and aligned words")
    return float(roc_auc_score(y, -w))


def threshold_f1(attributions: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                 eps: float) -> float:
    """Word-level F1 of the threshold rule mis(w_j) = [w_j < eps] (scikit-learn f1_score)."""
    w = np.concatenate([np.asarray(a, dtype=np.float64) for a in attributions])
    y = np.concatenate([np.asarray(b, dtype=int) for b in labels])
    if w.shape != y.shape:
        raise ValueError(f"threshold_f1: {w.shape} attributions but {y.shape} labels")
    return float(f1_score(y, (w < eps).astype(int), zero_division=0.0))


def threshold_localization(attributions: Sequence[np.ndarray], targets: Sequence[int],
                           eps: float) -> float:
    """LA of the threshold rule: the most negative word is the foil *and* lies below eps."""
    hits = [len(w) > 0 and int(np.argmin(w)) == t and float(np.min(w)) < eps
            for w, t in zip(attributions, targets)]
    if not hits:
        raise ValueError("threshold_localization: no captions")
    return float(np.mean(hits))


def tune_threshold(attributions: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                   n_candidates: int = 200) -> float:
    """The ε that maximises word-level F1, searched over quantiles of the pooled w_j."""
    w = np.concatenate([np.asarray(a, dtype=np.float64) for a in attributions])
    if w.size == 0:
        raise ValueError("tune_threshold: no words")
    candidates = np.unique(np.quantile(w, np.linspace(0.0, 1.0, n_candidates)))
    candidates = np.nextafter(candidates, np.inf)  # w_j < ε flags the candidate value itself
    scores = [threshold_f1(attributions, labels, float(e)) for e in candidates]
    return float(candidates[int(np.argmax(scores))])


def evaluate_attributions(attributions: Sequence[np.ndarray], targets: Sequence[int | None],
                          pair_scores: Sequence[float] | None = None) -> dict[str, float]:
    """LA (most negative word, foil captions only), word AUC (all captions) and, when
    ``pair_scores`` are given, the AP of originals (target None) above foils by those scores."""
    if len(attributions) != len(targets):
        raise ValueError(f"evaluate_attributions: {len(attributions)} captions, {len(targets)} targets")
    foils = [i for i, t in enumerate(targets) if t is not None]
    out = {"LA": localization_accuracy([int(np.argmin(attributions[i])) for i in foils],
                                       [targets[i] for i in foils]),
           "word AUC": word_auc(attributions, [word_labels(len(w), t) for w, t in zip(attributions, targets)])}
    if pair_scores is not None:
        out["AP"] = foil_ap(pair_scores, [t is None for t in targets])
    return out


def binned_thresholds(attributions: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                      scores: Sequence[float], edges: Sequence[float]) -> np.ndarray:
    """A score-dependent threshold: ε_b tuned (max word F1) on the captions of each score bin.

    Bin b holds the captions with ``np.digitize(score, edges) == b`` (len(edges) + 1 bins).
    """
    bins = np.digitize(np.asarray(scores, dtype=np.float64), np.asarray(edges, dtype=np.float64))
    out = []
    for b in range(len(edges) + 1):
        idx = np.flatnonzero(bins == b)
        if idx.size == 0:
            raise ValueError(f"binned_thresholds: score bin {b} (edges {list(edges)}) is empty")
        out.append(tune_threshold([attributions[i] for i in idx], [labels[i] for i in idx]))
    return np.asarray(out)


def binned_threshold_f1(attributions: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                        scores: Sequence[float], edges: Sequence[float],
                        eps_per_bin: Sequence[float]) -> float:
    """Word F1 when each caption is thresholded with the ε of its score bin."""
    bins = np.digitize(np.asarray(scores, dtype=np.float64), np.asarray(edges, dtype=np.float64))
    if len(eps_per_bin) != len(edges) + 1:
        raise ValueError(f"binned_threshold_f1: {len(eps_per_bin)} thresholds for {len(edges) + 1} bins")
    flags = np.concatenate([np.asarray(w) < eps_per_bin[b] for w, b in zip(attributions, bins)])
    y = np.concatenate([np.asarray(lab, dtype=int) for lab in labels])
    return float(f1_score(y, flags.astype(int), zero_division=0.0))


def threshold_transfer(src: tuple[Sequence[np.ndarray], Sequence[np.ndarray], Sequence[str]],
                       dst: tuple[Sequence[np.ndarray], Sequence[np.ndarray], Sequence[str]],
                       ) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Does an ε tuned on one foil type work on another?

    ``src`` and ``dst`` are (attributions w, word labels, foil type) per caption. For each
    foil type t of ``src`` (originals excluded), ε_t = :func:`tune_threshold` on the
    captions of type t; the table's entry [t][u] is :func:`threshold_f1` with ε_t on the
    ``dst`` captions of type u. Returns (table, {t: ε_t}).
    """
    def subset(split, ftype):
        w, y, types = split
        idx = [i for i, t in enumerate(types) if t == ftype]
        return [w[i] for i in idx], [y[i] for i in idx]

    types = sorted({t for t in src[2] if t != "original"})
    if not types:
        raise ValueError("threshold_transfer: the source split has no foiled captions")
    missing = sorted(set(types) - set(dst[2]))
    if missing:
        raise ValueError(f"threshold_transfer: foil types {missing} are absent from the target split")
    eps_of = {t: tune_threshold(*subset(src, t)) for t in types}
    table = {t: {u: threshold_f1(*subset(dst, u), eps_of[t]) for u in types} for t in types}
    return table, eps_of


# ------------------------------------------------ per-caption scores (units for verdicts)
def normalise_word(word: str) -> str:
    """A word as the official code compares it: surrounding punctuation stripped, lower-cased
    ('Handbag.' -> 'handbag')."""
    return word.strip().strip(string.punctuation).lower()


def word_matches(words: Sequence[str], foil_word: str) -> np.ndarray:
    """Eq. (eq-clip4dm-la) of chapter 2, the word rule: (n_words,) bool, True where the word equals
    the foil word after :func:`normalise_word` (every occurrence; a multi-word foil never
    equals one word, as in the official code). All False for an empty foil word (an original)."""
    target = normalise_word(foil_word) if isinstance(foil_word, str) else ""
    return np.array([bool(target) and normalise_word(w) == target for w in words], dtype=bool)


def span_labels(source: np.ndarray, start: int | None, length: int = 1) -> np.ndarray:
    """1 for the candidate words inside the foil span, 0 elsewhere (all 0 for an original).

    ``source[j]`` is the whitespace-word index of candidate word j; the foil replaced the
    whitespace words start .. start + length - 1 (a multi-word foil is labelled whole).
    """
    source = np.asarray(source, dtype=int)
    if start is None:
        return np.zeros(source.shape, dtype=int)
    if length < 1:
        raise ValueError(f"span_labels: length must be >= 1, got {length}")
    return ((source >= start) & (source < start + length)).astype(int)


def most_negative(w: np.ndarray, rng: np.random.Generator) -> tuple[int, bool]:
    """Eq. (eq-clip4dm-rules) of chapter 2: hat j = argmin_j w_j over one caption's words,
    (n_words,) -> (index, tied?); ties are broken uniformly at random with ``rng``."""
    w = np.asarray(w, dtype=np.float64)
    if w.size == 0:
        raise ValueError("most_negative: caption without candidate words")
    ties = np.flatnonzero(w == w.min())
    return (int(ties[0]), False) if ties.size == 1 else (int(rng.choice(ties)), True)


def caption_auc(w: np.ndarray, y: np.ndarray) -> float:
    """Within-caption AUC: P(w_foil < w_other) + P(tie) / 2 over pairs of a foil-span word and
    another word of the same caption; NaN when the caption has no foil or no other word."""
    w, y = np.asarray(w, dtype=np.float64), np.asarray(y, dtype=bool)
    pos, neg = w[y], w[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    less = (pos[:, None] < neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(less + ties / 2)


def caption_f1(w: np.ndarray, y: np.ndarray, eps: float) -> float:
    """Word F1 of mis(w_j) = [w_j < ε] within one caption: 2TP / (2TP + FP + FN);
    1 when the caption has nothing to find and nothing is flagged."""
    flag, y = np.asarray(w) < eps, np.asarray(y, dtype=bool)
    tp, fp, fn = int((flag & y).sum()), int((flag & ~y).sum()), int((~flag & y).sum())
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def ap_contributions(scores: Sequence[float], is_positive: Sequence[bool]) -> np.ndarray:
    """Per-pair terms whose mean over positives is AP: for a positive i, the precision
    P(s_i) = #{positives with s >= s_i} / #{pairs with s >= s_i}; NaN for negatives.

    AP = sum_k (R_k - R_{k-1}) P_k (scikit-learn's step rule) equals mean_{i positive} P(s_i),
    ties included, so these are the units a paired bootstrap resamples (ranking held fixed).
    """
    s, pos = np.asarray(scores, dtype=np.float64), np.asarray(is_positive, dtype=bool)
    if s.shape != pos.shape or not pos.any():
        raise ValueError(f"ap_contributions: scores {s.shape} and is_positive {pos.shape} must "
                         "match and hold at least one positive")
    order = np.sort(s)  # pairs with s >= t: n - searchsorted(left)
    above = s.size - np.searchsorted(order, s, side="left")
    pos_sorted = np.sort(s[pos])
    pos_above = pos_sorted.size - np.searchsorted(pos_sorted, s, side="left")
    return np.where(pos, pos_above / above, np.nan)


def group_contrast(values: np.ndarray, in_a: np.ndarray, in_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two paired arms over all units whose means are the means of ``values`` in group A
    and in group B: a_u = c + (v_u - c) [u in A] / p_A, b_u likewise with B (p: group
    shares, c: the mean of v over A and B, which centres the terms and shrinks the variance).

    mean_u(a_u - b_u) = mean_A v - mean_B v, so an unpaired group difference (e.g. LA in the
    highest vs the lowest CLIPScore quartile) goes through the paired cluster bootstrap.
    """
    v = np.asarray(values, dtype=np.float64)
    a_mask, b_mask = np.asarray(in_a, dtype=bool), np.asarray(in_b, dtype=bool)
    if not a_mask.any() or not b_mask.any():
        raise ValueError("group_contrast: both groups need at least one unit")
    if np.isnan(v[a_mask | b_mask]).any():
        raise ValueError("group_contrast: values inside the groups must not be NaN")
    c = float(v[a_mask | b_mask].mean())
    a = c + np.where(a_mask, np.nan_to_num(v) - c, 0.0) / a_mask.mean()
    b = c + np.where(b_mask, np.nan_to_num(v) - c, 0.0) / b_mask.mean()
    return a, b
