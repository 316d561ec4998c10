"""What chapter 2 tunes, all on the validation split: the text layers and every ε."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...methods.clip4dm import F_FORMS, AttributionConfig, Attributions
from ...metrics.misalignment import tune_threshold
from .arms import last_layers
from .pairs import own_original
from .units import f_scores, labels_of, localization_units


def tune_eps_paired(attr: Attributions, rows: pd.DataFrame, keep, form: str, n_candidates: int = 40) -> float:
    """The ε that maximises the paired accuracy (eq-clip4dm-paired: each foil below its own
    original, ties 1/2) of F-CLIPScore (``form``: threshold or additive), averaged over the
    foils of ``rows`` where ``keep``, over quantiles of the pooled w_j (call it on the val
    split). Each foil meets only its own original, so no caption template is ranked against
    another while ε is chosen."""
    if form not in F_FORMS or form == "most negative":
        raise ValueError(f"tune_eps_paired: form must be 'threshold' or 'additive', got {form!r}")
    idx = own_original(rows, rows)
    ok = np.flatnonzero(np.asarray(keep, bool) & rows.foil_type.ne("original").to_numpy() & (idx >= 0))
    if not ok.size:
        raise ValueError("tune_eps_paired: no foil with its own original where keep")
    w = np.concatenate(attr.w)
    cands = np.nextafter(np.unique(np.quantile(w, np.linspace(0, 1, n_candidates))), np.inf)
    acc = []
    for e in cands:
        f = f_scores(attr, {form: float(e)})[form]
        acc.append(np.mean((f[idx[ok]] > f[ok]) + 0.5 * (f[idx[ok]] == f[ok])))
    return float(cands[int(np.argmax(acc))])


def tune_eps_f1(attr: Attributions, labels: Sequence[np.ndarray], keep: np.ndarray) -> float:
    """ε maximising pooled word F1 of [w_j < ε] on the captions where ``keep``."""
    idx = np.flatnonzero(keep)
    return tune_threshold([attr.w[i] for i in idx], [labels[i] for i in idx], n_candidates=80)


def choose_layers(attr_val: dict[AttributionConfig, Attributions], val: pd.DataFrame, n_layers: int,
                  rng: np.random.Generator, n_last_layers: int = 0,
                  name: str = "LA") -> tuple[pd.Series, AttributionConfig]:
    """LA (most negative word) of the last-n rule for n = 1..n_layers on the validation
    rows, and the chosen rule: the best n, or ``n_last_layers`` when it is > 0."""
    if not 0 <= n_last_layers <= n_layers:
        raise ValueError(f"n_last_layers must lie in 0..{n_layers} (the text layers), got {n_last_layers}")
    la = pd.Series({last_layers(n).label: localization_units(attr_val[last_layers(n)], val, rng).hit.mean()
                    for n in range(1, n_layers + 1)}, name=name)
    return la, last_layers(n_last_layers or int(la.to_numpy().argmax()) + 1)


@dataclass(frozen=True)
class Epsilons:
    """The chosen thresholds: ``f1`` for the threshold rule's word F1, ``forms`` the ε of
    each F-CLIPScore form (None for the most-negative form), and ``val_fpr``, the share of
    words that ``f1`` flags on the validation originals."""

    f1: float
    forms: dict[str, float | None]
    val_fpr: float


def select_epsilons(attr: Attributions, val: pd.DataFrame, tune: bool = True,
                    epsilon: float = 0.0) -> Epsilons:
    """Every ε on the validation rows: one per F-CLIPScore form for its paired accuracy (each
    foil below its own original, all foils), and the threshold rule's for word F1 (or
    ``epsilon`` when not ``tune``)."""
    orig = val.foil_type.eq("original").to_numpy()
    forms = {"most negative": None, "threshold": tune_eps_paired(attr, val, ~orig, "threshold"),
             "additive": tune_eps_paired(attr, val, ~orig, "additive")}
    f1 = tune_eps_f1(attr, labels_of(attr, val), np.ones(len(val), bool)) if tune else epsilon
    fpr = float(np.mean([np.mean(w < f1) for w, o in zip(attr.w, orig) if o]))
    return Epsilons(f1, forms, fpr)


def selection_table(n_layers: int, main: AttributionConfig, eps: Epsilons, tuned: bool,
                    val_split: str) -> pd.DataFrame:
    """What was chosen on which split (hyperparameter, candidates, chosen, criterion, split)."""
    return pd.DataFrame([
        ("layers n (last n)", f"1..{n_layers}", main.label, "LA (most negative word)", val_split),
        ("ε, threshold rule", "80 quantiles of w_j" if tuned else "given", f"{eps.f1:.3g}", "word F1", val_split),
        ("ε, F-CLIPScore threshold form", "40 quantiles of w_j", f"{eps.forms['threshold']:.3g}", "paired accuracy", val_split),
        ("ε, F-CLIPScore additive form", "40 quantiles of w_j", f"{eps.forms['additive']:.3g}", "paired accuracy", val_split),
        ("ε, F-CLIPScore most-negative form", "none", "none", "the form has no ε", "-"),
        ("ε per foil type (transfer)", "80 / 40 quantiles", "table below", "word F1 / paired accuracy", val_split)],
        columns=["hyperparameter", "candidates", "chosen", "criterion", "split"])
