"""FOR speed and size per stage: backbone, SUM-CLIP head, dense features, clustering; index latency.

    .venv/bin/python benchmarks/bench_for.py [--images 16] [--maps 4 7 14] [--device cpu]
        [--model toy-rn] [--paper-model RN50] [--paper-maps 7 14] [--paper-images 2]
        [--sizes 100000 1000000]
    .venv/bin/python benchmarks/bench_for.py --readme   # only rebuild the README's FOR tables

1. Visual inference split into stages, each timed with warm-up, ``--repeats`` repeats
   (the median is reported) and a device synchronisation before every clock read:
   backbone (stem + 4 stages), SUM-CLIP head (pooling terms + decoder + N pooled
   queries), Cluster-CLIP dense features (MaskCLIP value path), and clustering per image
   with k-means and with agglomerative clustering (scikit-learn, on the CPU). Map sizes
   4x4, 7x7 and 14x14 come from input sides of 32x the map side (the ResNet's stride);
   the pooling is a fresh ``AttentionPool2d`` of that spatial size, so weights are random
   (speed does not depend on them). Each row records the stored vectors per image.
   Every row is timed twice over: the toy CLIP (``--model``, maps ``--maps``) and the paper's
   setting (``--paper-model`` RN50 at random weights, open_clip's architecture with
   ``pretrained=None``; maps 7x7 = 224 px, the paper's input, and 14x14 = 448 px). The head
   is the paper's, passed explicitly (``PAPER_HEAD``: N = 50 queries, t_i = U h_i without the
   m-residual, the whole pooling frozen), with its decoder at CLIP's width C (one layer, 8
   heads); not the chapter's small head (d = 16, 6 queries) nor SumClipHead's defaults.
   The SUM-CLIP / Cluster-CLIP ratio per map size and clustering method is
   (backbone + dense + clustering) / (backbone + head): where the backbone dominates,
   no clustering method can make the ratio large. The paper's "3x faster" needs
   clustering >= 2 x backbone + 3 x head - dense per image, i.e. a backbone that is cheap
   next to per-image clustering (a GPU backbone with CPU clustering, or large maps with
   agglomerative clustering); on a CPU, where the backbone costs most, it cannot hold.
   :mod:`fgclip.studies.for_retrieval.speed` reads the rows back: the README's table and
   chapter 3's sentence on speed are made from this file.
2. Index: mean latency of one query (top-50 images by max over each image's vectors)
   over synthetic unit vectors, FAISS (``IndexFlatIP``) vs exact numpy; both exact.

Writes benchmarks/results/for.json. A benchmark: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from open_clip.modified_resnet import AttentionPool2d
from sklearn.cluster import AgglomerativeClustering, KMeans

from fgclip.index import EmbeddingIndex
from fgclip.fileio import atomic_write_text
from fgclip.methods.sumclip import SumClipHead, pool_memory
from fgclip.models import create_clip
from fgclip.studies.for_retrieval.speed import load_speed, replace_readme_block

from common import RESULTS_DIR, write_benchmark

README = Path(__file__).resolve().parents[1] / "README.md"
PAPER_HEAD = {"residual": False, "train_out": False, "n_layers": 1, "n_heads": 8}  # d_model = C, N from --n-queries


def timed(fn, device: torch.device, warmup: int, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs, synchronised."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cluster_all(dense: np.ndarray, k: int, method: str, seed: int) -> None:
    """One clustering per image of (I, P, D) L2-normalised dense features."""
    for x in dense:
        if method == "k-means":
            KMeans(n_clusters=k, n_init=1, random_state=seed).fit(x)
        else:
            AgglomerativeClustering(n_clusters=k).fit(x)


@torch.no_grad()
def stage_rows(model: str, n_images: int, maps: list[int], n_queries: int, k: int, device: torch.device,
               warmup: int, repeats: int, seed: int) -> tuple[list[dict], dict[str, float]]:
    """Per-image ms of every stage of ``model`` (random weights) at each map side."""
    torch.manual_seed(seed)
    visual = create_clip(model, pretrained=None, device=str(device)).model.visual.eval()
    c = visual.attnpool.q_proj.in_features
    rows, ratios = [], {}
    for side in maps:
        x = torch.randn(n_images, 3, 32 * side, 32 * side, device=device)
        trunk = lambda: visual.layer4(visual.layer3(visual.layer2(visual.layer1(visual.stem(x)))))  # noqa: E731
        fmap = trunk()  # (I, C, side, side)
        pool = AttentionPool2d(side, c, visual.attnpool.num_heads, visual.attnpool.c_proj.out_features).to(device)
        head = SumClipHead(pool, n_queries=n_queries, d_model=c, **PAPER_HEAD).to(device).eval()
        flat = fmap.flatten(2).transpose(1, 2) + pool.positional_embedding[1:]  # (I, P, C)
        dense = torch.nn.functional.normalize(pool.c_proj(pool.v_proj(flat)), dim=-1).cpu().double().numpy()
        t = {"backbone": timed(trunk, device, warmup, repeats),
             "SUM-CLIP head": timed(lambda: head(pool_memory(pool, fmap)), device, warmup, repeats),
             "dense features": timed(lambda: pool.c_proj(pool.v_proj(flat)), device, warmup, repeats)}
        for method in ("k-means", "agglomerative"):
            t[method] = timed(lambda: cluster_all(dense, k, method, seed), device, min(warmup, 1), repeats)
        for stage, sec in t.items():
            vectors = n_queries if stage == "SUM-CLIP head" else k + 1 if stage in ("k-means", "agglomerative") else 0
            rows.append({"name": stage, "metric": f"{model} {side}x{side} map ({32 * side} px)",
                         "value": sec / n_images * 1e3, "unit": "ms/image", "model": model, "map": f"{side}x{side}",
                         "input_px": 32 * side, "stored_vectors_per_image": vectors})
        sum_clip = t["backbone"] + t["SUM-CLIP head"]
        for method in ("k-means", "agglomerative"):
            ratios[f"Cluster-CLIP ({method}) / SUM-CLIP time, {model} {side}x{side}"] = \
                (t["backbone"] + t["dense features"] + t[method]) / sum_clip
    return rows, ratios


def index_rows(n_vectors: int, per_image: int, dim: int, n_queries: int, k: int,
               seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n_vectors // per_image, per_image, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=-1, keepdims=True)
    queries = rng.standard_normal((n_queries, dim), dtype=np.float32)
    rows, found = [], {}
    for backend in ("faiss", "numpy"):
        index = EmbeddingIndex(emb, backend=backend)
        index.search(queries[:1], k)  # warm-up
        t0 = time.perf_counter()
        found[backend] = index.search(queries, k)[1]
        ms = (time.perf_counter() - t0) / n_queries * 1e3
        rows.append({"name": f"{backend} index", "metric": f"query latency at {n_vectors} vectors",
                     "value": ms, "unit": "ms/query", "stored_vectors": n_vectors})
        del index
    if not np.array_equal(found["faiss"], found["numpy"]):
        raise RuntimeError(f"faiss and numpy disagree at {n_vectors} vectors")
    return rows


def summary_lines(result: dict) -> list[str]:
    """This file's rows of run_all.py's combined table (the same format; a test compares)."""
    lines = [f"| for | {r['name']} | {r['metric']} | {r['value']:,.4g} {r['unit']} |" for r in result["rows"]]
    lines += [f"| for | **{name}** | ratio | **{ratio:.2f}x** |" for name, ratio in result.get("ratios", {}).items()]
    return lines + [f"| for | whole run | peak RSS | {result['peak_rss_mb']:,.0f} MB |"]


def replace_summary_lines(text: str, result: dict, source: str) -> str:
    """``text`` with its contiguous block of "| for |" table rows replaced by :func:`summary_lines`."""
    lines = text.split("\n")
    at = [i for i, line in enumerate(lines) if line.startswith("| for | ")]
    if not at or at != list(range(at[0], at[-1] + 1)):
        raise ValueError(f"{source}: no single contiguous block of '| for |' rows")
    return "\n".join(lines[:at[0]] + summary_lines(result) + lines[at[-1] + 1:])


def rebuild_tables() -> None:
    """The README's for-speed-table and the "| for |" rows of the README and summary.md, from for.json."""
    result = load_speed(RESULTS_DIR / "for.json")
    text = replace_readme_block(README.read_text(), result)
    atomic_write_text(README, replace_summary_lines(text, result, str(README)))
    summary = RESULTS_DIR / "summary.md"
    if summary.is_file():
        atomic_write_text(summary, replace_summary_lines(summary.read_text(), result, str(summary)))
    print(f"rebuilt the FOR rows of {README} and {summary}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=16)
    p.add_argument("--maps", type=int, nargs="+", default=[4, 7, 14], help="map sides")
    p.add_argument("--n-queries", type=int, default=50, help="SUM-CLIP queries N (the paper's 50)")
    p.add_argument("--k", type=int, default=3, help="Cluster-CLIP clusters")
    p.add_argument("--model", default="toy-rn", help="the toy CLIP (or any open_clip ResNet)")
    p.add_argument("--paper-model", default="RN50", help="the paper's backbone at random weights ('' to skip)")
    p.add_argument("--paper-maps", type=int, nargs="+", default=[7, 14], help="its map sides (7 = 224 px)")
    p.add_argument("--paper-images", type=int, default=2)
    p.add_argument("--readme", action="store_true", help="only rebuild the README's table from results/for.json")
    p.add_argument("--device", default="cpu")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.readme:
        rebuild_tables()
        return
    device = torch.device(a.device)
    rows, ratios = stage_rows(a.model, a.images, a.maps, a.n_queries, a.k, device, a.warmup, a.repeats, a.seed)
    if a.paper_model:
        more, more_ratios = stage_rows(a.paper_model, a.paper_images, a.paper_maps, a.n_queries, a.k, device,
                                       min(a.warmup, 1), a.repeats, a.seed)
        rows, ratios = rows + more, {**ratios, **more_ratios}
    for n in a.sizes:
        rows += index_rows(n, per_image=10, dim=128, n_queries=32, k=50, seed=a.seed)
    for n in a.sizes:
        lat = {r["name"]: r["value"] for r in rows if r.get("stored_vectors") == n}
        ratios[f"numpy / faiss latency at {n}"] = lat["numpy index"] / lat["faiss index"]
    path = write_benchmark("for", rows, ratios, "python " + shlex.join(sys.argv),
                           {"model": a.model, "paper_model": a.paper_model, "device": str(device),
                            "images": a.images, "paper_images": a.paper_images,
                            "head": {**PAPER_HEAD, "n_queries": a.n_queries, "d_model": "C (CLIP's width)"}})
    for r in rows:
        print(f"{r['name']:>16}  {r['metric']:<34} {r['value']:10.3f} {r['unit']}")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}x")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
