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

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..losses.matching import label_f1
from ..methods.cluster_clip import cluster_clip_embeddings
from ..methods.sumclip import PoolMemory, SumClipHead
from ..metrics.object_retrieval import per_category_ap
from ..toyworld import ToyWorldConfig, generate
from ..toyworld.cache import toy_export
from ..toyworld.export import export_coco
from .sumclip import HeadTrainConfig, embed, train_head

IMAGENET21K_NAMES = 21_843
VOCABULARY_SCRIPT = "data_scripts/prepare_imagenet21k_names.py"


def coco_root(data_root: str | Path, splits: dict[str, int], world: ToyWorldConfig, seed: int) -> Path:
    """The COCO root the chapter reads (:func:`fgclip.toyworld.cache.toy_export`).

    ``data_root`` itself when it holds ``annotations/instances_<split>.json`` for every
    split in ``splits`` (split name -> number of images), e.g. a real COCO root; otherwise
    the toy world of ``world`` and ``seed`` exported with those splits and sizes into
    ``data_root/toy-<digest>/``, made once per (world, seed, splits), so another seed or
    size gets its own images instead of reusing (or truncating) an earlier export. A root
    with an ``annotations/`` folder that lacks a split is an error, never written into.
    """
    if len(splits) < 2:
        raise ValueError(f"train_split and eval_split must differ, got {list(splits)}")

    def holds(root: Path) -> bool:
        return all((root / "annotations" / f"instances_{s}.json").is_file() for s in splits)

    def export(folder: Path) -> None:
        for split, n in splits.items():
            export_coco(generate(world, n, seed=seed, split=split), folder, split, world, seed)

    root = Path(data_root)
    if (root / "annotations").is_dir() and not holds(root):  # a dataset, asked for splits it lacks
        have = sorted(p.name for p in (root / "annotations").glob("instances_*.json"))
        raise ValueError(f"parameters 'train_split'/'eval_split': {root} holds {have or 'no instances_*.json'}, "
                         f"not instances_<split>.json for {list(splits)}")
    return toy_export(root, holds, export, world=world, seed=seed, splits=splits)


def open_vocabulary(meta: dict | None, vocabulary_file: str) -> list[str]:
    """The open vocabulary: the toy world's (``meta`` from toyworld.json) or, on real data,
    one name per line of ``vocabulary_file`` (blank lines skipped, nothing appended)."""
    if meta is not None:
        return list(meta["open_vocabulary"])
    path = Path(vocabulary_file) if vocabulary_file else None
    if path is None or not path.is_file():
        got = repr(vocabulary_file) if vocabulary_file else "nothing"
        raise ValueError(f"parameter 'vocabulary_file': real data (no toyworld.json) needs a text file with "
                         f"one open-vocabulary name per line (e.g. ImageNet-21K's class names, written by "
                         f"{VOCABULARY_SCRIPT}); got {got}")
    names = [v.strip() for v in path.read_text().splitlines() if v.strip()]
    if not names:
        raise ValueError(f"parameter 'vocabulary_file': {path} holds no names (one name per line expected)")
    return names


def data_facts(toy: bool, categories: Sequence[str], folds: Sequence[Sequence[str]], vocab: Sequence[str],
               grid: tuple[int, int]) -> dict:
    """What this run's data was, counted from the run (for the closing box and results.json).

    On the toy world the pseudo-label precision is measured against complete labels; on
    real data only against the annotated categories: a vocabulary name that is in the image
    but not annotated counts as wrong, so the precision is a lower bound.
    """
    return {"data": "toy world (complete labels)" if toy else "real (annotated labels only)",
            "n_categories": len(categories), "novel_per_fold": [len(f) for f in folds],
            "novel_in_vocabulary": sum(c in set(vocab) for f in folds for c in f), "vocabulary_size": len(vocab),
            "grid": [int(g) for g in grid],
            "precision_against": "the toy world's complete labels" if toy else "the annotated categories only "
            "(a lower bound: a vocabulary name present in an image but not annotated counts as wrong)"}


def data_sentence(facts: dict) -> str:
    """One closing-box sentence stating :func:`data_facts` (no numbers compared)."""
    (h, w), sizes = facts["grid"], facts["novel_per_fold"]
    split = (f"one novel split of {sizes[0]}" if len(sizes) == 1 else
             f"{len(sizes)} rotated novel folds of {', '.join(map(str, sizes))}")
    return (f"Data: {facts['data']}, {facts['n_categories']} categories, {split}; {facts['novel_in_vocabulary']} "
            f"of the {sum(sizes)} novel names are in the {facts['vocabulary_size']}-name open vocabulary; "
            f"CLIP's last map is {h}x{w}.")


