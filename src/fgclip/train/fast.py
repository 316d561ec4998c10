"""The fast training path: bf16 autocast, explicit attention, fused AdamW, optional
``torch.compile`` and a tuned allocator; plain fp32 open_clip is the reference.

Each piece is a parameter, so ``benchmarks/bench_train.py`` can switch them on one by one
and report what each is worth on the machine it runs on.
"""
from __future__ import annotations

import ctypes
import ctypes.util

import torch

from ..models.attention import set_explicit_attention, set_first_query_pooling
from ..precision import autocast_context

ATTENTION_IMPLS = ("sdpa", "explicit")


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float,
                   device: torch.device) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (not gains, biases, embeddings' scale).

    Uses the fused kernel (one kernel for all parameters instead of a loop of small ones).
    """
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-6, fused=True)


def prepare_model(model: torch.nn.Module, attention: str = "explicit",
                  compile_model: bool = False) -> torch.nn.Module:
    """Switch ``model``'s attention implementation and optionally compile it.

    ``attention='sdpa'`` keeps ``nn.MultiheadAttention`` (torch's fused kernel, open_clip's
    default); ``'explicit'`` computes softmax(QK^T/sqrt(d))V with batched matmuls
    (:func:`fgclip.models.attention.explicit_attention`), which is faster for backward
    under bf16 on CPU; a ResNet's attention pooling then computes only the one query CLIP
    keeps (:func:`fgclip.models.attention.first_query_attention_pool`, same outputs and
    gradients). Returns the module to call in the step: ``torch.compile(model)``
    when ``compile_model``, else ``model`` itself. Parameters stay shared either way.
    """
    if attention not in ATTENTION_IMPLS:
        raise ValueError(f"attention must be one of {ATTENTION_IMPLS}, got {attention!r}")
    set_explicit_attention(model, enabled=attention == "explicit")
    set_first_query_pooling(model, enabled=attention == "explicit")
    return torch.compile(model) if compile_model else model


def keep_freed_memory() -> bool:
    """Ask glibc malloc to keep freed blocks instead of returning them to the OS.

    By default every buffer over 32 MB (the MLP activations of a 256-image batch) is a
    fresh mmap, so each training step pays page faults to zero new pages. Setting
    M_MMAP_MAX = 0 and a 1 GiB M_TRIM_THRESHOLD makes the heap reuse them. Process-wide and
    permanent; returns False (and changes nothing) where libc is not glibc.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    m_trim_threshold, m_mmap_max = -1, -4  # from glibc's malloc.h
    return bool(mallopt(m_mmap_max, 0)) and bool(mallopt(m_trim_threshold, 1 << 30))


def contrastive_step(model: torch.nn.Module, loss_fn: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     images: torch.Tensor, texts: torch.Tensor, device: torch.device,
                     precision: str, loss_args: tuple = ()) -> torch.Tensor:
    """One CLIP update: forward under autocast, the loss in fp32, backward, optimizer step.
    ``loss_fn(image_features, text_features, logit_scale, *loss_args)``: e.g. the caption
    ids of a loss that masks same-text false negatives.

    Returns the loss detached, on the device: reading it (``.item()``) is the caller's
    choice, so the hot path has no host sync.
    """
    with autocast_context(device, precision):
        img_f, txt_f, scale = model(images, texts)  # (B, D), (B, D), ()
    loss = loss_fn(img_f.float(), txt_f.float(), scale.float(), *loss_args)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()
