"""An image index over several embeddings per image: FAISS when installed, exact numpy otherwise.

Both backends do exact inner-product search (FAISS ``IndexFlatIP``, numpy matmul plus
``argpartition``), so on the same data they return the same images. An image's score for
a query t is max_e <t, e_{i,e}>; to return the top k images exactly, the index fetches the
top k * E vectors (E = embeddings per image), which always contains each of the top k
images' best vector, and keeps the best score per image.
"""
from __future__ import annotations

import numpy as np

try:  # optional: faiss-cpu
    import faiss
except ImportError:  # pragma: no cover - depends on the environment
    faiss = None

BACKENDS = ("auto", "faiss", "numpy")


class EmbeddingIndex:
    """Stores (n_images, E, D) embeddings; ``search`` returns the top-k images per query."""

    def __init__(self, embeddings: np.ndarray, backend: str = "auto") -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if backend == "faiss" and faiss is None:
            raise ImportError("backend='faiss' needs faiss-cpu (pip install faiss-cpu)")
        if embeddings.ndim != 3:
            raise ValueError(f"embeddings must be (n_images, E, D), got shape {embeddings.shape}")
        self.backend = ("faiss" if faiss is not None else "numpy") if backend == "auto" else backend
        self.n_images, self.per_image, self.dim = embeddings.shape
        flat = np.ascontiguousarray(embeddings.reshape(-1, self.dim), dtype=np.float32)  # (n*E, D)
        self.owner = np.repeat(np.arange(self.n_images), self.per_image)  # vector -> image
        if self.backend == "faiss":
            self._index = faiss.IndexFlatIP(self.dim)
            self._index.add(flat)
        else:
            self._vectors = flat

    def __len__(self) -> int:
        return self.n_images * self.per_image

    def _top_vectors(self, queries: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
        """(Q, D) -> scores and vector ids of the m best vectors, best first: (Q, m) each."""
        if self.backend == "faiss":
            return self._index.search(queries, m)
        sims = queries @ self._vectors.T  # (Q, n*E)
        part = np.argpartition(-sims, m - 1, axis=1)[:, :m] if m < sims.shape[1] else \
            np.tile(np.arange(sims.shape[1]), (len(queries), 1))
        top = np.take_along_axis(sims, part, 1)
        order = np.argsort(-top, axis=1, kind="stable")
        return np.take_along_axis(top, order, 1), np.take_along_axis(part, order, 1)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k images per query by max similarity: scores (Q, k) and image ids (Q, k)."""
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if queries.shape[1] != self.dim:
            raise ValueError(f"queries have dim {queries.shape[1]}, the index {self.dim}")
        if not 1 <= k <= self.n_images:
            raise ValueError(f"k must be in 1..{self.n_images}, got {k}")
        scores, ids = self._top_vectors(queries, min(k * self.per_image, len(self)))
        out_s = np.empty((len(queries), k), np.float32)
        out_i = np.empty((len(queries), k), np.int64)
        for q in range(len(queries)):
            images = self.owner[ids[q]]
            _, first = np.unique(images, return_index=True)  # best vector of each image
            first = np.sort(first)[:k]  # in score order
            out_s[q], out_i[q] = scores[q, first], images[first]
        return out_s, out_i
