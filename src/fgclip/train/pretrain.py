"""Contrastive pretraining of the toy CLIP on toy-world captions (single process or DDP).

Loss: the symmetric InfoNCE of CLIP, L = (CE(lambda * I T^T, y) + CE(lambda * T I^T, y)) / 2 over
the global batch, with learnable logit scale lambda = exp(logit_scale). Features are gathered
across ranks with gradients (open_clip's ``gather_features``), so a 2-process run computes the
same loss as one process on the same global batch.

The toy grammar repeats itself: in a batch of 256, dozens of captions read "a circle" or
"two shapes on a gray background". Plain InfoNCE treats caption j as a negative of image i
even when it is the very text of image i's own caption, and pushes the two apart. With
``false_negatives="mask"`` (default) those pairs leave the softmax:

    L = 1/(2B) sum_i [ -log softmax_{j in P_i}(lambda S_ij)_i - log softmax_{j in P_i}(lambda S_ji)_i ],
    P_i = {i} union {j : text_j != text_i},

which is :func:`fgclip.losses.ranking.npair_loss` with :func:`same_text_mask`; ``"keep"``
is CLIP's loss as is (open_clip's ``ClipLoss``).
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from open_clip.loss import ClipLoss, gather_features
from torch.nn.parallel import DistributedDataParallel

from ..evaluation import retrieval_metrics
from ..losses.ranking import npair_loss, same_text_mask
from ..models import create_clip, images_to_tensor
from ..models.attention import set_explicit_attention, set_first_query_pooling
from ..precision import check_precision, cpu_capability, resolve_precision
from ..progress import progress
from ..seeding import seed_everything
from ..toyworld import ToyWorldConfig
from .checkpoint import load_checkpoint, save_atomic
from .distributed import DistInfo, init_distributed, resolve_device, shutdown
from .teacher import DistilledLoss, lock_text_tower, teacher_embeddings
from .fast import ATTENTION_IMPLS, contrastive_step, keep_freed_memory, make_optimizer, prepare_model
from .toy_data import CaptionedImages, build_caption_cache


FALSE_NEGATIVES = ("mask", "keep")


class MaskedClipLoss(torch.nn.Module):
    """CLIP's symmetric InfoNCE over the global batch with same-text false negatives masked
    (module docstring); ``text_ids`` (B_local,) are equal exactly where captions read the same."""

    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        super().__init__()
        self.rank, self.world_size = rank, world_size

    def forward(self, image_features: torch.Tensor, text_features: torch.Tensor, logit_scale: torch.Tensor,
                text_ids: torch.Tensor) -> torch.Tensor:
        ids = text_ids
        if self.world_size > 1:
            image_features, text_features = gather_features(
                image_features, text_features, local_loss=False, gather_with_grad=True,
                rank=self.rank, world_size=self.world_size)  # (B, D) each, the global batch
            parts = [torch.empty_like(text_ids) for _ in range(self.world_size)]
            torch.distributed.all_gather(parts, text_ids)
            ids = torch.cat(parts)  # (B,)
        scores = logit_scale * image_features @ text_features.T  # (B, B)
        return npair_loss(scores, 1.0, same_text_mask(ids))


# the held-out scenes every toy CLIP is finally measured on, and chapter 0 measures again
STAGE_EVAL = {"n": 1000, "seed": 0, "split": "test"}


@dataclass
class PretrainConfig:
    model: str = "toy-vit"
    out_dir: str = "runs/pretrain"
    seed: int = 0
    n_train: int = 20_000
    n_val: int = 1_000
    n_test: int = STAGE_EVAL["n"]  # the finished model's test scenes; chapter 0 recomputes the default's
    epochs: int = 10
    batch_size: int = 256  # global batch, split evenly across processes
    lr: float = 1e-3
    weight_decay: float = 0.1
    warmup_steps: int = 200
    precision: str = "auto"  # bf16 where the device runs it natively, else fp32 (fgclip.precision)
    attention: str = "explicit"  # "sdpa": open_clip's nn.MultiheadAttention as is
    compile: bool = False  # torch.compile the model (pays off after a few hundred steps)
    keep_freed_memory: bool = True  # glibc keeps freed buffers (no page faults per step)
    device: str = "cpu"
    ckpt_every: int = 100
    log_every: int = 25
    max_steps: int | None = None  # stop early after this many global steps (tests)
    full_caption_weight: float = 0.4  # sampling weight of caption 0; the rest share the remainder
    false_negatives: str = "mask"  # "mask": same-text pairs leave the softmax; "keep": CLIP's loss as is
    cache_dir: str | None = "data/cache"
    eval_every_epoch: bool = False  # held-out retrieval after each epoch (main process only)
    threads: int | None = None  # torch threads per process; None = the cores split evenly
    data_workers: int = 1  # processes that render the training scenes once, before training
    channels_last: bool = True  # conv image towers (ResNet) in channels-last memory format (faster CPU convolutions)
    teacher: str | None = None  # a toy checkpoint: its text tower locked, its image embeddings distilled (train/teacher.py)
    distill_weight: float = 1.0  # w of the distillation term, with a teacher
    init: str | None = None  # a toy checkpoint whose weights start this run (a continuation: new optimizer, warmup and cosine)
    world: dict = field(default_factory=dict)  # ToyWorldConfig overrides

    def __post_init__(self) -> None:
        check_precision(self.precision)
        if self.attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {ATTENTION_IMPLS}, got {self.attention!r}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {self.threads}")
        for name in ("n_train", "n_test", "epochs", "batch_size", "ckpt_every", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.false_negatives not in FALSE_NEGATIVES:
            raise ValueError(f"false_negatives must be one of {FALSE_NEGATIVES}, got {self.false_negatives!r}")
        if not 0.0 <= self.full_caption_weight <= 1.0:
            raise ValueError(f"full_caption_weight must be in [0, 1], got {self.full_caption_weight}")


def lr_at(step: int, total: int, cfg: PretrainConfig) -> float:
    """Linear warmup to cfg.lr, then cosine decay to zero at ``total`` steps."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    t = (step - cfg.warmup_steps) / max(total - cfg.warmup_steps, 1)
    return 0.5 * cfg.lr * (1 + math.cos(math.pi * min(t, 1.0)))


