"""Chapter 2's speed test: CLIP4DM (one backward pass) against leave-one-word-out (one text
pass per word), timed and counted in FLOPs on the same pairs."""
from __future__ import annotations

import time
from typing import Callable, NamedTuple, Sequence

import pandas as pd
from torch.utils.flop_counter import FlopCounterMode

from ...methods.clip4dm import AttributionConfig, clip4dm, leave_one_word_out
from ...models import load_image_batch
from ...models.factory import Clip


def gflop(fn: Callable[[], object]) -> float:
    """Floating-point operations of one call of ``fn``, in GFLOP: torch's FlopCounterMode
    counts matrix products and attention, forward and backward."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() / 1e9


def pairs_per_second(clip, images, captions: Sequence[str], cfg, device: str = "cpu",
                     batch_size: int | None = None, repeats: int = 1) -> dict[str, dict[str, float]]:
    """CLIP4DM (one forward + one backward pass) against leave-one-word-out (n + 1 text
    passes) on the same pairs (images: (N, 3, S, S)): ``pairs/s`` (best of ``repeats`` timed
    calls after a warm-up), ``GFLOP/pair`` (:func:`gflop`) and the ``GFLOP/s`` reached. The
    speed ratio the FLOPs allow is leave-one-word-out's GFLOP/pair over CLIP4DM's."""
    calls = {"CLIP4DM": lambda: clip4dm(clip, images, captions, cfg, device=device,
                                        batch_size=batch_size or len(captions)),
             "leave-one-word-out": lambda: leave_one_word_out(clip, images, captions, device=device)}
    out: dict[str, dict[str, float]] = {"pairs/s": {}, "GFLOP/pair": {}, "GFLOP/s": {}}
    for name, fn in calls.items():
        fn()  # warm-up
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        out["pairs/s"][name] = len(captions) / best
        out["GFLOP/pair"][name] = gflop(fn) / len(captions)
        out["GFLOP/s"][name] = out["GFLOP/pair"][name] * out["pairs/s"][name]
    return out


class Speed(NamedTuple):
    """pairs/s, GFLOP/pair and GFLOP/s per method (:func:`~fgclip.studies.clip4dm.speed.pairs_per_second`),
    the pairs timed, and CLIP4DM's speed-up over leave-one-word-out: measured and allowed by the FLOPs."""

    table: dict[str, dict[str, float]]
    n_pairs: int
    measured: float
    allowed: float


def speed(clip: Clip, df: pd.DataFrame, cfg: AttributionConfig, device: str = "cpu", n_pairs: int = 32) -> Speed:
    """Time CLIP4DM against leave-one-word-out on the first ``n_pairs`` pairs of ``df``."""
    n = min(n_pairs, len(df))
    _, inputs, index = load_image_batch(df.image.tolist()[:n], clip)
    table = pairs_per_second(clip, inputs[index], df.caption.tolist()[:n], cfg, device)
    return Speed(table, n, table["pairs/s"]["CLIP4DM"] / table["pairs/s"]["leave-one-word-out"],
                 table["GFLOP/pair"]["leave-one-word-out"] / table["GFLOP/pair"]["CLIP4DM"])
