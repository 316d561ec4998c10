"""Chapter 4's heads trained side by side: the *members* of one arm (each its own learning rate,
seed, known-label targets and batch order) in one loop.

Member m's trainable parameters θ_m stay its own tensors (its own AdamW group, so its own
learning rate); at every step they are stacked along a leading member dimension and the head's
forward is mapped over it (``torch.func.vmap`` of ``torch.func.functional_call``), while the
learned prompts of every member go through the frozen text encoder as one batch. The loss is

    L = Σ_m L_m(θ_m),   so   ∂L/∂θ_m = ∂L_m/∂θ_m,

and each member takes exactly the steps it would take alone (tests/test_ch4_selection.py
checks one member against :func:`fgclip.studies.decoupling.heads.fit`). The work per member is
unchanged, but one loop serves them all, and the small matrix products of a head become a few
large ones. After every epoch each member is scored on the validation split and its trainable
state is kept, so a choice of (lr, epoch) made later on those curves can be evaluated without
training again (the state after epoch e is what training for exactly e epochs gives: the
learning rate is constant and batches follow the member's seed). A validated run also keeps
where it ended (parameters, AdamW moments, batch generators), so :func:`continue_members` can
train some of its members further: the same steps as training them that much longer from the
start.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, vmap
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ...losses.asymmetric import partial_asymmetric_loss
from ...methods.decoupling import score_log_probabilities, score_probabilities
from ...metrics.multilabel import known_map
from ...models.prompts import encode_text_from_embeddings
from ...precision import autocast_context
from ...train.loop import seeded_batches, train_loop
from .features import Features
from .heads import FitConfig, known_prevalence


@dataclass(frozen=True)
class Member:
    """One training run of an arm: learning rate, training seed (initialisation, batch order,
    known-label mask) and the known-label proportion ρ of its targets."""

    lr: float
    seed: int
    rho: float


class MemberRuns(NamedTuple):
    """What :func:`train_members` did."""

    members: list  # [Member]
    heads: list  # the members' heads (nn.Module), holding their last epoch's parameters
    curves: np.ndarray  # (M, E) validation mAP (on log p, known entries) after each epoch
    states: list  # states[m][e]: member m's trainable parameters after epoch e + 1
    history: list  # the loop's per-epoch rows (loss summed over members)
    end: dict | None = None  # validated runs: {"optimizer": {parameter: AdamW state}, "generators": [state]} at the end

    def head_at(self, m: int, epoch: int) -> nn.Module:
        """Member m's head with the parameters it had after ``epoch`` (1-based)."""
        load_trainable(self.heads[m], self.states[m][epoch - 1])
        return self.heads[m]


def trainable(head: nn.Module) -> dict[str, nn.Parameter]:
    """The head's own trainable parameters by name (the frozen CLIP inside a prompt learner
    has none)."""
    return {n: p for n, p in head.named_parameters() if p.requires_grad}


@torch.no_grad()
def load_trainable(head: nn.Module, state: dict[str, torch.Tensor]) -> None:
    for name, p in trainable(head).items():
        p.copy_(state[name])


