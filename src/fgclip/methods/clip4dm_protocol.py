"""The chapter-2 evaluation protocol around CLIP4DM: data per seed, per-caption units, ε tuning.

Nothing is trained in CLIP4DM, so the seed axis of every verdict is the draw of the test
foils: for the toy world, an independent export of test scenes and foils per seed
(``generate(..., seed=s)``); for a real FOIL file, a seeded sample of ``max_pairs`` pairs.
Units are captions, clustered by their image (an image's original and foils move together
in the bootstrap). Everything tuned (layers, every ε) is tuned on the validation split.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .. import verdicts
from ..datasets import read_foil_split
from ..datasets.foil import FoilSplit
from ..metrics.misalignment import (caption_auc, foil_ap, most_negative, span_labels,
                                    tune_threshold)
from ..toyworld import COLORS, COUNT_WORDS, RELATIONS, SHAPES, SIZE_WORDS
from .clip4dm import Attributions, F_FORMS, clip_score, f_clip_score

STOPWORDS = frozenset("a an the of to on in at and with is are".split())


# ------------------------------------------------------------------------------- data
def sample_pairs(split: FoilSplit, max_pairs: int, rng: np.random.Generator) -> FoilSplit:
    """A seeded sample of ``max_pairs`` pairs, kept in file order (all pairs when 0)."""
    if max_pairs < 0:
        raise ValueError(f"max_pairs must be >= 0, got {max_pairs}")
    if max_pairs == 0 or max_pairs >= len(split.pairs):
        return split
    keep = np.sort(rng.choice(len(split.pairs), size=max_pairs, replace=False))
    return dataclasses.replace(split, pairs=[split.pairs[i] for i in keep])


def caption_rows(split: FoilSplit, seed: int) -> pd.DataFrame:
    """One row per foil caption and one per distinct original: caption, image, start and
    length of the foil span (NaN / 0 for originals), foil_type, foil and target words."""
    rows = [dict(caption=p.foiled, image=str(p.image_path), start=p.word_index,
                 length=len(p.foil_span.split()), foil_type=p.foil_type or "foil",
                 foil_word=p.foil_span, target_word=p.target_span, original=p.original)
            for p in split.pairs]
    seen: set[int] = set()
    for p in split.pairs:
        if p.original_annotation_id not in seen:
            seen.add(p.original_annotation_id)
            rows.append(dict(caption=p.original, image=str(p.image_path), start=np.nan, length=0,
                             foil_type="original", foil_word="", target_word="", original=p.original))
    df = pd.DataFrame(rows)
    df["seed"] = seed
    df["cluster"] = [f"{seed}:{im}" for im in df.image]
    return df


def foil_sets(root: str | Path, split: str, seeds: Sequence[int], n_scenes: int,
              max_pairs: int, world=None) -> dict[int, pd.DataFrame]:
    """Caption rows per seed. Toy world (n_scenes > 0): seed s reads
    ``foil_<split>-s<s>-n<n_scenes>``, exported from ``generate(world, n_scenes, s)`` when
    absent. Real data (n_scenes = 0): every seed samples ``max_pairs`` pairs of one file."""
    from ..toyworld import ToyWorldConfig, generate
    from ..toyworld.export import export_foil

    root, out = Path(root), {}
    for s in seeds:
        name = split if n_scenes <= 0 else f"{split}-s{s}-n{n_scenes}"
        if not (root / f"foil_{name}.json").is_file():
            if n_scenes <= 0:
                raise FileNotFoundError(f"data_root {root} has no foil_{name}.json and n_scenes = 0")
            export_foil(generate(world or ToyWorldConfig(), n_scenes, seed=s, split=split), root, name)
        pairs = sample_pairs(read_foil_split(root, name), max_pairs, np.random.default_rng([s, 2]))
        out[s] = caption_rows(pairs, s)
    return out


def planted_colour_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Positive-control captions: colour foils on single-object images (the original names
    one colour), the foil colour replaced by the colour farthest in RGB from the true one,
    so the image strongly contradicts the word. Empty when there are none (real FOIL)."""
    def n_colours(text: str) -> int:
        return sum(w in COLORS for w in text.split())

    sel = df[(df.foil_type == "color") & df.original.map(n_colours).eq(1)
             & df.target_word.isin(list(COLORS))].copy()
    far = {c: max(COLORS, key=lambda o: float(np.sum((np.subtract(COLORS[o], COLORS[c])) ** 2)))
           for c in COLORS}
    words = [cap.split() for cap in sel.caption]
    for w, st, tw in zip(words, sel.start.astype(int), sel.target_word):
        w[st] = far[tw]
    sel["caption"], sel["foil_word"] = [" ".join(w) for w in words], sel.target_word.map(far)
    sel["foil_type"] = "planted colour"
    return sel.reset_index(drop=True)


