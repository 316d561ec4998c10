"""Cluster-CLIP: a few object embeddings per image from clustered dense CLIP features.

The baseline (and the pseudo-label teacher) of FOR. An image's dense features
v_{r,c} in CLIP's joint space (:func:`fgclip.models.encode_image_dense`) are
L2-normalised and grouped into K clusters S_1..S_K by k-means; each cluster gives one
embedding, the normalised mean of its members,

    e_k = normalize( (1/|S_k|) sum_{(r,c) in S_k} v_{r,c} / ||v_{r,c}|| ),

and the image's global pooled embedding e_0 is kept next to them, so the image is
stored as K + 1 vectors.

Why k-means (scikit-learn's ``KMeans``) and not agglomerative clustering: k-means gives
exactly K embeddings for every image, so the index stores a fixed number of vectors per
image (what the paper's speed/size comparison counts), and its only random choice, the
initialisation, is seeded from a parameter. Agglomerative clustering with a distance
threshold would give a variable count that depends on the feature scale of each backbone.
"""
from __future__ import annotations

import numpy as np
import torch
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits


def cluster_image(dense: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """(P, D) dense features of one image -> (k, D) L2-normalised cluster means (Eq. (eq-cluster-clip)).

    ``k`` larger than the number of positions P is an error (it names ``k``).
    """
    if dense.ndim != 2:
        raise ValueError(f"dense must be (positions, dim), got shape {dense.shape}")
    if not 1 <= k <= dense.shape[0]:
        raise ValueError(f"k must be in 1..{dense.shape[0]} (the number of positions), got {k}")
    x = dense / np.linalg.norm(dense, axis=1, keepdims=True).clip(min=1e-12)  # (P, D)
    if k == 1:
        centers = x.mean(0, keepdims=True)
    else:
        km = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(x.astype(np.float64))
        # Means of the members (not km.cluster_centers_, which could differ by the
        # last update); a cluster k-means left empty cannot happen for a fitted model.
        centers = np.stack([x[km.labels_ == j].mean(0) for j in range(k)])
    return centers / np.linalg.norm(centers, axis=1, keepdims=True).clip(min=1e-12)


def cluster_clip_embeddings(dense: torch.Tensor, pooled: torch.Tensor, k: int, seed: int = 0,
                            include_global: bool = True) -> torch.Tensor:
    """Cluster-CLIP embeddings of a batch.

    dense: (B, D, h, w) dense features; pooled: (B, D) global embeddings.
    Returns (B, k + include_global, D), L2-normalised; the global embedding comes first.
    """
    if dense.ndim != 4 or pooled.ndim != 2 or dense.shape[:2] != pooled.shape:
        raise ValueError(f"expected dense (B, D, h, w) and pooled (B, D), got "
                         f"{tuple(dense.shape)} and {tuple(pooled.shape)}")
    flat = dense.flatten(2).transpose(1, 2).float().cpu().numpy()  # (B, h*w, D)
    # One thread per fit: thousands of 16-point problems are ten times faster this way
    # than with sklearn's BLAS/OpenMP pools starting per call (measured on 2 shared cores).
    with threadpool_limits(1):
        out = [torch.from_numpy(cluster_image(f, k, seed)).float() for f in flat]  # B x (k, D)
    emb = torch.stack(out)  # (B, k, D)
    if include_global:
        glob = torch.nn.functional.normalize(pooled.float().cpu(), dim=-1)[:, None]  # (B, 1, D)
        emb = torch.cat([glob, emb], dim=1)
    return emb
