"""FOR's experimental protocol: rotated novel folds, seeds, held-out choices, planted teachers.

Every drawn category is novel in exactly one of F disjoint folds (:func:`category_folds`),
and every arm is trained under S seeds per fold, so a category c gets one novel score per
seed, a[s, c] = AP of c when its fold is held out (:func:`novel_matrix`); arms are then
compared with :func:`fgclip.verdicts.compare` paired per (category, seed).

Choices are made on a validation part of the *training* images with base labels only:
Cluster-CLIP's k (:func:`choose_k`, base-category mAP) and the pseudo-label threshold
(:func:`fgclip.losses.matching.choose_threshold`). The paper's fixed threshold was set for
an ImageNet-21K vocabulary (V_ref = 21,843 names); a uniform softmax gives each name 1/V,
so the same acceptance scale on a V-name vocabulary is (:func:`vocabulary_scaled_tau`)

    tau_V = tau_paper * V_ref / V .
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ...losses.matching import choose_threshold, label_f1, log_grid, teacher_scores
from ...methods.cluster_clip import cluster_clip_embeddings
from ...metrics.object_retrieval import per_category_ap
from .data import ForData
from .head import label_matrix, targets_from

IMAGENET21K_NAMES = 21_843


def category_folds(categories: Sequence[str], n_folds: int, seed: int) -> list[list[str]]:
    """Seeded partition of the categories into n_folds disjoint folds covering all of them."""
    if not 2 <= n_folds <= len(categories):
        raise ValueError(f"n_folds must be in 2..{len(categories)}, got {n_folds}")
    order = np.random.default_rng(seed).permutation(len(categories))
    return [sorted(categories[i] for i in part) for part in np.array_split(order, n_folds)]


def tau_selection(fixed_tau: float, vocab_size: int) -> list[dict]:
    """Rows of the "what was chosen on which split" table for the two thresholds nobody fits here."""
    return [{"hyperparameter": "τ, paper's fixed value", "candidates": "-", "chosen": f"{fixed_tau:g}",
             "criterion": "set by the paper", "split": "unknown (the paper does not say)"},
            {"hyperparameter": "τ scaled to V", "candidates": "-",
             "chosen": f"{vocabulary_scaled_tau(fixed_tau, vocab_size):.3g}",
             "criterion": f"{fixed_tau:g} x {IMAGENET21K_NAMES} / {vocab_size}", "split": "none (derived)"}]


def tau_sentence(acceptance_table: pd.DataFrame, vocab_size: int, facts: dict) -> str:
    """Names accepted per image, and their precision, under each threshold (rows of
    :func:`acceptance` averaged over folds, indexed by the threshold's name)."""
    def part(name: str) -> str:
        row = acceptance_table.loc[name]
        return f"{name} (τ = {row['tau']:.3g}) accepts {row['accepted/image']:.1f} of {vocab_size} names per " \
               f"image at precision {row['precision']:.3f}"
    fixed = acceptance_table.loc["fixed τ (paper)", "share of vocabulary"] >= 0.5
    return ("; ".join(part(n) for n in acceptance_table.index) + f"; precision is measured against "
            f"{facts['precision_against']}." + (" A threshold that accepts most of the vocabulary cannot decide "
            "anything, so the paper's fixed τ was not trained here." if fixed else ""))


def vocabulary_scaled_tau(tau: float, vocab_size: int, reference_size: int = IMAGENET21K_NAMES) -> float:
    """tau_V = tau * V_ref / V: the paper's threshold at the same multiple of 1/V."""
    if vocab_size < 1 or tau <= 0:
        raise ValueError(f"need vocab_size >= 1 and tau > 0, got {vocab_size}, {tau}")
    return min(tau * reference_size / vocab_size, 0.999)


def planted_labels(truth: torch.Tensor) -> list[torch.Tensor]:
    """The planted teacher: every image's correct names, from the (I, V) complete labels."""
    return [row.nonzero().flatten() for row in truth]


def oracle_labels(scores: torch.Tensor, truth: torch.Tensor, tau: float) -> list[torch.Tensor]:
    """The teacher's accepted names (score > tau) with every wrong one removed: (I, V), (I, V) -> per image."""
    return [row.gt(tau).nonzero().flatten() for row in scores * truth]


def teacher_examples(vocab: Sequence[str], arms: dict[str, Sequence[torch.Tensor]], n: int = 4) -> pd.DataFrame:
    """The names each pseudo-label arm gives the first ``n`` images: one row per image."""
    return pd.DataFrame({arm: [", ".join(vocab[int(i)] for i in labels[j]) or "-" for j in range(n)]
                         for arm, labels in arms.items()}).rename_axis("fit image")


def global_slot_share(text: torch.Tensor, embeddings: torch.Tensor) -> float:
    """Share of (query, image) pairs whose best slot is slot 0 (CLIP's global embedding, ties
    included): text (Q, D), embeddings (I, S, D) with the global embedding first."""
    if embeddings.ndim != 3 or embeddings.shape[1] < 2:
        raise ValueError(f"embeddings must be (I, S >= 2, D), got {tuple(embeddings.shape)}")
    sims = torch.einsum("isd,qd->iqs", embeddings.float(), text.float())  # (I, Q, S)
    return float((sims[..., 0] >= sims[..., 1:].amax(-1)).float().mean())


def global_slot_diagnostic(text: torch.Tensor, embeddings: torch.Tensor, relevant: torch.Tensor) -> dict:
    """Can "FOR + global slot" rank differently from CLIP global? text (Q, D), embeddings (I, S, D)
    with the global embedding first (every slot L2-normalised, as CLIP scores by cosine), relevant
    (Q, I). Returns the share of (query, image) pairs the global slot wins (ties included), the
    pairs a learned slot wins, the queries whose order of the gallery changes and those whose AP
    changes under any convention, and the mean cosine of the global slot and of the best learned
    slot with the queries."""
    norms = embeddings.float().norm(dim=-1)
    if embeddings.ndim == 3 and not torch.allclose(norms, torch.ones_like(norms), atol=1e-3):
        raise ValueError(f"embeddings must be L2-normalised per slot (norms {norms.min():.3g}..{norms.max():.3g}): "
                         "a longer global embedding would win the max by its length alone")
    share = global_slot_share(text, embeddings)  # checks the shape
    sims = torch.einsum("isd,qd->qis", embeddings.float(), text.float())  # (Q, I, S)
    glob, learned = sims[..., 0], sims[..., 1:].amax(-1)
    best = torch.maximum(glob, learned)
    reordered = (glob.argsort(dim=1, stable=True) != best.argsort(dim=1, stable=True)).any(1)
    alone, both = per_category_ap(text, embeddings[:, :1], relevant), per_category_ap(text, embeddings, relevant)
    changed = torch.stack([(alone[m] - both[m]).nan_to_num().abs() > 0 for m in alone]).any(0)
    return {"share": share, "learned_wins": int((learned > glob).sum()), "pairs": int(glob.numel()),
            "queries": int(glob.shape[0]), "queries_reordered": int(reordered.sum()),
            "queries_ap_changed": int(changed.sum()), "cos_global": float(glob.mean()),
            "cos_best_learned": float(learned.mean())}


def acceptance(scores: torch.Tensor, truth: torch.Tensor, tau: float) -> dict[str, float]:
    """Names accepted per image, their precision, and the accepted share of the vocabulary."""
    q = label_f1(scores, truth, tau)
    return {"tau": tau, "accepted/image": q["accepted_per_image"],
            "share of vocabulary": q["accepted_per_image"] / scores.shape[1],
            "precision": q["precision"], "recall": q["recall"]}


def choose_k(dense: torch.Tensor, pooled: torch.Tensor, text: torch.Tensor, relevant: torch.Tensor,
             candidates: Sequence[int], seed: int) -> tuple[int, dict[int, float]]:
    """Cluster-CLIP's k with the best mean full AP over the given (base) queries.

    dense (I, D, h, w), pooled (I, D) of validation images; text (Q, D); relevant (Q, I).
    Ties go to the smaller k (fewer stored vectors).
    """
    if not len(candidates):
        raise ValueError("candidates is empty")
    table = {}
    for k in candidates:
        emb = cluster_clip_embeddings(dense, pooled, k, seed)
        table[int(k)] = float(np.nanmean(per_category_ap(text, emb, relevant)["AP"].numpy()))
    best = max(table, key=lambda k: (table[k], -k))
    return best, table


def score_rows(arm: str, fold: int, seed: int, text: torch.Tensor, embeddings: torch.Tensor,
               relevant: torch.Tensor, categories: Sequence[str], novel: Sequence[str]) -> list[dict]:
    """One row per category: its AP under each convention and its role in this fold."""
    ap = per_category_ap(text, embeddings, relevant)
    return [{"arm": arm, "fold": fold, "seed": seed, "category": c,
             "role": "novel" if c in novel else "base", **{m: float(v[i]) for m, v in ap.items()}}
            for i, c in enumerate(categories)]


def novel_matrix(rows: pd.DataFrame, arm: str, metric: str, seeds: Sequence[int],
                 categories: Sequence[str], role: str = "novel") -> np.ndarray:
    """a[s, c]: ``metric`` of category c in the fold where it is novel, seed s -> (S, C).

    role="base": the mean over the folds where c is base. Categories never in that role,
    or without a relevant image, are NaN.
    """
    sel = rows[(rows["arm"] == arm) & (rows["role"] == role)]
    if sel.empty:
        raise ValueError(f"no {role} rows for arm {arm!r}")
    table = sel.pivot_table(index="seed", columns="category", values=metric, aggfunc="mean")
    return table.reindex(index=list(seeds), columns=list(categories)).to_numpy(dtype=np.float64)


def fold_units(folds: Sequence[Sequence[str]], categories: Sequence[str], role: str = "novel",
               ) -> tuple[list[tuple[int, str]], list[int]]:
    """The scored units of one role and their clusters: (fold, category) pairs and the fold of each.

    role="novel": each category once, in the fold that holds it out; role="base": every
    (fold, category) where the category is base. The categories of one fold share the head
    trained on that fold, so the fold (its head) is the cluster the bootstrap resamples.
    """
    if role not in ("novel", "base"):
        raise ValueError(f"role must be 'novel' or 'base', got {role!r}")
    units = [(f, c) for f, fold in enumerate(folds) for c in categories if (c in fold) == (role == "novel")]
    return units, [f for f, _ in units]


def unit_matrix(rows: pd.DataFrame, arm: str, metric: str, seeds: Sequence[int],
                units: Sequence[tuple[int, str]]) -> np.ndarray:
    """a[s, u]: ``metric`` of unit u = (fold, category) under seed s -> (S, U); NaN where unscored."""
    sel = rows[rows["arm"] == arm]
    if sel.empty:
        raise ValueError(f"no rows for arm {arm!r}")
    absent = sorted(set(seeds) - set(sel["seed"]))
    if absent:
        raise ValueError(f"arm {arm!r} has no rows for seed(s) {absent} (its seeds: {sorted(set(sel['seed']))})")
    table = sel.pivot_table(index="seed", columns=["fold", "category"], values=metric, aggfunc="mean")
    return table.reindex(index=list(seeds), columns=pd.MultiIndex.from_tuples(list(units))).to_numpy(np.float64)


def teacher_arms(scores: torch.Tensor, scores_removed: torch.Tensor, truth: torch.Tensor,
                 taus: dict[str, float], vocab_text: torch.Tensor, keep: torch.Tensor,
                 ) -> dict[str, tuple[list[torch.Tensor], torch.Tensor]]:
    """The pseudo-label arms of one fold: name -> (targets per image, the text they index).

    scores (I, V) of the teacher over the vocabulary; scores_removed (I, V') over the
    vocabulary without the fold's novel names (``keep``, (V,) bool); truth (I, V) complete
    labels. taus: "held-out", "held-out, names removed", "scaled" and, where that arm can
    decide anything, "fixed". Arms: FOR (held-out tau), the tau variants, novel names
    removed, wrong labels removed (oracle), and planted correct labels (the positive control).
    """
    pick = lambda s, t: [row.gt(t).nonzero().flatten() for row in s]  # noqa: E731
    planted = planted_labels(truth)
    arms = {"FOR": (pick(scores, taus["held-out"]), vocab_text)}
    if "fixed" in taus:
        arms["FOR, fixed τ (paper)"] = (pick(scores, taus["fixed"]), vocab_text)
    arms.update({
        "FOR, τ scaled to V": (pick(scores, taus["scaled"]), vocab_text),
        "FOR, novel names removed": (pick(scores_removed, taus["held-out, names removed"]), vocab_text[keep]),
        "FOR, wrong labels removed (oracle)": (oracle_labels(scores, truth, taus["held-out"]), vocab_text),
        "planted teacher (correct labels)": (planted, vocab_text)})
    return arms


# The arms of the fold loop. Trained arms share one head setting except the paper's head.
GLOBAL, CLUSTER, SUPERVISED, FOR = "CLIP global", "Cluster-CLIP", "supervised only", "FOR"
PAPER, GLOBAL_SLOT, UNTRAINED = "FOR, paper's head (frozen pooling)", "FOR + global slot", "untrained head"
FIXED_TAU, SCALED_TAU, NAMES_REMOVED = "FOR, fixed τ (paper)", "FOR, τ scaled to V", "FOR, novel names removed"
ORACLE, PLANTED = "FOR, wrong labels removed (oracle)", "planted teacher (correct labels)"
# the negative control: supervised only's protocol on two disjoint sets of seeds (side A: the chapter's, then more)
A_A, A_A_B = "supervised only, A/A side A", "supervised only, A/A side B"


@dataclass
class Fold:
    """One novel split: its choices on the validation images and its teacher's labels."""

    index: int
    novel: list[str]
    base: list[str]
    k: int  # Cluster-CLIP's k
    taus: dict[str, float]
    supervised: list[torch.Tensor]  # base-category indices per fit image
    teacher: dict[str, tuple[list[torch.Tensor], torch.Tensor]]  # arm -> (targets, text)
    teacher_scores: torch.Tensor | None = None  # (fit images, V) the Cluster-CLIP teacher's scores
    selection: list[dict] = field(default_factory=list)
    acceptance: list[dict] = field(default_factory=list)


def prepare_fold(data: ForData, index: int, novel: Sequence[str], k_candidates: Sequence[int],
                 fixed_tau: float, seed: int) -> Fold:
    """Choose k and tau on the validation images (base labels only) and build the teacher arms.

    The fixed-tau arm is left out when it accepts at least half of the vocabulary per image:
    such a teacher labels every image with nearly every name, so it cannot decide anything.
    """
    base = [c for c in data.categories if c not in novel]
    bq = torch.tensor([data.categories.index(c) for c in base])
    val = data.val_idx
    val_relevant = label_matrix([data.train_labels[i] & set(base) for i in val], base).T
    k, _ = choose_k(data.train.dense[val], data.train.pooled[val], data.query_text[bq], val_relevant,
                    k_candidates, seed)
    teacher = cluster_clip_embeddings(data.train.dense, data.train.pooled, k, seed)
    keep = torch.tensor([v not in novel for v in data.vocab])  # the vocabulary without the novel names
    scores, scores_rm = (teacher_scores(teacher, t, data.logit_scale)
                         for t in (data.vocab_text, data.vocab_text[keep]))
    kept = [v for v in data.vocab if v not in novel]
    bcols, bcols_rm = ([names.index(c) for c in base if c in names] for names in (data.vocab, kept))
    grid = log_grid(1e-5, 0.5, 15)
    taus = {"held-out": choose_threshold(scores[val][:, bcols], data.truth[val][:, bcols], grid)[0],
            "held-out, names removed": choose_threshold(scores_rm[val][:, bcols_rm],
                                                        data.truth[val][:, bcols], grid)[0],
            "fixed": fixed_tau, "scaled": vocabulary_scaled_tau(fixed_tau, len(data.vocab))}
    fit = data.fit_idx
    acc = [{"fold": index, "τ": name, **acceptance(scores[fit], data.truth[fit], taus[key])}
           for name, key in (("held-out τ", "held-out"), ("fixed τ (paper)", "fixed"), ("τ scaled to V", "scaled"))]
    if acc[1]["share of vocabulary"] >= 0.5:
        del taus["fixed"]
    selection = [{"hyperparameter": f"Cluster-CLIP k (fold {index})", "candidates": str(list(k_candidates)),
                  "chosen": k, "criterion": "base-category mAP", "split": "validation (training images)"},
                 {"hyperparameter": f"τ (fold {index})", "candidates": "15 values 1e-5..0.5",
                  "chosen": f"{taus['held-out']:.2g}", "criterion": "F1 of accepted base labels",
                  "split": "validation (training images)"}]
    sup = targets_from(label_matrix([data.train_labels[i] & set(base) for i in fit], base))
    arms = teacher_arms(scores[fit], scores_rm[fit], data.truth[fit], taus, data.vocab_text, keep)
    return Fold(index, list(novel), base, k, taus, sup, arms, scores[fit], selection, acc)
