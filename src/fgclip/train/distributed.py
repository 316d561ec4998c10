"""Process-group setup for torchrun: gloo on CPU, nccl on CUDA, a no-op when run alone."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device: str) -> DistInfo:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK and join the process group."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return info


def resolve_device(device: str, info: DistInfo) -> torch.device:
    """'cuda' under torchrun means this process's own GPU; any other name is used as given."""
    if device == "cuda" and info.enabled:
        return torch.device("cuda", info.local_rank)
    return torch.device(device)


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