def word_role(word: str) -> str:
    """The slot a toy-caption word fills (colour, shape, relation/position, count, size,
    function word); 'other' for anything else (real captions)."""
    table = ((COLORS, "colour"), (SHAPES, "shape"), (RELATIONS, "relation/position"),
             (COUNT_WORDS, "count"), (SIZE_WORDS, "size"), (STOPWORDS, "function word"))
    return next((name for vocab, name in table if word.lower() in vocab), "other")


# ------------------------------------------------------------------- per-caption units
def labels_of(attr: Attributions, df: pd.DataFrame) -> list[np.ndarray]:
    """Span labels of every caption (multi-word foils labelled whole)."""
    return [span_labels(src, None if np.isnan(st) else int(st), max(int(n), 1))
            for src, st, n in zip(attr.source, df.start, df.length)]


def localization_units(attr: Attributions, df: pd.DataFrame, rng: np.random.Generator
                       ) -> pd.DataFrame:
    """Per caption: hit (the most negative word lies in the foil span; NaN for originals),
    tie (argmin was tied and broken at random), caption AUC and the argmin word's role."""
    labels, out = labels_of(attr, df), []
    for w, y, words in zip(attr.w, labels, attr.words):
        j, tie = most_negative(w, rng)
        out.append(dict(hit=float(y[j]) if y.any() else np.nan, tie=tie, auc=caption_auc(w, y),
                        role=word_role(words[j])))
    return pd.DataFrame(out, index=df.index)


def random_content_hit(words: Sequence[str], y: np.ndarray) -> float:
    """Expected hit of a uniformly drawn content word (stop words excluded when any other
    word is left): |span ∩ content| / |content|; NaN for an original caption."""
    y = np.asarray(y, dtype=bool)
    if not y.any():
        return float("nan")
    content = np.array([w.lower() not in STOPWORDS for w in words])
    content = content if content.any() else np.ones_like(content)
    return float((y & content).sum() / content.sum())


def f_scores(attr: Attributions, eps: dict[str, float | None]) -> dict[str, np.ndarray]:
    """F-CLIPScore of every pair in each form of ``eps`` ({form: ε}), plus CLIPScore."""
    out = {form: np.array([f_clip_score(float(c), w, e, form) for c, w in zip(attr.cos, attr.w)])
           for form, e in eps.items()}
    out["CLIPScore"] = clip_score(attr.cos)
    return out


def tune_eps_for_ap(attr: Attributions, is_orig: np.ndarray, form: str,
                    n_candidates: int = 40) -> float:
    """The ε that maximises the AP of F-CLIPScore (``form``: threshold or additive) for
    originals above foils, over quantiles of the pooled w_j (call it on the val split)."""
    if form not in F_FORMS or form == "most negative":
        raise ValueError(f"tune_eps_for_ap: form must be 'threshold' or 'additive', got {form!r}")
    w = np.concatenate(attr.w)
    cands = np.nextafter(np.unique(np.quantile(w, np.linspace(0, 1, n_candidates))), np.inf)
    aps = [foil_ap(f_scores(attr, {form: float(e)})[form], is_orig) for e in cands]
    return float(cands[int(np.argmax(aps))])


def tune_eps_f1(attr: Attributions, labels: Sequence[np.ndarray], keep: np.ndarray) -> float:
    """ε maximising pooled word F1 of [w_j < ε] on the captions where ``keep``."""
    idx = np.flatnonzero(keep)
    return tune_threshold([attr.w[i] for i in idx], [labels[i] for i in idx], n_candidates=80)


# --------------------------------------------------------------------------- verdicts
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


def compare_units(units: pd.DataFrame, a, b, where, *, claim: str, arms: tuple[str, str],
                  unit: str, seed: int, higher_is_better: bool = True) -> verdicts.Verdict:
    """:func:`fgclip.verdicts.compare` on per-caption values a, b (arrays over ``units``
    rows) restricted to ``where``, seeds = test draws, captions clustered by image."""
    where = np.asarray(where, dtype=bool) & ~np.isnan(np.asarray(a, dtype=float)) \
        & ~np.isnan(np.asarray(b, dtype=float))
    return verdicts.compare(seed_matrix(units, a, where), seed_matrix(units, b, where),
                            claim=claim, arms=arms, unit=unit,
                            clusters=units.cluster[where].to_numpy(), cluster_unit="images",
                            seed=seed, higher_is_better=higher_is_better)


def per_seed(units: pd.DataFrame, where, fn) -> np.ndarray:
    """Apply ``fn(rows of one seed) -> (len(rows),) array`` seed by seed; NaN outside where."""
    out = np.full(len(units), np.nan)
    where = np.asarray(where, dtype=bool)
    for s in units.seed.unique():
        sel = where & (units.seed == s).to_numpy()
        if sel.any():
            out[sel] = fn(units[sel])
    return out


