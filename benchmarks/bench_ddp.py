"""1 vs 2 processes for the same global batch: toy-CLIP pretraining under torchrun (gloo).

    .venv/bin/python benchmarks/bench_ddp.py [--steps 8] [--batch-size 256]

Both runs train the same model on the same toy data with the same global batch; the
2-process run gives each process half the batch and half the cores. The throughput is
the images/s the training loop logs over its last interval (the first interval, with
start-up and the first step's allocations, is dropped). Writes results/ddp.json.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from common import write_benchmark

REPO = Path(__file__).resolve().parents[1]


def throughput(nproc: int, steps: int, batch: int, cache: Path) -> float:
    """images/s of the last logged interval of a torchrun pretraining run."""
    out = Path(tempfile.mkdtemp(prefix=f"ddp{nproc}-"))
    threads = max(1, torch.get_num_threads() // nproc)
    cmd = [shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun")),
           "--standalone", f"--nproc_per_node={nproc}", str(REPO / "data_scripts" / "pretrain_toy_clip.py"),
           "--out-dir", str(out), "--n-train", str(batch * steps), "--epochs", "1",
           "--batch-size", str(batch), "--log-every", str(steps // 2), "--ckpt-every", str(10 * steps),
           "--cache-dir", str(cache), "--threads", str(threads),
           "--n-val", "32", "--n-test", "32"]  # precision auto; the finished model's metrics are not what is timed
    subprocess.run(cmd, check=True, cwd=REPO, capture_output=True)
    history = torch.load(out / "last.pt", weights_only=False, map_location="cpu")["history"]
    shutil.rmtree(out)
    return history[-1]["images_per_s"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=256, help="the global batch of both runs")
    a = p.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="ddp-cache-"))
    one = throughput(1, a.steps, a.batch_size, cache)
    rss_one = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # largest child so far
    two = throughput(2, a.steps, a.batch_size, cache)
    rss_any = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    shutil.rmtree(cache)
    rows = [{"name": "torchrun 1 process", "metric": "throughput", "value": one, "unit": "images/s"},
            {"name": "torchrun 2 processes", "metric": "throughput", "value": two, "unit": "images/s"},
            {"name": "torchrun 1 process", "metric": "peak RSS of the trainer", "value": rss_one, "unit": "MB"},
            {"name": "either run", "metric": "peak RSS of the largest process", "value": rss_any, "unit": "MB"}]
    out = write_benchmark("ddp", rows, {"2 processes / 1 process": two / one},
                          f"python benchmarks/bench_ddp.py --steps {a.steps} --batch-size {a.batch_size}",
                          extra={"global_batch": a.batch_size, "steps": a.steps})
    print(f"1 process {one:.0f} img/s, 2 processes {two:.0f} img/s, ratio {two / one:.2f}x -> {out}")


if __name__ == "__main__":
    main()
