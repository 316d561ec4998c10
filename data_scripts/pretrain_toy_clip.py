"""Pretrain the toy CLIP on toy-world captions.

Single process:   python data_scripts/pretrain_toy_clip.py --out-dir runs/pretrain
Two processes:    torchrun --nproc_per_node=2 data_scripts/pretrain_toy_clip.py ...
Rerunning the same command after a kill resumes from <out-dir>/last.pt.
The fp16 checkpoint <out-dir>/<model>.pt records this command, its held-out metrics and the
precision the run used (with --precision auto: what auto chose on this machine, and why).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys

from fgclip.precision import PRECISIONS
from fgclip.train import PretrainConfig, train


def parse_args(argv: list[str]) -> PretrainConfig:
    d = PretrainConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=d.model)
    p.add_argument("--out-dir", default=d.out_dir)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--n-train", type=int, default=d.n_train)
    p.add_argument("--n-val", type=int, default=d.n_val)
    p.add_argument("--n-test", type=int, default=d.n_test,
                   help="test scenes of the finished model's metrics (chapter 0 recomputes the default)")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--warmup-steps", type=int, default=d.warmup_steps)
    p.add_argument("--precision", choices=PRECISIONS, default=d.precision,
                   help="auto (default): bf16 where the device runs it natively (CPU flags avx512_bf16 "
                        "or amx_bf16, CUDA compute capability >= 8), fp32 otherwise; the run prints "
                        "its choice and the checkpoint records it. fp32 is the reference path")
    p.add_argument("--attention", choices=["explicit", "sdpa"], default=d.attention,
                   help="explicit: softmax(QK^T)V by batched matmuls (fast path); sdpa: open_clip as is")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=d.compile,
                   help="torch.compile the model (about 30 s of compilation, then faster steps)")
    p.add_argument("--keep-freed-memory", action=argparse.BooleanOptionalAction,
                   default=d.keep_freed_memory, help="glibc malloc keeps freed buffers (fast path)")
    p.add_argument("--device", default=d.device)
    p.add_argument("--ckpt-every", type=int, default=d.ckpt_every)
    p.add_argument("--log-every", type=int, default=d.log_every)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--full-caption-weight", type=float, default=d.full_caption_weight)
    p.add_argument("--false-negatives", choices=["mask", "keep"], default=d.false_negatives,
                   help="mask (default): captions that read the same leave each other's softmax; "
                        "keep: CLIP's loss as is")
    p.add_argument("--cache-dir", default=d.cache_dir, help="'none' disables the data cache")
    p.add_argument("--eval-every-epoch", action="store_true", help="held-out R@K after each epoch")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads per process (default: the cores split evenly)")
    p.add_argument("--data-workers", type=int, default=d.data_workers,
                   help="processes that render the training scenes (once, before training)")
    p.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=d.channels_last,
                   help="ResNet image towers in channels-last memory format (faster CPU convolutions)")
    p.add_argument("--teacher", default=None,
                   help="a trained toy checkpoint: its text tower is copied and locked, its image embeddings distilled")
    p.add_argument("--distill-weight", type=float, default=d.distill_weight)
    p.add_argument("--init", default=None,
                   help="a finished toy checkpoint to continue from (its weights; new optimizer and schedule)")
    p.add_argument("--world", default="{}", help='ToyWorldConfig overrides as JSON, e.g. {"center_bias": 0.5}')
    a = p.parse_args(argv)
    world = json.loads(a.world)
    if not isinstance(world, dict):
        p.error(f"--world must be a JSON object, got {a.world!r}")
    return PretrainConfig(
        model=a.model, out_dir=a.out_dir, seed=a.seed, n_train=a.n_train, n_val=a.n_val, n_test=a.n_test,
        epochs=a.epochs, batch_size=a.batch_size, lr=a.lr, weight_decay=a.weight_decay,
        warmup_steps=a.warmup_steps, precision=a.precision, attention=a.attention,
        compile=a.compile, keep_freed_memory=a.keep_freed_memory, device=a.device,
        ckpt_every=a.ckpt_every, log_every=a.log_every, max_steps=a.max_steps,
        full_caption_weight=a.full_caption_weight, false_negatives=a.false_negatives,
        cache_dir=None if a.cache_dir == "none" else a.cache_dir,
        eval_every_epoch=a.eval_every_epoch, threads=a.threads, data_workers=a.data_workers,
        channels_last=a.channels_last, teacher=a.teacher, distill_weight=a.distill_weight, init=a.init, world=world)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    cfg = parse_args(argv)
    result = train(cfg, command="python data_scripts/pretrain_toy_clip.py " + shlex.join(argv))
    if "metrics" in result:
        print(json.dumps(result["metrics"], indent=2))


if __name__ == "__main__":
    main()