# ------------------------------------------------------------------ chapter assembly
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
    from ..metrics.misalignment import caption_f1

    out = df.copy()
    items = [(name, a, np.ones(len(df), bool)) for name, a in attrs.items()]
    items += [(name, a, np.asarray(m, bool)) for name, (a, m) in (partial or {}).items()]
    for name, a, mask in items:
        u = localization_units(a, df[mask], rng)
        for col in ("hit", "tie", "auc"):
            out[f"{col}|{name}"] = np.nan
            out.loc[mask, f"{col}|{name}"] = u[col].to_numpy(dtype=float)
        if name == main:
            out["role"] = u.role
    a = attrs[main]
    labels = labels_of(a, df)
    out["hit|random content word"] = [random_content_hit(w, y) for w, y in zip(a.words, labels)]
    out["cos"] = a.cos
    for form, v in f_scores(a, eps).items():
        out[f"F|{form}"] = v
    out["flagged"] = [float(np.mean(w < eps_f1)) for w in a.w]
    out["f1"] = [caption_f1(w, y, eps_f1) for w, y in zip(a.w, labels)]
    out["random role share"] = [np.mean([word_role(x) == "colour" for x in ws]) for ws in a.words]
    return out


def ap_units(units: pd.DataFrame, score, foils) -> np.ndarray:
    """Per-original AP contributions (see ``ap_contributions``) of ``score`` for originals
    against the foil rows where ``foils``, seed by seed; NaN for every other row."""
    from ..metrics.misalignment import ap_contributions

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


def quartile_verdicts(units: pd.DataFrame, method: str, types: Sequence[str],
                      seed: int) -> list[verdicts.Verdict]:
    """Within each foil type, LA and word AUC of the highest vs the lowest CLIPScore
    quartile (quartiles of each draw's foils of that type), through ``group_contrast``."""
    from ..metrics.misalignment import group_contrast

    out = []
    for t in types:
        for metric, col in (("LA", f"hit|{method}"), ("word AUC", f"auc|{method}")):
            a, b = np.full(len(units), np.nan), np.full(len(units), np.nan)
            for s in units.seed.unique():
                sel = np.flatnonzero((units.seed == s).to_numpy() & units.foil_type.eq(t).to_numpy()
                                     & units[col].notna().to_numpy())
                q = pd.qcut(units.cos.to_numpy()[sel], 4, labels=False)
                a[sel], b[sel] = group_contrast(units[col].to_numpy()[sel], q == 3, q == 0)
            out.append(compare_units(units, a, b, ~np.isnan(a), claim=f"{metric} on {t} foils by CLIPScore quartile",
                                     arms=("highest quartile", "lowest quartile"),
                                     unit=f"{t} foil captions", seed=seed))
    return out


def transfer_verdicts(units: pd.DataFrame, attrs: dict[int, Attributions], val: pd.DataFrame,
                      val_attr: Attributions, types: Sequence[str], seed: int
                      ) -> tuple[list[verdicts.Verdict], pd.DataFrame]:
    """Threshold transfer across foil types: for target type t, ε tuned on val foils of t
    ("own ε") vs ε tuned on the val foils of the other types ("transferred ε"), as word F1
    on test foils of t and as the AP of threshold-mode F-CLIPScore (originals vs t foils).
    ``attrs[s]`` are the main method's attributions of draw s, rows in ``units`` order."""
    from ..metrics.misalignment import caption_f1

    vt, orig = val.foil_type.to_numpy(), val.foil_type.eq("original").to_numpy()
    val_labels = labels_of(val_attr, val)
    w_all = [w for s in sorted(attrs) for w in attrs[s].w]
    cos_all = np.concatenate([attrs[s].cos for s in sorted(attrs)])
    lab_all = [y for s in sorted(attrs) for y in labels_of(attrs[s], units[units.seed == s])]
    out, chosen = [], []
    for t in types:
        others = [u for u in types if u != t]
        e_f1 = {"own": tune_eps_f1(val_attr, val_labels, vt == t),
                "transferred": tune_eps_f1(val_attr, val_labels, np.isin(vt, others))}
        e_ap = {"own": tune_eps_for_ap(subset(val_attr, orig | (vt == t)), orig[orig | (vt == t)], "threshold"),
                "transferred": tune_eps_for_ap(subset(val_attr, orig | np.isin(vt, others)),
                                               orig[orig | np.isin(vt, others)], "threshold")}
        is_t = units.foil_type.eq(t).to_numpy()
        f1 = {k: np.array([caption_f1(w, y, e) if m else np.nan for w, y, m in zip(w_all, lab_all, is_t)])
              for k, e in e_f1.items()}
        ap = {k: ap_units(units, [f_clip_score(c, w, e, "threshold") for c, w in zip(cos_all, w_all)], is_t)
              for k, e in e_ap.items()}
        out.append(compare_units(units, f1["own"], f1["transferred"], is_t, claim=f"word F1 on {t} foils",
                                 arms=("own ε", "transferred ε"), unit=f"{t} foil captions", seed=seed))
        out.append(compare_units(units, ap["own"], ap["transferred"], ~np.isnan(ap["own"]),
                                 claim=f"F-CLIPScore (threshold) AP, originals vs {t} foils",
                                 arms=("own ε", "transferred ε"), unit="original captions", seed=seed))
        chosen.append({"type": t, **{f"ε F1 {k}": v for k, v in e_f1.items()},
                       **{f"ε AP {k}": v for k, v in e_ap.items()}})
    return out, pd.DataFrame(chosen).set_index("type")


