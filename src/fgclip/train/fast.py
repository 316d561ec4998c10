"""The fast training path: bf16 autocast and fused optimizers, fp32 kept as the reference."""
from __future__ import annotations

import torch

from ..precision import autocast_context  # noqa: F401  (re-exported: part of the fast path)


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