def category_folds(categories: Sequence[str], n_folds: int, seed: int) -> list[list[str]]:
    """Seeded partition of the categories into n_folds disjoint folds covering all of them."""
    if not 2 <= n_folds <= len(categories):
        raise ValueError(f"n_folds must be in 2..{len(categories)}, got {n_folds}")
    order = np.random.default_rng(seed).permutation(len(categories))
    return [sorted(categories[i] for i in part) for part in np.array_split(order, n_folds)]


def vocabulary_scaled_tau(tau: float, vocab_size: int, reference_size: int = IMAGENET21K_NAMES) -> float:
    """tau_V = tau * V_ref / V: the paper's threshold at the same multiple of 1/V."""
    if vocab_size < 1 or tau <= 0:
        raise ValueError(f"need vocab_size >= 1 and tau > 0, got {vocab_size}, {tau}")
    return min(tau * reference_size / vocab_size, 0.999)


def shuffle_targets(targets: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """The same label sets given to other images (a seeded permutation): the negative control."""
    perm = np.random.default_rng(seed).permutation(len(targets))
    return [targets[j] for j in perm]


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


def train_and_embed(pool, memory: PoolMemory, eval_memory: PoolMemory, sup, pl,
                    base_text: torch.Tensor, vocab_text: torch.Tensor, logit_scale: float,
                    seed: int, head_kw: dict, train_kw: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Train one SUM-CLIP head from ``seed`` (L = w_sup L_sup + w_pl L_pl) and embed the gallery.

    pl=None trains supervised only. Returns embeddings (I, N, D) and attention (I, N, 1 + P).
    """
    torch.manual_seed(seed)
    head = SumClipHead(pool, **head_kw).to(memory.mean.device)
    cfg = HeadTrainConfig(seed=seed, w_pl=0.0 if pl is None else train_kw.get("w_pl", 1.0),
                          **{k: v for k, v in train_kw.items() if k != "w_pl"})
    train_head(head, memory, sup, pl if pl is not None else [None] * len(sup),
               base_text, vocab_text, logit_scale, cfg)
    emb, attn = embed(head, eval_memory)
    return emb.cpu(), attn.cpu()


def score_rows(arm: str, fold: int, seed: int, text: torch.Tensor, embeddings: torch.Tensor,
               relevant: torch.Tensor, categories: Sequence[str], novel: Sequence[str]) -> list[dict]:
    """One row per category: its AP under each convention and its role in this fold."""
    ap = per_category_ap(text, embeddings, relevant)
    return [{"arm": arm, "fold": fold, "seed": seed, "category": c,
             "role": "novel" if c in novel else "base", **{m: float(v[i]) for m, v in ap.items()}}
            for i, c in enumerate(categories)]


def novel_matrix(rows: pd.DataFrame, arm: str, metric: str, seeds: Sequence[int],
                 categories: Sequence[str]) -> np.ndarray:
    """a[s, c]: ``metric`` of category c in the fold where it is novel, seed s -> (S, C).

    Categories never novel, or without a relevant image, are NaN.
    """
    sel = rows[(rows["arm"] == arm) & (rows["role"] == "novel")]
    if sel.empty:
        raise ValueError(f"no novel rows for arm {arm!r}")
    table = sel.pivot_table(index="seed", columns="category", values=metric, aggfunc="mean")
    return table.reindex(index=list(seeds), columns=list(categories)).to_numpy(dtype=np.float64)


def teacher_arms(scores: torch.Tensor, scores_removed: torch.Tensor, truth: torch.Tensor,
                 taus: dict[str, float], vocab_text: torch.Tensor, keep: torch.Tensor, seed: int,
                 ) -> dict[str, tuple[list[torch.Tensor], torch.Tensor]]:
    """The pseudo-label arms of one fold: name -> (targets per image, the text they index).

    scores (I, V) of the teacher over the vocabulary; scores_removed (I, V') over the
    vocabulary without the fold's novel names (``keep``, (V,) bool); truth (I, V) complete
    labels. taus: "held-out", "held-out, names removed", "scaled" and, where that arm can
    decide anything, "fixed". Arms: FOR (held-out tau), the tau variants, novel names
    removed, wrong labels removed (oracle), planted correct labels and their seeded shuffle.
    """
    pick = lambda s, t: [row.gt(t).nonzero().flatten() for row in s]  # noqa: E731
    planted = [row.nonzero().flatten() for row in truth]
    arms = {"FOR": (pick(scores, taus["held-out"]), vocab_text)}
    if "fixed" in taus:
        arms["FOR, fixed τ (paper)"] = (pick(scores, taus["fixed"]), vocab_text)
    arms.update({
        "FOR, τ scaled to V": (pick(scores, taus["scaled"]), vocab_text),
        "FOR, novel names removed": (pick(scores_removed, taus["held-out, names removed"]), vocab_text[keep]),
        "FOR, wrong labels removed (oracle)": (pick(scores * truth, taus["held-out"]), vocab_text),
        "planted teacher (correct labels)": (planted, vocab_text),
        "planted teacher, shuffled": (shuffle_targets(planted, seed), vocab_text)})
    return arms