PAPER_EPSILONS = {"FOIL": -5e-5, "Rich-HF": -1e-5}  # the paper's thresholds for the two benchmarks


def paper_epsilon_verdicts(units: pd.DataFrame, attrs: dict[int, Attributions], seed: int,
                           eps: dict[str, float] = PAPER_EPSILONS
                           ) -> tuple[list[verdicts.Verdict], pd.DataFrame]:
    """The reviewers' transfer test with the paper's own two thresholds: word F1 on foil
    captions and the AP of threshold-mode F-CLIPScore (originals above foils) at FOIL's ε
    against Rich-HF's ε, on the same attributions (``attrs[s]`` rows in ``units`` order).
    Also returns, per ε, the share of words it flags on foil and on original captions."""
    from ..metrics.misalignment import caption_f1

    (name_a, e_a), (name_b, e_b) = eps.items()
    w_all = [w for s in sorted(attrs) for w in attrs[s].w]
    cos_all = np.concatenate([attrs[s].cos for s in sorted(attrs)])
    lab_all = [y for s in sorted(attrs) for y in labels_of(attrs[s], units[units.seed == s])]
    foil = units.foil_type.ne("original").to_numpy()
    f1 = {e: np.array([caption_f1(w, y, e) if m else np.nan for w, y, m in zip(w_all, lab_all, foil)])
          for e in (e_a, e_b)}
    ap = {e: ap_units(units, [f_clip_score(c, w, e, "threshold") for c, w in zip(cos_all, w_all)], foil)
          for e in (e_a, e_b)}
    arms = (f"ε = {e_a:g} ({name_a})", f"ε = {e_b:g} ({name_b})")
    out = [compare_units(units, f1[e_a], f1[e_b], foil, claim="word F1 on foil captions", arms=arms,
                         unit="foil captions", seed=seed),
           compare_units(units, ap[e_a], ap[e_b], ~np.isnan(ap[e_a]), claim="F-CLIPScore (threshold) AP, "
                         "originals vs foils", arms=arms, unit="original captions", seed=seed)]
    flagged = pd.DataFrame({f"{n} ε = {e:g}": {
        kind: float(np.mean(np.concatenate([np.asarray(w) < e for w, m in zip(w_all, foil) if m == is_foil])))
        for kind, is_foil in (("foil captions", True), ("original captions", False))} for n, e in eps.items()})
    return out, flagged.rename_axis("share of words flagged")


def gflop(fn: Callable[[], object]) -> float:
    """Floating-point operations of one call of ``fn``, in GFLOP: torch's FlopCounterMode
    counts matrix products and attention, forward and backward."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() / 1e9


def pairs_per_second(clip, images, captions: Sequence[str], cfg, device: str = "cpu",
                     batch_size: int | None = None, repeats: int = 1) -> dict[str, dict[str, float]]:
    """CLIP4DM (one forward + one backward pass) against leave-one-word-out (n + 1 text
    passes) on the same pairs (images: (N, 3, S, S)): ``pairs/s`` (best of ``repeats`` timed
    calls after a warm-up), ``GFLOP/pair`` (:func:`gflop`) and the ``GFLOP/s`` reached. The
    speed ratio the FLOPs allow is leave-one-word-out's GFLOP/pair over CLIP4DM's."""
    import time

    from .clip4dm import clip4dm, leave_one_word_out

    calls = {"CLIP4DM": lambda: clip4dm(clip, images, captions, cfg, device=device,
                                        batch_size=batch_size or len(captions)),
             "leave-one-word-out": lambda: leave_one_word_out(clip, images, captions, device=device)}
    out: dict[str, dict[str, float]] = {"pairs/s": {}, "GFLOP/pair": {}, "GFLOP/s": {}}
    for name, fn in calls.items():
        fn()  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        out["pairs/s"][name] = len(captions) / best
        out["GFLOP/pair"][name] = gflop(fn) / len(captions)
        out["GFLOP/s"][name] = out["GFLOP/pair"][name] * out["pairs/s"][name]
    return out
