"""Semantic decoupling and the category-wise scoring head (arXiv 2412.10843, Sec. 3).

Semantic decoupling: for a feature map f (B, D, h, w) and word vectors x_c (C, d_x),

    f~_{c,wh} = P^T tanh((U^T f_wh) ⊙ (V^T x_c)) + b          (low-rank bilinear pooling)
    a_{c,wh}  = softmax_{wh}(w_a^T f~_{c,wh})                  (attention over positions)
    f^v_c     = Σ_{wh} a_{c,wh} f_wh                           (category-specific feature)

Chapter 4 labels these Eq. (eq-decoupling-attention), (eq-decoupling-pooling); f^t_c, the
text feature of category c's learned prompt (Eq. (eq-learned-prompt)), is computed by
``fgclip.models.prompts.PromptLearner``.

Scoring: s_c = cos(f^v_c, f^t_c) / τ with f^t_c the category's text feature, and
p_c = exp(s_c) / Σ_{c'} exp(s_{c'}) (the paper's Eq. 9, softmax over categories) or
p_c = σ(s_c) (per-category sigmoid, the falsification's replacement) or p_c = σ(s_c + β)
with one learnable offset β (a control: the softmax ignores an offset shared by all
categories, a bias-free sigmoid cannot absorb one), or p_c = σ(t cos(f^v_c, f^t_c) + β)
with a learnable scale t (started at SigLIP's t = 10) and offset β (a second control: with
CLIP's frozen 1/τ near 100 a sigmoid saturates, which the shift-invariant softmax does not
feel; this sigmoid picks its own temperature). β starts at -1/τ (bias) or -10 (affine);
:meth:`MultiLabelCLIPHead.calibrate` moves it to logit(π) - mean(s) on the training features
(π the prevalence of the known training labels, so p starts near it), and
``fgclip.studies.decoupling.heads.fit`` trains these scalars with their own learning rate, so the
controls can actually reach a calibrated threshold within a short budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

SCORINGS = ("softmax", "sigmoid", "sigmoid+bias", "sigmoid+affine")


class SemanticDecoupling(nn.Module):
    """f (B, D, h, w), x (C, d_x) -> f^v (B, C, D) and attention a (B, C, h, w).

    The attention is computed ``chunk`` images at a time: its (chunk, C, hw, rank) intermediate
    then stays small enough for the allocator to reuse and for the cache (on a CPU, 1.7x faster
    forward and backward at B = 256, C = 32, hw = 16, rank = 32 than one (B, C, hw, rank)
    tensor); every image's numbers are the same computation either way."""

    chunk = 32

    def __init__(self, feature_dim: int, word_dim: int, rank: int = 256,
                 out_dim: int = 256) -> None:
        super().__init__()
        self.U = nn.Linear(feature_dim, rank, bias=False)
        self.V = nn.Linear(word_dim, rank, bias=False)
        self.P = nn.Linear(rank, out_dim)  # its bias is b
        self.w_a = nn.Linear(out_dim, 1)

    def category_features(self, f: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """f~ (B, C, hw, out_dim) written out as in the paper (for tests and inspection)."""
        f_flat = f.flatten(2).transpose(1, 2)  # (B, hw, D)
        return self.P(torch.tanh(self.U(f_flat)[:, None] * self.V(x)[None, :, None]))

    def forward(self, f: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, d, h, w = f.shape
        if x.ndim != 2:
            raise ValueError(f"word vectors must be (C, d_x), got {tuple(x.shape)}")
        f_flat = f.flatten(2).transpose(1, 2)  # (B, hw, D)
        a = torch.cat([decoupling_attention(f_flat[i:i + self.chunk], x, self.U, self.V, self.P, self.w_a)
                       for i in range(0, b, self.chunk)])  # (B, C, hw)
        return pool_categories(a, f_flat), a.view(b, -1, h, w)


def decoupling_attention(f_flat: torch.Tensor, x: torch.Tensor, U: nn.Linear, V: nn.Linear,
                         P: nn.Linear, w_a: nn.Linear) -> torch.Tensor:
    """Eq. (eq-decoupling-attention) of chapter 4: attention of category c over positions,

        f~_{c,wh} = P^T tanh((U^T f_wh) ⊙ (V^T x_c)) + b,   a_{c,wh} = softmax_{wh}(w_a^T f~_{c,wh}).

    f_flat (B, hw, D) = f_wh, x (C, d_x) = x_c -> a (B, C, hw), summing to 1 over wh.
    w_a^T (P^T z + b) + b_a = (P w_a)^T z + (w_a^T b + b_a): the same number, computed
    without materialising f~ (B, C, hw, out_dim), which dominated the run time.
    """
    joint = torch.tanh(U(f_flat)[:, None] * V(x)[None, :, None])  # (B, C, hw, r)
    w_eff = w_a.weight @ P.weight  # (1, r) = (P w_a)^T
    b_eff = w_a(P.bias)  # (1,) = w_a^T b + b_a
    logits = (joint @ w_eff.T).squeeze(-1) + b_eff  # (B, C, hw) = w_a^T f~_{c,wh}
    return logits.softmax(dim=-1)  # normalised over positions


def pool_categories(a: torch.Tensor, f_flat: torch.Tensor) -> torch.Tensor:
    """Eq. (eq-decoupling-pooling) of chapter 4: f^v_c = Σ_{wh} a_{c,wh} f_wh.

    a (B, C, hw) from :func:`decoupling_attention`, f_flat (B, hw, D) -> f^v (B, C, D).
    """
    return a @ f_flat  # (B, C, D)


def category_scores(f_v: torch.Tensor, f_t: torch.Tensor, tau: float) -> torch.Tensor:
    """Eq. (eq-category-score) of chapter 4: s_c = cos(f^v_c, f^t_c) / τ, (B, C).

    f_v is (B, C, D), or (B, D) when one global feature serves every c; f_t is (C, D).
    """
    f_t = F.normalize(f_t, dim=-1)
    if f_v.ndim == 2:  # one global feature for every category
        return F.normalize(f_v, dim=-1) @ f_t.T / tau
    return (F.normalize(f_v, dim=-1) * f_t[None]).sum(-1) / tau


def score_probabilities(s: torch.Tensor, scoring: str) -> torch.Tensor:
    """Eq. (eq-softmax-over-categories) of chapter 4 (the paper's Eq. 9):
    p_c = exp(s_c) / Σ_{c'} exp(s_{c'}) over the C categories of one image, or σ(s_c) per
    category for the sigmoid scorings (their scale and offset are already in s). s (B, C)."""
    if scoring == "softmax":
        return s.softmax(dim=-1)
    if scoring in ("sigmoid", "sigmoid+bias", "sigmoid+affine"):  # scale, offset already in s
        return torch.sigmoid(s)
    raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")


def score_log_probabilities(s: torch.Tensor, scoring: str) -> torch.Tensor:
    """log p, (B, C): log_softmax_c(s) (Eq. (eq-softmax-over-categories)) or log σ(s); the
    paper's prediction, ranked in log space so that tiny softmax probabilities do not
    underflow into ties."""
    if scoring == "softmax":
        return F.log_softmax(s, dim=-1)
    if scoring in SCORINGS:
        return F.logsigmoid(s)
    raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")


@dataclass
class HeadOutput:
    scores: torch.Tensor  # (B, C) s_c, the ranking score used for mAP
    probs: torch.Tensor  # (B, C) p_c, what the loss sees
    attention: torch.Tensor | None  # (B, C, h, w) or None without decoupling


class MultiLabelCLIPHead(nn.Module):
    """The framework on cached frozen-CLIP features: optional decoupling, prompts or fixed text.

    ``prompts``: a module returning f^t (C, D) (a :class:`PromptLearner`) or None to use the
    fixed ``text_features`` (C, D) of a hand prompt. ``decoupling``: a
    :class:`SemanticDecoupling` and its word vectors, or None to score the global feature.
    """

    def __init__(self, word_vectors: torch.Tensor | None, text_features: torch.Tensor | None,
                 prompts: nn.Module | None = None, decoupling: SemanticDecoupling | None = None,
                 tau: float = 0.07, scoring: str = "softmax") -> None:
        super().__init__()
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
        if prompts is None and text_features is None:
            raise ValueError("give either prompts or text_features")
        if decoupling is not None and word_vectors is None:
            raise ValueError("decoupling needs word_vectors")
        self.prompts, self.decoupling = prompts, decoupling
        self.register_buffer("word_vectors", word_vectors)
        self.register_buffer("text_features", text_features)
        self.tau, self.scoring = tau, scoring
        self.offset = self.log_scale = None
        if scoring == "sigmoid+bias":
            self.offset = nn.Parameter(torch.tensor(-1.0 / tau))
        elif scoring == "sigmoid+affine":  # SigLIP's start: t = 10, β = -10
            self.log_scale = nn.Parameter(torch.tensor(math.log(10.0)))
            self.offset = nn.Parameter(torch.tensor(-10.0))

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> HeadOutput:
        """dense (B, D, h, w) and pooled (B, D) frozen image features -> HeadOutput. The sigmoid
        controls of Eq. (eq-sigmoid-controls): s_c + β (sigmoid+bias) or t cos(f^v_c, f^t_c) + β
        (sigmoid+affine), p = σ(s)."""
        f_t = self.prompts() if self.prompts is not None else self.text_features  # (C, D)
        if self.decoupling is not None:
            f_v, attention = self.decoupling(dense, self.word_vectors)  # (B, C, D)
        else:
            f_v, attention = pooled, None
        if self.log_scale is None:
            s = category_scores(f_v, f_t, self.tau)  # (B, C) cos / τ
        else:
            s = category_scores(f_v, f_t, 1.0) * self.log_scale.exp()  # (B, C) t cos
        if self.offset is not None:
            s = s + self.offset  # s_c + β
        return HeadOutput(s, score_probabilities(s, self.scoring), attention)

    def scalar_parameters(self) -> list[nn.Parameter]:
        """The calibration scalars β (and log t) of the sigmoid controls; [] otherwise."""
        return [p for p in (self.offset, self.log_scale) if p is not None]

    @torch.no_grad()
    def calibrate(self, dense: torch.Tensor, pooled: torch.Tensor, prevalence: float = 0.5) -> float:
        """Set β = logit(π) - mean_{i,c}(s_ic - β) on these (training) features, π =
        ``prevalence`` (the share of positives among the known training labels): the average
        entry then starts at p = π, not at an arbitrary constant (π = 0.5: at the average
        score). Returns β; no-op without β."""
        if self.offset is None:
            return float("nan")
        if not 0 < prevalence < 1:
            raise ValueError(f"calibrate: prevalence must lie in (0, 1), got {prevalence}")
        self.offset.zero_()
        s = torch.cat([self(dense[i:i + 256], pooled[i:i + 256]).scores
                       for i in range(0, len(dense), 256)])  # (N, C) without β
        self.offset.fill_(math.log(prevalence / (1 - prevalence)) - float(s.float().mean()))
        return float(self.offset)


class LinearProbe(nn.Module):
    """p_c = σ(w_c^T f + b_c) on the global feature f (the linear-probe baseline)."""

    scoring = "sigmoid"

    def __init__(self, dim: int, n_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, n_classes)

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> HeadOutput:
        s = self.linear(F.normalize(pooled, dim=-1))  # (B, C)
        return HeadOutput(s, torch.sigmoid(s), None)


def trainable_parameters(module: nn.Module) -> int:
    """Number of parameters with requires_grad (the frozen CLIP counts zero)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def clip_word_vectors(clip_model: nn.Module, tokenizer, class_names: list[str]) -> torch.Tensor:
    """x_c = the frozen text encoder's embedding of the bare class name, (C, D), L2-normalised.

    Our default stand-in for GloVe, which cannot be downloaded here.
    """
    with torch.no_grad():
        x = clip_model.encode_text(tokenizer(list(class_names)).to(
            next(clip_model.parameters()).device))
    return F.normalize(x.float(), dim=-1)


# Pascal VOC's raw class names are run together; GloVe has the separate words.
GLOVE_NAMES = {"diningtable": "dining table", "pottedplant": "potted plant",
               "tvmonitor": "tv monitor", "aeroplane": "airplane"}


def glove_words(name: str) -> list[str]:
    """The GloVe words of a class name: lower case, '_'/'-' as spaces, VOC names split."""
    name = name.lower().replace("_", " ").replace("-", " ").strip()
    return GLOVE_NAMES.get(name, name).split()


def load_glove(path: str, class_names: list[str]) -> torch.Tensor:
    """x_c from a GloVe text file (``word v_1 ... v_d`` per line), (C, d), L2-normalised.

    A multi-word name averages its words' vectors (names normalised by :func:`glove_words`,
    so VOC's "diningtable" reads "dining table"); a word missing from the file is an error.
    """
    needed = {w for name in class_names for w in glove_words(name)}
    table: dict[str, torch.Tensor] = {}
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            parts = line.rstrip().split(" ")
            if parts[0] in needed:
                try:
                    table[parts[0]] = torch.tensor([float(v) for v in parts[1:]])
                except ValueError as err:
                    raise ValueError(f"{path}, line {line_no}: bad number ({err})") from None
    missing = sorted(needed - set(table))
    if missing:
        raise KeyError(f"{path}: no vector for word(s) {', '.join(missing)}")
    dims = {v.numel() for v in table.values()}
    if len(dims) != 1:
        raise ValueError(f"{path}: vectors of different lengths {sorted(dims)}")
    x = torch.stack([torch.stack([table[w] for w in glove_words(n)]).mean(0)
                     for n in class_names])
    return F.normalize(x, dim=-1)
