"""Train chapter 0's oracle (a small CNN on the toy world's per-cell ground truth) to
convergence and write it, with its selection record and held-out task scores, to a
checkpoint that chapter 0 reads at every build.

    PYTHONPATH=src python data_scripts/train_stage_oracle.py --out checkpoints/stage-oracle.pt

The learning rate and the epoch are chosen on the validation scenes' loss (eq-selection);
the test scores are on the held-out scenes chapter 0 measures the toy CLIPs on
(``STAGE_EVAL``), so the chapter can recompute them and check the record.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from fgclip.seeding import seed_everything
from fgclip.studies import stage as st
from fgclip.studies.stage_oracle import save_oracle
from fgclip.toyworld import ToyWorldConfig
from fgclip.train.pretrain import STAGE_EVAL
from fgclip.train.selection import SelectionGrid


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="checkpoints/stage-oracle.pt", help="where the checkpoint is written")
    p.add_argument("--n-fit", type=int, default=4000, help="training scenes")
    p.add_argument("--n-val", type=int, default=500, help="validation scenes (lr and epochs are chosen on them)")
    p.add_argument("--epochs", type=int, default=24, help="the step budget, in epochs")
    p.add_argument("--lrs", type=float, nargs="+", default=list(st.ORACLE_LRS), help="the learning-rate grid")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0, help="the training seed (initialisation and batch order)")
    a = p.parse_args(argv)
    for name in ("n_fit", "n_val", "epochs", "batch_size"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(a, name)}")
    return a


def main(argv: list[str] | None = None) -> dict:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    seed_everything(a.seed)
    world = ToyWorldConfig()
    scenes = st.stage_scenes(world, a.n_fit, a.n_val, STAGE_EVAL["n"], STAGE_EVAL["seed"])
    grid = SelectionGrid(lrs=tuple(a.lrs), seeds=(a.seed,), epochs=a.epochs)
    start = time.perf_counter()
    oracle, selection = st.fit_oracle(scenes, world.categories, grid, a.batch_size)
    seconds = round(time.perf_counter() - start)
    row = st.oracle_row(oracle, scenes, world.categories, st.phrase_trials(scenes.test))
    scores = {k: v for k, v in row.items() if k not in ("reader", "model")}
    command = "python data_scripts/train_stage_oracle.py " + " ".join(sys.argv[1:] if argv is None else argv)
    save_oracle(a.out, oracle, selection, world.categories, world.image_size, command.strip(), scores,
                n_fit=a.n_fit, n_val=a.n_val, seed=a.seed, scene_seed=STAGE_EVAL["seed"], train_seconds=seconds)
    summary = {"out": a.out, "lr": selection.lr, "epochs": selection.epochs, "converged": selection.converged,
               "val_loss": selection.score, "train_seconds": seconds, "test": scores}
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
