"""Training loops, atomic checkpoints, torchrun/DDP setup and the fast path."""
from .checkpoint import load_checkpoint, save_atomic
from .pretrain import PretrainConfig, train

__all__ = ["PretrainConfig", "load_checkpoint", "save_atomic", "train"]