def batch_indices(cfg: PretrainConfig, data: CaptionedImages, epoch: int, step: int,
                  info: DistInfo) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's image indices and caption slots for one global step.

    Both are pure functions of (seed, epoch, step), which makes resume exact and lets
    every rank agree on the global batch without communication.
    """
    perm = np.random.default_rng([cfg.seed, epoch]).permutation(len(data))
    rows = perm[step * cfg.batch_size:(step + 1) * cfg.batch_size]
    k = data.tokens.shape[1]
    rest = (1.0 - cfg.full_caption_weight) / max(k - 1, 1)
    weights = np.array([cfg.full_caption_weight] + [rest] * (k - 1)) if k > 1 else np.ones(1)
    slots = np.random.default_rng([cfg.seed, epoch, step]).choice(k, size=len(rows), p=weights)
    local = slice(info.rank * len(rows) // info.world_size, (info.rank + 1) * len(rows) // info.world_size)
    return torch.from_numpy(rows[local]), torch.from_numpy(slots[local])


def _state(model, optimizer, cfg, global_step, history, chosen: dict | None = None) -> dict:
    return {"model_name": cfg.model, "state_dict": model.state_dict(),
            "optimizer": optimizer.state_dict(), "global_step": global_step,
            "history": history, "config": asdict(cfg), "torch_rng": torch.get_rng_state(),
            "precision": chosen or {}}



def continue_from(model: torch.nn.Module, path: str | Path) -> dict:
    """Load a finished toy checkpoint's weights into ``model`` to continue its training; returns
    what the new checkpoint records of its parent (path, command, steps, precision, test metrics)."""
    parent = load_checkpoint(path)
    try:
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in parent["state_dict"].items()})
    except (KeyError, RuntimeError) as e:  # another architecture: say which file, not only which tensors
        raise ValueError(f"--init {path}: a {parent.get('model_name', 'checkpoint')!r} checkpoint whose weights do not "
                         f"fit this model ({str(e).splitlines()[0]})") from e
    return {"checkpoint": str(path), "command": parent.get("command", ""), "steps": parent.get("global_step"),
            "precision": parent.get("precision", {}).get("chosen"), "test_metrics": parent.get("test_metrics", {}),
            "history": parent.get("history", []), "parent": parent.get("parent")}


def lineage(info: dict) -> list[dict]:
    """The ``parent`` records of a checkpoint (its blob or a ``parent`` record), newest first:
    the runs it continued, each with its checkpoint path, command and steps."""
    parents = []
    while (info := info.get("parent")):
        parents.append(info)
    return parents


def lineage_history(info: dict) -> tuple[list[dict], list[int]]:
    """The training history of a checkpoint (``info``: its blob, or a ``parent`` record) after
    those of the runs it continued (:func:`lineage`), one run after another: each run's steps
    (and epochs) offset by the runs before it. Returns (history, the global step at which each
    continuation began)."""
    history: list[dict] = []
    starts: list[int] = []
    for run in [*reversed(lineage(info)), info]:  # oldest first
        step0 = max((h["step"] for h in history), default=0)
        epoch0 = max((h["epoch"] for h in history if "epoch" in h), default=0)
        starts += [step0] if history else []
        history += [{**h, "step": h["step"] + step0, **({"epoch": h["epoch"] + epoch0} if "epoch" in h else {})}
                    for h in run.get("history", [])]
    return history, starts


def export_fp16(state: dict, metrics: dict, command: str, path: str | Path,
                test_metrics: dict | None = None, parent: dict | None = None) -> Path:
    """The shippable checkpoint: fp16 weights, the config and command that made them, the
    validation metrics and those on ``STAGE_EVAL`` (``test_metrics``), and for a continued run
    its ``parent`` (``continue_from``)."""
    blob = {"model_name": state["model_name"],
            "state_dict": {k: v.half() if v.is_floating_point() else v
                           for k, v in state["state_dict"].items()},
            "config": state["config"], "metrics": metrics, "test_metrics": test_metrics or {}, "command": command,
            "history": state["history"], "precision": state.get("precision", {}),
            "global_step": state["global_step"], "parent": parent}
    return save_atomic(blob, path)


def train(cfg: PretrainConfig, command: str = "") -> dict:
    """Train, checkpointing to ``out_dir/last.pt``; resume from it when it exists."""
    info = init_distributed(cfg.device)
    device = resolve_device(cfg.device, info)
    chosen = precision_choice(cfg.precision, device)
    if info.is_main:
        print(f"precision {cfg.precision} -> {chosen['chosen']}: {chosen['reason']}", flush=True)
    torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 1) // info.world_size))
    if cfg.keep_freed_memory:
        keep_freed_memory()
    seed_everything(cfg.seed)
    out = Path(cfg.out_dir)
    clip = create_clip(cfg.model, pretrained=None, device=str(device))
    world = ToyWorldConfig(**cfg.world)
    train_data = build_caption_cache(world, cfg.n_train, cfg.seed, "train", clip.tokenizer, cfg.cache_dir,
                                     workers=cfg.data_workers)
    steps_per_epoch = cfg.n_train // cfg.batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"n_train={cfg.n_train} is smaller than batch_size={cfg.batch_size}")
    total = steps_per_epoch * cfg.epochs
    model = clip.model.train()
    teacher_f = None
    if cfg.teacher is not None:
        lock_text_tower(model, load_checkpoint(cfg.teacher)["state_dict"])
        teacher_f = teacher_embeddings(cfg.teacher, train_data.images, str(device), cfg.cache_dir,
                                       f"{cfg.seed}/{cfg.n_train}/{json.dumps(world.to_dict(), sort_keys=True)}")
    parent = continue_from(model, cfg.init) if cfg.init is not None else None
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, device)  # trainable parameters only
    global_step, history = 0, []
    if (out / "last.pt").is_file():
        ckpt = load_checkpoint(out / "last.pt")
        model.load_state_dict(ckpt["state_dict"])
        optimizer.load_state_dict(ckpt["optimizer"])
        global_step, history = ckpt["global_step"], ckpt["history"]
        torch.set_rng_state(ckpt["torch_rng"])
    conv_tower = any(isinstance(m, torch.nn.Conv2d) for m in model.visual.modules()) and \
        not hasattr(model.visual, "transformer")
    channels_last = cfg.channels_last and conv_tower
    if channels_last:
        model.visual.to(memory_format=torch.channels_last)
    ddp = DistributedDataParallel(model) if info.enabled else model
    step_model = prepare_model(ddp, cfg.attention, cfg.compile)  # shares model's parameters
    if cfg.false_negatives == "mask":
        loss_fn = MaskedClipLoss(rank=info.rank, world_size=info.world_size)
    else:
        loss_fn = ClipLoss(local_loss=False, gather_with_grad=True, rank=info.rank, world_size=info.world_size)
    if teacher_f is not None:
        loss_fn = DistilledLoss(loss_fn, cfg.distill_weight)
    end = total if cfg.max_steps is None else min(total, cfg.max_steps)
    bar = progress(total=end, initial=global_step, desc=f"pretrain {cfg.model}",
                   **({} if info.is_main else {"disable": True}))
    running, t0, seen = torch.zeros((), device=device), time.perf_counter(), 0
    while global_step < end:
        epoch, step = divmod(global_step, steps_per_epoch)
        rows, slots = batch_indices(cfg, train_data, epoch, step, info)
        images = images_to_tensor(train_data.images[rows].to(device), clip)
        if channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        texts = train_data.tokens[rows, slots].to(device)
        loss_args = (train_data.text_ids[rows, slots].to(device),) if cfg.false_negatives == "mask" else ()
        if teacher_f is not None:
            loss_args = (teacher_f[rows].to(device),) + loss_args
        for group in optimizer.param_groups:
            group["lr"] = lr_at(global_step, total, cfg)
        running += contrastive_step(step_model, loss_fn, optimizer, images, texts, device,
                                    chosen["chosen"], loss_args)
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        seen += len(rows) * info.world_size
        global_step += 1
        bar.update(1)
        if global_step % cfg.log_every == 0 or global_step == end:
            n_logged = cfg.log_every if global_step % cfg.log_every == 0 else global_step % cfg.log_every
            mean_loss = running.item() / n_logged  # the only host sync, once per log interval
            ips = seen / (time.perf_counter() - t0)
            history.append({"step": global_step, "loss": mean_loss, "images_per_s": ips,
                            "lr": optimizer.param_groups[0]["lr"]})
            bar.set_postfix(loss=f"{mean_loss:.3f}", ips=f"{ips:.0f}")
            running.zero_()
            t0, seen = time.perf_counter(), 0
        if cfg.eval_every_epoch and info.is_main and global_step % steps_per_epoch == 0:
            model.eval()
            val = retrieval_metrics(clip, world, n=cfg.n_val, seed=cfg.seed, split="val",
                                    precision=chosen["chosen"])
            model.train()
            history.append({"step": global_step, "epoch": global_step // steps_per_epoch, **val})
            bar.write(f"epoch {global_step // steps_per_epoch}: val {json.dumps(val)}")
        if info.is_main and (global_step % cfg.ckpt_every == 0 or global_step == end):
            save_atomic(_state(model, optimizer, cfg, global_step, history, chosen), out / "last.pt")
    bar.close()
    result = {"global_step": global_step, "history": history, "precision": chosen}
    if info.is_main and global_step == total:
        metrics = _final_metrics(clip, world, cfg, chosen["chosen"])
        state = _state(model, optimizer, cfg, global_step, history, chosen)
        export_fp16(state, metrics["val"], command, out / f"{cfg.model}.pt", test_metrics=metrics["test"],
                    parent=parent)
        (out / "metrics.json").write_text(json.dumps({**metrics, "continued_from": parent}, indent=2))
        result["metrics"] = metrics["val"]
    shutdown(info)
    return result


def _final_metrics(clip, world: ToyWorldConfig, cfg: PretrainConfig, precision: str) -> dict:
    """The finished model on the validation split (as its curve) and on the test split that
    chapter 0 recomputes at every build (``STAGE_EVAL``: it fails when they differ)."""
    clip.model.eval()
    set_explicit_attention(clip.model, enabled=False)  # evaluate the model as it ships
    set_first_query_pooling(clip.model, enabled=False)
    val = retrieval_metrics(clip, world, n=cfg.n_val, seed=cfg.seed, split="val", precision=precision)
    test = retrieval_metrics(clip, world, precision=precision, **{**STAGE_EVAL, "n": cfg.n_test})
    return {"val": val, "test": test}


def precision_choice(precision: str, device: torch.device) -> dict:
    """What the run records about its precision: asked, chosen, why, and the CPU's capability."""
    chosen, reason = resolve_precision(precision, device)
    return {"requested": precision, "chosen": chosen, "reason": reason, **cpu_capability()}
