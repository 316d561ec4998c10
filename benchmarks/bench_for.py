"""FOR speed and size: SUM-CLIP vs Cluster-CLIP visual inference, and index query latency.

    .venv/bin/python benchmarks/bench_for.py [--images 256] [--sizes 100000 1000000]

1. Visual inference, pixels to stored vectors, in one process on the same toy images:
   SUM-CLIP (backbone, pooling terms, head with N queries) and Cluster-CLIP (backbone,
   dense features, one k-means per image). Reports images/s, embeddings per image and
   their ratio. The weights do not change the speed, so a random init is used unless
   ``--pretrained`` names a checkpoint.
2. Index: mean latency of one query (top-50 images by max over each image's vectors)
   over 100k and 1M stored synthetic unit vectors (dim 128, 10 per image), FAISS
   (``IndexFlatIP``) vs exact numpy; both exact, and the benchmark checks they agree.

Writes benchmarks/results/for.json. A benchmark: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time

import numpy as np
import torch

from fgclip.index import EmbeddingIndex
from fgclip.methods.sumclip import SumClipHead
from fgclip.models import create_clip
from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.train.sumclip import encode_images_cluster, encode_images_sumclip

from common import write_benchmark


def inference_rows(images: np.ndarray, n_queries: int, k: int, pretrained: str | None,
                   seed: int) -> tuple[list[dict], float]:
    torch.manual_seed(seed)
    clip = create_clip("toy-rn", pretrained=pretrained)
    head = SumClipHead(clip.model.visual.attnpool, n_queries=n_queries).eval()
    runs = {"SUM-CLIP": lambda: encode_images_sumclip(clip, head, images),
            "Cluster-CLIP": lambda: encode_images_cluster(clip, images, k, seed)}
    rows, speed = [], {}
    for name, fn in runs.items():
        fn()  # warm-up (allocations, k-means imports)
        t0 = time.perf_counter()
        emb = fn()
        speed[name] = len(images) / (time.perf_counter() - t0)
        rows += [{"name": name, "metric": "visual inference", "value": speed[name], "unit": "images/s"},
                 {"name": name, "metric": "embeddings per image", "value": emb.shape[1], "unit": "vectors"}]
    return rows, speed["SUM-CLIP"] / speed["Cluster-CLIP"]


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--n-queries", type=int, default=10, help="SUM-CLIP queries N")
    p.add_argument("--k", type=int, default=3, help="Cluster-CLIP clusters")
    p.add_argument("--pretrained", default=None, help="toy-rn checkpoint (default: random init)")
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    images = np.stack([s.image for s in generate(ToyWorldConfig(), a.images, seed=a.seed, split="test")])
    rows, ratio = inference_rows(images, a.n_queries, a.k, a.pretrained, a.seed)
    for n in a.sizes:
        rows += index_rows(n, per_image=10, dim=128, n_queries=32, k=50, seed=a.seed)
    ratios = {"SUM-CLIP / Cluster-CLIP images/s": ratio}
    for n in a.sizes:
        lat = {r["name"]: r["value"] for r in rows if r.get("stored_vectors") == n}
        ratios[f"numpy / faiss latency at {n}"] = lat["numpy index"] / lat["faiss index"]
    path = write_benchmark("for", rows, ratios, "python " + shlex.join(sys.argv))
    for r in rows:
        print(f"{r['name']:>14}  {r['metric']:<38} {r['value']:10.3f} {r['unit']}")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}x")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
