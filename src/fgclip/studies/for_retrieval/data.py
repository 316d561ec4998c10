"""Chapter 3's data: the COCO root (or the toy world exported as COCO), its two splits, the
open vocabulary, and every image encoded once by the frozen CLIP (:class:`ForData`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ...datasets import read_coco_split
from ...evaluation import encode_texts
from ...toyworld import ToyWorldConfig, generate
from ...toyworld.cache import toy_export
from ...toyworld.export import export_coco
from .head import FrozenFeatures, encode_frozen, label_matrix

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


def read_splits(root: Path, train_split: str, eval_split: str, n_train: int, n_eval: int) -> tuple[list, list]:
    """The first n_train / n_eval images of each COCO split (pycocotools); too few is an error."""
    out = []
    for split, n, name in ((train_split, n_train, "n_train"), (eval_split, n_eval, "n_eval")):
        records = read_coco_split(root, split, captions=False)[:n]
        if len(records) < n:
            raise ValueError(f"parameter {name!r}: {root} split {split!r} has {len(records)} images, "
                             f"fewer than the {n} asked for")
        out.append(records)
    return out[0], out[1]


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


@dataclass
class ForData:
    """Everything the fold loop reads, computed once from the frozen CLIP."""

    pool: torch.nn.Module  # CLIP's AttentionPool2d
    train: FrozenFeatures  # all training images (fit + validation)
    gallery: FrozenFeatures  # the retrieval gallery
    fit_idx: torch.Tensor  # (I_fit,) training images the heads learn from
    val_idx: torch.Tensor  # (I_val,) training images held out to choose k and tau
    train_labels: list[set[str]]  # category names of each training image
    truth: torch.Tensor  # (I_train, V) bool: vocabulary names in each training image
    relevant: torch.Tensor  # (C, I_gallery) bool
    query_text: torch.Tensor  # (C, D) prompts of the categories
    vocab_text: torch.Tensor  # (V, D) prompts of the open vocabulary
    categories: list[str]
    vocab: list[str]
    logit_scale: float  # lambda


def for_data(clip, train_images: np.ndarray, gallery_images: np.ndarray, train_labels: Sequence[set[str]],
             gallery_labels: Sequence[set[str]], categories: Sequence[str], vocab: Sequence[str], prompt: str,
             holdout_fraction: float, seed: int) -> ForData:
    """Encode both image sets once with the frozen CLIP (:func:`encode_frozen`), the prompts of
    the categories and the vocabulary, and carve a seeded validation part (at least 2 images)
    out of the training images. Labels outside ``categories`` (and ``vocab``) are ignored."""
    if not 0.0 < holdout_fraction < 1.0:
        raise ValueError(f"parameter 'holdout_fraction' must be in (0, 1), got {holdout_fraction}")
    perm = np.random.default_rng(seed).permutation(len(train_images))
    n_val = max(2, round(holdout_fraction * len(perm)))
    if len(perm) - n_val < 2:
        raise ValueError(f"parameter 'holdout_fraction': {holdout_fraction} of {len(perm)} training images "
                         "leaves fewer than 2 to train on")
    cats, names = set(categories), set(vocab)
    return ForData(
        pool=clip.model.visual.attnpool, train=encode_frozen(clip, train_images),
        gallery=encode_frozen(clip, gallery_images),
        fit_idx=torch.as_tensor(np.sort(perm[n_val:])), val_idx=torch.as_tensor(np.sort(perm[:n_val])),
        train_labels=[set(x) & cats for x in train_labels],
        truth=label_matrix([set(x) & names for x in train_labels], vocab),
        relevant=label_matrix([set(x) & cats for x in gallery_labels], categories).T,
        query_text=encode_texts(clip, [prompt.format(c) for c in categories]).cpu(),
        vocab_text=encode_texts(clip, [prompt.format(v) for v in vocab]).cpu(),
        categories=list(categories), vocab=list(vocab), logit_scale=clip.model.logit_scale.exp().item())


def name_encoder(clip, prompt: str, known: dict[str, torch.Tensor]) -> Callable[[str], torch.Tensor]:
    """name -> its prompt's text embedding (D,), from ``known`` or encoded once and kept there."""
    def encode(name: str) -> torch.Tensor:
        if name not in known:
            known[name] = encode_texts(clip, [prompt.format(name)]).cpu()[0]
        return known[name]
    return encode