class StackedForward:
    """Scores s (M, B, C) of M heads of one arm that differ only in their parameters.

    ``base`` is a copy of the first head without its prompt learner; each member's text
    features f^t (M, C, D) are computed once per call (all prompts in one batch of the frozen
    text encoder, or the fixed hand-prompt features) and passed to the mapped forward as the
    base head's ``text_features`` buffer.
    """

    def __init__(self, heads: list[nn.Module]) -> None:
        self.heads = heads
        first = heads[0]
        self.prompts = [getattr(h, "prompts", None) for h in heads]
        self.has_text = hasattr(first, "text_features")  # a CLIP head, not the linear probe
        self.base = first  # functional_call lends it each member's parameters in turn
        if self.prompts[0] is not None:  # a copy without the prompt learner (and its CLIP)
            first.prompts = None
            try:
                self.base = copy.deepcopy(first)
            finally:
                first.prompts = self.prompts[0]
        self.own = [trainable(h) for h in heads]  # once: a prompt learner's walk goes through all of CLIP
        self.names = [n for n in self.own[0] if not n.startswith("prompts.")]
        self.scoring = getattr(first, "scoring", "sigmoid")

    def text_features(self) -> torch.Tensor | None:
        """f^t (M, C, D) of every member, or None for a head without text (linear probe)."""
        if not self.has_text:
            return None
        if self.prompts[0] is None:
            return torch.stack([h.text_features for h in self.heads])
        emb = torch.cat([p.embeddings() for p in self.prompts])  # (M*C, L, width)
        ids = torch.cat([p.token_ids for p in self.prompts])
        f_t = encode_text_from_embeddings(self.prompts[0].clip, emb, ids)  # (M*C, D)
        return f_t.view(len(self.heads), -1, f_t.shape[-1])

    def __call__(self, dense: torch.Tensor, pooled: torch.Tensor, shared: bool = False) -> torch.Tensor:
        """dense (M, B, D, h, w) and pooled (M, B, D), or one batch (B, ...) for every member
        when ``shared``, -> scores (M, B, C)."""
        params = {n: torch.stack([own[n] for own in self.own]) for n in self.names}
        f_t = self.text_features()

        def one(p: dict, ft, d: torch.Tensor, pl: torch.Tensor) -> torch.Tensor:
            extra = {} if ft is None else {"text_features": ft}
            return functional_call(self.base, {**p, **extra}, (d, pl)).scores

        data_dim = None if shared else 0
        return vmap(one, in_dims=(0, None if f_t is None else 0, data_dim, data_dim))(params, f_t, dense, pooled)


def member_groups(heads: list[nn.Module], members: list[Member], scalar_lr: float) -> list[dict]:
    """One AdamW group per member at its learning rate; the calibration scalars (β, log t) of
    every member in one more group at ``scalar_lr`` without weight decay."""
    groups, scalars = [], []
    for head, member in zip(heads, members):
        own = trainable(head)
        keep = [p for n, p in own.items() if n not in ("offset", "log_scale")]
        scalars += [p for n, p in own.items() if n in ("offset", "log_scale")]
        groups.append({"params": keep, "lr": member.lr})
    if scalars:
        groups.append({"params": scalars, "lr": scalar_lr, "weight_decay": 0.0})
    return groups


def train_members(make: Callable[[int], nn.Module], members: list[Member],
                  targets: Callable[[Member], tuple[np.ndarray, np.ndarray]], fit_feats: Features,
                  val_feats: Features, cfg: FitConfig, epochs: int, validate: bool = True) -> MemberRuns:
    """Train every member of one arm for ``epochs`` epochs of P-ASL (cfg's γ+, γ-, clip,
    batch size, weight decay and precision; each member's lr and seed), side by side.
    ``validate=False`` (a run evaluated only at its end) skips the per-epoch validation pass
    and state copies: curves (M, 0), no states; the training steps are the same.

    make(seed) builds the arm's head initialised from seed; targets(member) gives its
    (fit, validation) targets in {1, 0, -1}. A sigmoid control's β starts at logit(π) - mean(s) on
    the fit features, π its known fit labels' prevalence (``cfg.calibrate``). Returns the validation curves and per-epoch states.
    """
    if not members:
        raise ValueError("train_members: no members")
    heads = [make(m.seed) for m in members]
    if cfg.calibrate:
        for head, m in zip(heads, members):
            if hasattr(head, "calibrate"):
                head.calibrate(fit_feats.dense, fit_feats.pooled, known_prevalence(targets(m)[0]))
    gens = [torch.Generator().manual_seed(m.seed) for m in members]
    return _train(heads, members, targets, fit_feats, val_feats, cfg, epochs, validate, gens, {})


def continue_members(runs: MemberRuns, which: list[int], targets: Callable[[Member], tuple[np.ndarray, np.ndarray]],
                     fit_feats: Features, val_feats: Features, cfg: FitConfig, extra: int) -> tuple[MemberRuns, float]:
    """Members ``which`` of a validated ``runs`` trained ``extra`` more epochs from where they
    ended: their last epoch's parameters, AdamW moments and batch generators, so the steps are
    those of a run ``extra`` epochs longer from the start (curves and states of the extra epochs
    only). Also returns the largest difference between the restored heads' validation mAP and
    the run's last curve point (a restore that went wrong shows there). The members' heads are
    the run's own: they end at the longer run's last epoch."""
    if runs.end is None or not which:
        raise ValueError("continue_members: needs members of a validated run (train_members(validate=True))")
    heads, members = [runs.heads[i] for i in which], [runs.members[i] for i in which]
    for i, head in zip(which, heads):
        load_trainable(head, runs.states[i][-1])
    start = stacked_log_p(StackedForward(heads), val_feats, cfg)
    restored = max(abs(known_map(start[k], targets(m)[1]) - runs.curves[i, -1])
                   for k, (i, m) in enumerate(zip(which, members)))
    gens = [torch.Generator() for _ in which]
    for g, i in zip(gens, which):
        g.set_state(runs.end["generators"][i])
    moments = {p: runs.end["optimizer"][p] for h in heads for p in trainable(h).values()}
    return _train(heads, members, targets, fit_feats, val_feats, cfg, extra, True, gens, moments), float(restored)


