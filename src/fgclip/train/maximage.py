"""Chapter 1's pipeline: frozen features cached once, small MaxImage heads trained on them
by bidirectional retrieval, then the pointing game on every phrase with a box.

The frozen parts: the CLIP image tower's dense grid (``encode_image_dense``) and the CLIP
text tower's word features. What retrieval training learns: the two ``MaxImageHeads``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ..datasets import FlickrRecord, read_flickr30k_entities_image
from ..datasets.boxes import scale_boxes
from ..datasets._files import read_id_list
from ..losses.ranking import npair_loss, same_text_mask, triplet_loss
from ..methods.maximage import (PARSE_MODES, MaxImageHeads, pair_scores,
                                word_token_spans)
from ..metrics.pointing import (PhrasePointing, argmax_point, center_point, contains_center,
                               phrase_pointing, pointing_hit, random_points)
from ..models import Clip, encode_image_dense, images_to_tensor
from ..models import tokens as bpe
from ..models.images import load_images  # stretched, not cropped: a map cell covers the same content
from ..models.dense import collect_rows
from ..precision import autocast_context, check_precision
from ..progress import progress

LOSSES = ("npair", "triplet-hardest", "triplet-semi-hard")
WORD_FEATURES = ("embedding", "contextual")


@dataclass
class PhraseItem:
    caption: int  # index into the caption list
    image: int
    words: tuple[int, int]  # [first, last + 1) word positions in the caption
    text: str
    boxes: list[tuple[float, float, float, float]]
    center: bool  # whether a ground-truth box contains the image centre


@dataclass
class Corpus:
    """Captions of a split with their phrases; images referenced by index."""
    image_paths: list[Path]
    image_hw: list[tuple[int, int]]
    captions: list[list[str]]  # words
    caption_image: list[int]
    phrases: list[PhraseItem] = field(default_factory=list)
    objects: list[list[tuple[float, float, float, float]]] = field(default_factory=list)
    # objects[i]: every distinct ground-truth box of image i (the caption-blind object pointer's choices)


def build_corpus(records: list[FlickrRecord]) -> Corpus:
    """Flatten reader records: every sentence a caption, every phrase with boxes a trial.

    Phrases without boxes (box_status other than "box") are not pointing trials; they are
    counted by the caller from the records, never dropped silently here.
    """
    corpus = Corpus([r.image_path for r in records], [(r.height, r.width) for r in records],
                    [], [])
    for i, rec in enumerate(records):
        corpus.objects.append(sorted({tuple(map(float, b)) for bs in rec.annotation.boxes.values()
                                      for b in bs}))
        for sent in rec.sentences:
            c = len(corpus.captions)
            corpus.captions.append(sent.text.split())
            corpus.caption_image.append(i)
            for ph in sent.phrases:
                if ph.box_status != "box":
                    continue
                corpus.phrases.append(PhraseItem(
                    c, i, (ph.first_word, ph.last_word + 1), ph.text, list(ph.boxes),
                    contains_center(ph.boxes, (rec.height, rec.width))))
    return corpus


@torch.no_grad()
def image_features(clip: Clip, images: np.ndarray, batch_size: int = 256,
                   device: str = "cpu") -> torch.Tensor:
    """Frozen dense grid of uint8 (N, S, S, 3) images, L2-normalised per position:
    (N, D, h, w) on the CPU."""
    out = []
    for i in range(0, len(images), batch_size):
        x = images_to_tensor(torch.from_numpy(images[i:i + batch_size]).to(device), clip)
        out.append(torch.nn.functional.normalize(
            encode_image_dense(clip.model, x).dense.float(), dim=1).cpu())
    return torch.cat(out)


def _caption_tokens(clip: Clip, texts: list[str], kind: str, device: str) -> torch.Tensor:
    """Per-token features (b, T, Dt) of captions, T trimmed to the longest caption + 2.

    Trimming the padding changes nothing under CLIP's causal mask (a token never attends
    to later ones), and it halves the cost for short captions.
    """
    model = clip.model
    tokens = clip.tokenizer(texts).to(device)  # (b, context)
    n_tok = int((tokens != 0).sum(dim=1).max())
    tokens = tokens[:, :n_tok]
    x = model.token_embedding(tokens)  # (b, T, width)
    if kind == "contextual":
        mask = model.attn_mask[:n_tok, :n_tok] if model.attn_mask is not None else None
        x = model.transformer(x + model.positional_embedding[:n_tok], attn_mask=mask)
        x = model.ln_final(x) @ model.text_projection  # (b, T, D)
    return x.float().cpu()


TOO_LONG = ("error", "truncate")


def first_positions(lengths: torch.Tensor) -> torch.Tensor:
    """(C,) where each of C consecutive runs of ``lengths`` starts in their concatenation."""
    return torch.cumsum(lengths, 0) - lengths


@dataclass
class WordBank:
    """Frozen word features of many captions, stored ragged: caption c's words are the rows
    ``rows[starts[c] : starts[c] + lengths[c]]``. Captions with equal text share rows, and
    no caption is padded to the longest one, so the memory is (distinct words, Dt) instead
    of (captions, longest caption, Dt): about 4 GB rather than 24 GB for Flickr30K's 149k
    captions at Dt = 512 in float32. A batch is padded only to its own longest caption."""
    rows: torch.Tensor  # (R, Dt) L2-normalised word features
    starts: torch.Tensor  # (C,) int64
    lengths: torch.Tensor  # (C,) int64: words with features (a truncated caption has fewer)

    def __post_init__(self) -> None:
        if not (self.starts.shape == self.lengths.shape and self.starts.ndim == 1 and self.rows.ndim == 2):
            raise ValueError(f"WordBank needs rows (R, Dt), starts (C,), lengths (C,); got "
                             f"{tuple(self.rows.shape)}, {tuple(self.starts.shape)}, {tuple(self.lengths.shape)}")

    @classmethod
    def from_dense(cls, words: torch.Tensor, mask: torch.Tensor) -> "WordBank":
        """From padded (C, L, Dt) features and their (C, L) mask (valid words first)."""
        lengths = mask.sum(dim=1).long()
        return cls(words[mask], first_positions(lengths), lengths)

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def dim(self) -> int:
        return self.rows.shape[1]

    def __getitem__(self, captions) -> "WordBank":
        """The bank of some captions (the rows stay shared)."""
        idx = torch.as_tensor(captions, dtype=torch.long)
        return WordBank(self.rows, self.starts[idx], self.lengths[idx])

    def caption(self, c: int) -> torch.Tensor:
        """(n_c, Dt) the word features of caption c."""
        s = int(self.starts[c])
        return self.rows[s:s + int(self.lengths[c])]

    def words_in_order(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W,) caption and (W,) row of every word of every caption, caption by caption."""
        caption = torch.repeat_interleave(torch.arange(len(self)), self.lengths)
        first = first_positions(self.lengths)  # position of each caption's first word in the order
        return caption, self.starts[caption] + torch.arange(len(caption)) - first[caption]

    def padded(self, captions) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L_b, Dt) features and (B, L_b) mask of a batch, L_b its longest caption."""
        idx = torch.as_tensor(captions, dtype=torch.long)
        n = self.lengths[idx]
        mask = torch.arange(int(n.max()))[None] < n[:, None]  # (B, L_b)
        at = (self.starts[idx][:, None] + torch.arange(mask.shape[1])[None]).clamp_max(len(self.rows) - 1)
        return self.rows[at] * mask[..., None], mask


@torch.no_grad()
def word_features(clip: Clip, captions: list[list[str]], kind: str = "embedding",
                  batch_size: int = 512, device: str = "cpu", too_long: str = "error",
                  ragged: bool = False) -> tuple[torch.Tensor, torch.Tensor] | WordBank:
    """Frozen per-word features (N, L, Dt) and mask (N, L), L = the longest caption; or,
    with ``ragged=True``, a :class:`WordBank` (no padding: what the chapter stores).

    ``"embedding"``: the CLIP token-embedding rows (context-free word vectors).
    ``"contextual"``: the text transformer's output after ln_final and the text projection
    (each token sees the words before it: CLIP's causal mask). A word split by the BPE is
    the mean of its tokens (:func:`fgclip.models.tokens.average_spans`); vectors are L2-normalised. Each distinct
    caption is encoded once (toy captions repeat a lot). A caption longer than the text
    context raises (``too_long="error"``) or keeps only the words that fit
    (``"truncate"``: the rest get mask False; count them with ``mask.sum(1) < len``).
    """
    if kind not in WORD_FEATURES:
        raise ValueError(f"kind must be one of {WORD_FEATURES}, got {kind!r}")
    if too_long not in TOO_LONG:
        raise ValueError(f"too_long must be one of {TOO_LONG}, got {too_long!r}")
    texts = [" ".join(c) for c in captions]
    unique = sorted(set(texts))
    row = {t: k for k, t in enumerate(unique)}
    per_unique = []
    for s in range(0, len(unique), batch_size):
        chunk = unique[s:s + batch_size]
        x = _caption_tokens(clip, chunk, kind, device)
        for k, text in enumerate(chunk):
            spans = word_token_spans(clip.tokenizer, text.split())
            fit = [sp for sp in spans if sp[1] < clip.model.context_length]  # room for the end token
            if len(fit) < len(spans) and too_long == "error":
                raise ValueError(f"caption {text!r} is longer than the text context "
                                 "(pass too_long='truncate' to keep the words that fit)")
            if not fit:
                raise ValueError(f"not one word of caption {text!r} fits the text context")
            per_unique.append(bpe.average_spans(x[k], fit).float().cpu())  # (n_kept_words, Dt)
    n_rows = torch.tensor([len(w) for w in per_unique])
    pick = torch.tensor([row[t] for t in texts])
    bank = WordBank(torch.nn.functional.normalize(torch.cat(per_unique), dim=1), first_positions(n_rows)[pick],
                    n_rows[pick])
    return bank if ragged else bank.padded(range(len(captions)))


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one head-training run (frozen: an arm is keyed by its config)."""
    loss: str = "npair"
    aggregator: str = "maximage"
    epochs: int = 8
    batch_size: int = 64
    lr: float = 2e-3
    embed_dim: int = 64
    temperature: float = 0.1  # N-Pair on cosine scores
    margin: float = 0.2  # triplet hinge
    score: str = "cosine"  # "cosine" (normalised v, t) or "dot" (the paper's Eq. 1)
    mask_same_text: bool = False  # drop same-text false negatives from the loss (needs caption_text)
    steps: int | None = None  # total optimiser steps; None: `epochs` passes over the images
    seed: int = 0
    device: str = "cpu"
    precision: str = "fp32"  # "bf16": forward and loss under bf16 autocast (fgclip.precision)


def make_heads(image_dim: int, word_dim: int, embed_dim: int, seed: int,
               score: str = "cosine") -> MaxImageHeads:
    """Heads at their seeded random initialisation (the "untrained model" baseline)."""
    torch.manual_seed(seed)
    return MaxImageHeads(image_dim, word_dim, embed_dim, score)


def encode(heads: MaxImageHeads, img: torch.Tensor, words: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """v (B, E, h, w) and t (B, L, E) in the heads' score geometry (cosine: unit norm, so
    every m_{r,c,d} lies in [-1, 1]; dot: raw, the paper's Eq. 1)."""
    return heads.image_vectors(img), heads.word_vectors(words)


def _loss(scores: torch.Tensor, cfg: TrainConfig, same: torch.Tensor | None = None
          ) -> torch.Tensor:
    if cfg.loss == "npair":
        return npair_loss(scores, cfg.temperature, same)
    if cfg.loss.startswith("triplet-"):
        return triplet_loss(scores, cfg.margin, cfg.loss.removeprefix("triplet-"), same)
    raise ValueError(f"loss must be one of {LOSSES}, got {cfg.loss!r}")


def train_heads(img: torch.Tensor, words: WordBank | torch.Tensor, mask: torch.Tensor | None,
                caption_image: list[int], cfg: TrainConfig,
                caption_text: list[int] | None = None) -> tuple[MaxImageHeads, list[float]]:
    """Bidirectional retrieval training of the heads on cached features.

    Each epoch visits every image once in a seeded random order with one of its captions
    drawn at random, so a batch never holds two positives for one image. With
    ``cfg.steps`` the passes repeat until that many optimiser steps are taken (equal
    steps across batch sizes). ``caption_text``: one id per caption, equal for equal texts;
    with ``cfg.mask_same_text`` a batch pair with the same text is no negative
    (:func:`fgclip.losses.ranking.same_text_mask`). Returns the heads and the mean loss
    per pass. ``words``: a :class:`WordBank` (``mask`` None) or padded (C, L, Dt) features
    with their (C, L) mask.
    """
    bank = words if isinstance(words, WordBank) else WordBank.from_dense(words, mask)
    if cfg.loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {cfg.loss!r}")
    if cfg.mask_same_text and caption_text is None:
        raise ValueError("mask_same_text=True needs caption_text (one text id per caption)")
    if cfg.steps is not None and cfg.steps < 1:
        raise ValueError(f"steps must be >= 1 or None, got {cfg.steps}")
    device = torch.device(cfg.device)
    check_precision(cfg.precision)  # before any work
    heads = make_heads(img.shape[1], bank.dim, cfg.embed_dim, cfg.seed,
                       cfg.score).to(device)
    text_ids = torch.as_tensor(caption_text) if cfg.mask_same_text else None
    opt = torch.optim.AdamW(heads.parameters(), lr=cfg.lr, fused=True)  # one kernel, no per-tensor loop
    rng = np.random.default_rng(cfg.seed)
    by_image: dict[int, list[int]] = {}
    for c, i in enumerate(caption_image):
        by_image.setdefault(i, []).append(c)
    images = np.array(sorted(by_image))
    per_pass = sum(1 for s in range(0, len(images) - 1, cfg.batch_size)
                   if len(images[s:s + cfg.batch_size]) >= 2)
    if per_pass == 0:
        raise ValueError("training needs at least two images")
    passes = cfg.epochs if cfg.steps is None else -(-cfg.steps // per_pass)
    budget = passes * per_pass if cfg.steps is None else cfg.steps
    history = []
    for _ in progress(range(passes), desc=f"{cfg.loss}/{cfg.aggregator}", leave=False):
        order = rng.permutation(images)
        caps = np.array([rng.choice(by_image[i]) for i in order])
        losses = []
        for s in range(0, len(order) - 1, cfg.batch_size):
            bi, bc = order[s:s + cfg.batch_size], caps[s:s + cfg.batch_size]
            if len(bi) < 2 or budget == 0:
                continue  # a last batch of one image has no negative
            budget -= 1
            same = same_text_mask(text_ids[bc]).to(device) if text_ids is not None else None
            t_b, m_b = bank.padded(bc)  # (B, L_b, Dt), padded to this batch's longest caption
            with autocast_context(device, cfg.precision):
                v, t = encode(heads, img[bi].to(device), t_b.to(device))
                loss = _loss(pair_scores(v, t, m_b.to(device), cfg.aggregator), cfg, same)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        history.append(torch.stack(losses).float().mean().item())  # one host sync per epoch
    return heads.eval(), history


@torch.no_grad()
def project_images(heads: MaxImageHeads, img: torch.Tensor, batch_size: int = 512
                   ) -> torch.Tensor:
    """v for every cached image: (N, Di, h, w) -> (N, E, h, w) in the heads' score geometry."""
    return torch.cat([heads.image_vectors(img[s:s + batch_size])
                      for s in range(0, len(img), batch_size)])


@torch.no_grad()
def phrase_heats(heads: MaxImageHeads, v: torch.Tensor, words: WordBank, corpus: Corpus,
                 mode: str = "vector") -> torch.Tensor:
    """Every phrase's map (K, h, w) at once, equal to :func:`phrase_map` phrase by phrase.

    vector: <v_i, f_text(mean_w x_w)>; maps: mean_w z(<v_i, f_text(x_w)>), z standardising
    each word map over positions (a deviation: the paper averages raw maps).
    """
    if mode not in PARSE_MODES:
        raise ValueError(f"mode must be one of {PARSE_MODES}, got {mode!r}")
    phrases = corpus.phrases
    n_max = max(b - a for a, b in (ph.words for ph in phrases))
    feats = torch.zeros(len(phrases), n_max, words.dim)  # (K, n, Dt)
    keep = torch.zeros(len(phrases), n_max, dtype=torch.bool)
    for k, ph in enumerate(phrases):
        a, b = ph.words
        feats[k, :b - a], keep[k, :b - a] = words.caption(ph.caption)[a:b], True
    vi = v[torch.tensor([ph.image for ph in phrases])]  # (K, E, h, w)
    if mode == "vector":
        mean = feats.sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (K, Dt)
        return torch.einsum("kehw,ke->khw", vi, heads.encode_words(mean))
    maps = torch.einsum("kehw,kne->knhw", vi, heads.encode_words(feats)).flatten(2)
    z = (maps - maps.mean(dim=2, keepdim=True)) / maps.std(dim=2, keepdim=True).clamp_min(1e-6)
    z = (z * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (K, h*w)
    return z.view(len(phrases), *v.shape[2:])


@torch.no_grad()
def phrase_points(heads: MaxImageHeads, v: torch.Tensor, words: WordBank,
                  corpus: Corpus, mode: str = "vector") -> list[tuple[float, float]]:
    """Argmax point of every phrase's map (parse ``mode``), in image pixels; v from
    :func:`project_images`."""
    heats = phrase_heats(heads, v, words, corpus, mode)
    return [argmax_point(h, corpus.image_hw[ph.image]) for h, ph in zip(heats, corpus.phrases)]


@torch.no_grad()
def caption_word_maps(heads: MaxImageHeads, v: torch.Tensor, words: WordBank,
                      image: int, caption: int, n_words: int) -> torch.Tensor:
    """Every word's map of one caption on one image: (n_words, h, w) scores m_{:,:,d}."""
    t = heads.word_vectors(words.caption(caption)[:n_words])
    return torch.einsum("ehw,le->lhw", v[image], t)


def word_boxes(corpus: Corpus, caption: int, n_words: int,
               to_hw: tuple[int, int] | None = None) -> list[list]:
    """Per word of a caption, the boxes of the phrase it belongs to ([] outside phrases), in
    the original image's pixels, or in those of the image resized to ``to_hw = (H, W)``
    (the stretched array a figure draws on)."""
    boxes: list[list] = [[] for _ in range(n_words)]
    hw = corpus.image_hw[corpus.caption_image[caption]]
    for ph in corpus.phrases:
        if ph.caption == caption:
            for w in range(*ph.words):
                if w < n_words:
                    boxes[w] = list(ph.boxes) if to_hw is None else scale_boxes(ph.boxes, hw, to_hw)
    return boxes


def two_object_pairs(corpus: Corpus) -> list[tuple[int, int]]:
    """Pairs (a, b) of phrase indices from one caption whose boxes differ: the captions that
    name two different objects of their image, for the token-selectivity test."""
    by_caption: dict[int, list[int]] = {}
    for k, ph in enumerate(corpus.phrases):
        by_caption.setdefault(ph.caption, []).append(k)
    pairs = []
    for ks in by_caption.values():
        for x in range(len(ks)):
            for y in range(x + 1, len(ks)):
                if corpus.phrases[ks[x]].boxes != corpus.phrases[ks[y]].boxes:
                    pairs.append((ks[x], ks[y]))
    return pairs


@torch.no_grad()
def head_word_points(heads: MaxImageHeads, v: torch.Tensor, words: WordBank,
                     corpus: Corpus, phrase_ids: list[int]) -> dict[int, tuple[float, float]]:
    """Argmax of the map of each phrase's last word (its head noun: the shape name)."""
    out = {}
    for k in phrase_ids:
        ph = corpus.phrases[k]
        heat = caption_word_maps(heads, v, words, ph.image, ph.caption, ph.words[1])[-1]
        out[k] = argmax_point(heat, corpus.image_hw[ph.image])
    return out


def selectivity(points: dict[int, tuple[float, float]], pairs: list[tuple[int, int]],
                corpus: Corpus) -> dict[str, float]:
    """Token selectivity over two-object captions.

    For a pair (a, b): own_a = hit(p_a, B_a), other_a = hit(p_a, B_b) and not own_a.
    Returns the share of pairs where both words land on their own objects ("both_own"),
    where they swap ("swapped": each on the other's object), and per word the rates of
    landing on its own ("own") and on the other object ("other").
    """
    if not pairs:
        raise ValueError("no caption names two different objects: selectivity is undefined")
    both, swapped, own, other = [], [], [], []
    for a, b in pairs:
        hw = corpus.image_hw[corpus.phrases[a].image]
        ba, bb = corpus.phrases[a].boxes, corpus.phrases[b].boxes
        oa, ob = pointing_hit(points[a], ba, hw), pointing_hit(points[b], bb, hw)
        xa = not oa and pointing_hit(points[a], bb, hw)
        xb = not ob and pointing_hit(points[b], ba, hw)
        both.append(oa and ob)
        swapped.append(xa and xb)
        own += [oa, ob]
        other += [xa, xb]
    return {"n_pairs": len(pairs), "both_own": float(np.mean(both)),
            "swapped": float(np.mean(swapped)), "own": float(np.mean(own)),
            "other": float(np.mean(other))}


@dataclass
class Split:
    """One split read through the Flickr30K Entities reader, with its frozen features."""
    corpus: Corpus
    images: np.ndarray  # (N, S, S, 3) uint8 at the model's input size
    img: torch.Tensor  # (N, D, h, w) frozen dense features
    words: WordBank  # frozen word features of the C captions, ragged
    text_ids: list[int] = field(default_factory=list)  # per caption, equal for equal (lowercased) texts
    n_truncated: int = 0  # captions cut to the text context
    n_dropped: int = 0  # phrases lost with the cut words (not pointing trials)


def text_ids(captions: list[list[str]]) -> list[int]:
    """One id per caption, equal exactly when the lowercased texts are equal."""
    ids: dict[str, int] = {}
    return [ids.setdefault(" ".join(c).lower(), len(ids)) for c in captions]


def load_split(clip: Clip, root: str | Path, split: str, n_images: int,
               word_kind: str = "embedding", device: str = "cpu",
               too_long: str = "truncate", keep_images: bool = True,
               chunk: int = 512) -> Split:
    """Read the first ``n_images`` of ``<root>/<split>.txt`` and compute frozen features once.

    Captions longer than the text context are truncated (or raise, ``too_long="error"``);
    phrases reaching past the cut are dropped and counted in ``n_dropped``. Images are
    decoded and encoded ``chunk`` at a time; their pixel arrays are kept only with
    ``keep_images`` (for the figures; 4.5 GB for Flickr30K's 29,783 training images at
    224 px), else ``images`` is an (N, 0, 0, 3) placeholder.
    """
    ids = read_id_list(Path(root) / f"{split}.txt", "split list")[:n_images]
    records = [read_flickr30k_entities_image(root, i) for i in ids]
    if not records:
        raise ValueError(f"split {split!r} of {root} lists no image")
    corpus = build_corpus(records)

    def batches():
        for s in range(0, len(corpus.image_paths), chunk):
            paths = corpus.image_paths[s:s + chunk]
            batch = load_images(paths, clip.image_size, geometry="resize").pixels  # (b, S, S, 3)
            yield {"img": image_features(clip, batch, device=device),
                   "pixels": torch.from_numpy(batch if keep_images else np.ascontiguousarray(batch[:, :0, :0]))}

    out = collect_rows(len(corpus.image_paths), batches())
    img, images = out["img"], out["pixels"].numpy()
    words = word_features(clip, corpus.captions, word_kind, device=device, too_long=too_long,
                          ragged=True)
    kept = words.lengths.tolist()  # words with features per caption
    n_phrases = len(corpus.phrases)
    corpus.phrases = [ph for ph in corpus.phrases if ph.words[1] <= kept[ph.caption]]
    n_trunc = sum(k < len(c) for k, c in zip(kept, corpus.captions))
    return Split(corpus, images, img, words, text_ids(corpus.captions), n_trunc,
                 n_phrases - len(corpus.phrases))


def subset_split(data: Split, images: list[int]) -> Split:
    """The split restricted to some of its images (their captions and phrases, re-indexed):
    how the chapter carves a validation split out of the training images."""
    new = {i: k for k, i in enumerate(images)}
    c = data.corpus
    caps = [j for j, i in enumerate(c.caption_image) if i in new]
    cap_new = {j: k for k, j in enumerate(caps)}
    corpus = Corpus([c.image_paths[i] for i in images], [c.image_hw[i] for i in images],
                    [c.captions[j] for j in caps], [new[c.caption_image[j]] for j in caps],
                    [replace(ph, caption=cap_new[ph.caption], image=new[ph.image])
                     for ph in c.phrases if ph.image in new],
                    [c.objects[i] for i in images] if c.objects else [])
    idx = torch.tensor(images)
    return Split(corpus, data.images[images], data.img[idx], data.words[caps],
                 [data.text_ids[j] for j in caps] if data.text_ids else text_ids(corpus.captions))


def evaluate_pointing(heads: MaxImageHeads, data: Split, modes: tuple[str, ...] = ("vector",),
                      min_box_area: float = 0.05, area_rule: str = "union"
                      ) -> dict[str, PhrasePointing]:
    """Per-phrase pointing game of every parse mode on a split's phrases with boxes."""
    v = project_images(heads, data.img)
    hws = [data.corpus.image_hw[p.image] for p in data.corpus.phrases]
    boxes = [p.boxes for p in data.corpus.phrases]
    return {m: phrase_pointing(phrase_points(heads, v, data.words, data.corpus, m), boxes, hws,
                               min_box_area, area_rule=area_rule) for m in modes}


def stratum_masks(result: PhrasePointing, corpus: Corpus) -> dict[str, np.ndarray]:
    """Boolean masks over a result's evaluated phrases: "all", "center" (a box contains the
    image centre) and "non-center"; aligned with ``result.evaluated_hits()``."""
    center = np.array([ph.center for ph, h in zip(corpus.phrases, result.hits) if h is not None])
    return {"all": np.ones_like(center), "center": center, "non-center": ~center}


def baseline_results(data: Split, seed: int, min_box_area: float = 0.05,
                     area_rule: str = "union") -> dict[str, PhrasePointing]:
    """The centre-point and uniform-random-point baselines on a split's phrases."""
    hws = [data.corpus.image_hw[p.image] for p in data.corpus.phrases]
    boxes = [p.boxes for p in data.corpus.phrases]
    return {"center": phrase_pointing([center_point(hw) for hw in hws], boxes, hws, min_box_area,
                                      area_rule=area_rule),
            "random": phrase_pointing(random_points(hws, seed), boxes, hws, min_box_area,
                                      area_rule=area_rule)}


def flickr_data_root(data_root: str | Path, world, seed: int, sizes: dict[str, int]) -> Path:
    """The folder the chapter reads: ``data_root`` itself when it holds a Flickr30K Entities
    split list for every split of ``sizes`` (real data, or any export), else the toy world
    exported in that format under ``data_root/toy-<digest>/``, keyed by the world's
    configuration, the seed and the sizes (:func:`fgclip.toyworld.cache.toy_export`), so a
    rerun with another seed, size or world gets its own data."""
    from ..toyworld import generate
    from ..toyworld.cache import toy_export
    from ..toyworld.export import export_flickr30k_entities, write_toyworld_meta

    def export(folder: Path) -> None:
        for split, n in sizes.items():
            export_flickr30k_entities(generate(world, n, seed=seed, split=split), folder, split)
        write_toyworld_meta(folder, world, seed)

    return toy_export(data_root, lambda r: all((r / f"{s}.txt").is_file() for s in sizes), export,
                      format="flickr30k_entities", world=world, seed=seed, sizes=sizes)

