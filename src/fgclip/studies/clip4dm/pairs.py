"""Chapter 2's pairing of each foil caption with its own original: the paired score
comparison (eq-clip4dm-paired) and the original's word at the foil's slot, which the
controls read (:mod:`~fgclip.studies.clip4dm.controls`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ...metrics.misalignment import span_labels
from .units import random_content_hit


def own_original(rows: pd.DataFrame, units: pd.DataFrame) -> np.ndarray:
    """For every row of ``rows``, the position in ``units`` of its own original caption (same
    draw, same image, the caption it was made from), or -1 when that original is absent."""
    orig = units.foil_type.eq("original").to_numpy()
    keys = {k: i for i, k in reversed(list(enumerate(zip(units.seed, units.image, units.caption)))) if orig[i]}
    return np.array([keys.get(k, -1) for k in zip(rows.seed, rows.image, rows.original)], dtype=int)


def paired_accuracy(units: pd.DataFrame, score) -> np.ndarray:
    """Per foil row: 1 when its own original scores higher by ``score`` (an array over
    ``units``), 1/2 on a tie, 0 otherwise (eq-clip4dm-paired); NaN for originals and for
    foils whose original is absent."""
    score = np.asarray(score, dtype=np.float64)
    idx = own_original(units, units)
    out = np.full(len(units), np.nan)
    ok = units.foil_type.ne("original").to_numpy() & (idx >= 0)
    s_orig, s_foil = score[idx[ok]], score[ok]
    out[ok] = (s_orig > s_foil) + 0.5 * (s_orig == s_foil)
    return out


def original_slot(rows: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    """For every foil row of ``rows``: in its own original (a row of ``units``, which must
    carry the main rule's ``argmin``, ``words`` and ``source``), whether the most negative
    word lies in the slot the foil replaced (``slot hit``: the words of ``target_word`` from
    ``start``) and the expected hit of a random content word there (``slot random``); NaN
    where there is no original or the slot holds no candidate word."""
    idx = own_original(rows, units)
    hit, rand = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    for k, (i, start, target) in enumerate(zip(idx, rows.start, rows.target_word)):
        if i < 0 or not isinstance(target, str) or not target or np.isnan(start):
            continue
        o = units.iloc[i]
        y = span_labels(o["source"], int(start), len(target.split()))
        if y.any():
            hit[k], rand[k] = float(y[int(o["argmin"])]), random_content_hit(o["words"], y)
    return pd.DataFrame({"slot hit": hit, "slot random": rand}, index=rows.index)