def _train(heads: list[nn.Module], members: list[Member], targets: Callable, fit_feats: Features,
           val_feats: Features, cfg: FitConfig, epochs: int, validate: bool, gens: list[torch.Generator],
           moments: dict) -> MemberRuns:
    """The side-by-side loop of :func:`train_members` on given heads and batch generators; AdamW
    starts from ``moments`` ({parameter: state}, empty: fresh)."""
    fit_t, val_t = zip(*(targets(m) for m in members))
    forward = StackedForward(heads)
    y = torch.as_tensor(np.stack(fit_t), dtype=torch.long)  # (M, N, C)
    rows = torch.arange(len(members))[:, None]

    def epoch_batches() -> list[torch.Tensor]:
        per_member = [seeded_batches(y.shape[1], cfg.batch_size, g) for g in gens]
        return [torch.stack(b) for b in zip(*per_member)]  # each (M, B)

    def batch_loss(idx: torch.Tensor) -> dict[str, torch.Tensor]:
        s = forward(fit_feats.dense[idx], fit_feats.pooled[idx])  # (M, B, C)
        p, t = score_probabilities(s, forward.scoring).float(), y[rows, idx]
        return {"loss": sum(partial_asymmetric_loss(p[m], t[m], cfg.gamma_pos, cfg.gamma_neg, cfg.clip)
                            for m in range(len(members)))}

    curves, states = [], [[] for _ in members]

    def after_epoch(row: dict) -> bool:
        log_p = stacked_log_p(forward, val_feats, cfg)
        curves.append([known_map(log_p[m], val_t[m]) for m in range(len(members))])
        for m, own in enumerate(forward.own):
            states[m].append({n: p.detach().clone() for n, p in own.items()})
        return False

    params = member_groups(heads, members, cfg.scalar_lr)
    ours, seen = params[0]["params"][0], {}  # the loop's own AdamW is the one holding this parameter

    def pre(opt, args, kwargs):  # before its first step: the moments a continued run ended with
        if opt.param_groups[0]["params"][0] is ours and "opt" not in seen:
            seen["opt"] = opt
            for p, state in moments.items():
                opt.state[p] = {k: v.clone() for k, v in state.items()}

    hook = register_optimizer_step_pre_hook(pre)  # the shared loop builds its AdamW inside
    try:
        history = train_loop(params, epoch_batches, batch_loss, FitConfig(**{**cfg.__dict__, "epochs": epochs}),
                             desc=f"{len(members)} members, epoch", after_epoch=after_epoch if validate else None)
    finally:
        hook.remove()
    end = None
    if validate:
        end = {"optimizer": {p: {k: v.clone() for k, v in seen["opt"].state[p].items()}
                             for g in params for p in g["params"]},
               "generators": [g.get_state() for g in gens]}
    curves = np.asarray(curves, dtype=float).reshape(-1, len(members)).T  # (M, E), or (M, 0) unvalidated
    return MemberRuns(list(members), heads, curves, states, history, end)


@torch.no_grad()
def stacked_log_p(forward: StackedForward, feats: Features, cfg: FitConfig,
                  batch_size: int = 256) -> np.ndarray:
    """log p (M, N, C) of every member on the same images, in the run's precision."""
    out = []
    device = torch.device(cfg.device)
    with autocast_context(device, cfg.precision):
        for start in range(0, len(feats.pooled), batch_size):
            s = forward(feats.dense[start:start + batch_size], feats.pooled[start:start + batch_size], shared=True)
            out.append(score_log_probabilities(s.float(), forward.scoring))
    return torch.cat(out, dim=1).numpy()
