"""The fast training path: bf16 autocast and fused optimizers, fp32 kept as the reference."""
from __future__ import annotations

import torch

from ..precision import autocast_context


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


def contrastive_step(model: torch.nn.Module, loss_fn: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     images: torch.Tensor, texts: torch.Tensor, device: torch.device,
                     precision: str) -> torch.Tensor:
    """One CLIP update: forward under autocast, the loss in fp32, backward, optimizer step.

    Returns the loss detached, on the device: reading it (``.item()``) is the caller's
    choice, so the hot path has no host sync.
    """
    with autocast_context(device, precision):
        img_f, txt_f, scale = model(images, texts)  # (B, D), (B, D), ()
    loss = loss_fn(img_f.float(), txt_f.float(), scale.float())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()
