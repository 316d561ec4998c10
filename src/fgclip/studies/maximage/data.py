"""Chapter 1's data: Flickr30K Entities splits read through the real reader, with the
frozen features cached once.

The frozen parts: the CLIP image tower's dense grid (``encode_image_dense``) and the CLIP
text tower's word features, stored ragged (:class:`WordBank`). The heads trained on them
are in :mod:`fgclip.studies.maximage.heads`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ...datasets import FlickrRecord, read_flickr30k_entities_image
from ...datasets._files import read_id_list
from ...methods.maximage import word_token_spans
from ...metrics.pointing import contains_center
from ...models import Clip, encode_image_dense, encode_image_rows
from ...models import tokens as bpe
from ...models.images import load_images  # stretched, not cropped: a map cell covers the same content
from ...models.dense import collect_rows

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


def image_features(clip: Clip, images: np.ndarray, batch_size: int = 256,
                   device: str = "cpu") -> torch.Tensor:
    """Frozen dense grid of uint8 (N, S, S, 3) images, L2-normalised per position:
    (N, D, h, w) on the CPU."""
    def dense(x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"v": torch.nn.functional.normalize(encode_image_dense(clip.model, x).dense.float(), dim=1).cpu()}
    return encode_image_rows(clip, images, dense, batch_size, device)["v"]


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


def flickr_data_root(data_root: str | Path, world, seed: int, sizes: dict[str, int]) -> Path:
    """The folder the chapter reads: ``data_root`` itself when it holds a Flickr30K Entities
    split list for every split of ``sizes`` (real data, or any export), else the toy world
    exported in that format under ``data_root/toy-<digest>/``, keyed by the world's
    configuration, the seed and the sizes (:func:`fgclip.toyworld.cache.toy_export`), so a
    rerun with another seed, size or world gets its own data."""
    from ...toyworld import generate
    from ...toyworld.cache import toy_export
    from ...toyworld.export import export_flickr30k_entities, write_toyworld_meta

    def export(folder: Path) -> None:
        for split, n in sizes.items():
            export_flickr30k_entities(generate(world, n, seed=seed, split=split), folder, split)
        write_toyworld_meta(folder, world, seed)

    return toy_export(data_root, lambda r: all((r / f"{s}.txt").is_file() for s in sizes), export,
                      format="flickr30k_entities", world=world, seed=seed, sizes=sizes)
