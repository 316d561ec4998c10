# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # FOR: object-level open-vocabulary retrieval without forgetting
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/fgclip/fgclip-book/blob/main/notebooks/ch3_for.ipynb)
#
# Here a query is the name of an object, and the answer is a ranked list of images that
# contain one. A single global CLIP embedding {cite}`radford2021clip` per image is a poor
# fit: a small object among others barely moves it. The baseline this chapter starts
# from, Cluster-CLIP, stores a handful of vectors per image instead, one per cluster of
# the image's dense CLIP features {cite}`zhou2022maskclip`. FOR {cite}`arxiv241218806`
# learns those vectors: its SUM-CLIP head feeds $N$ learnable queries, refined by
# DETR-style decoder layers {cite}`carion2020detr`, through CLIP's own final attention
# pooling with its projections frozen, and trains them with two set losses, one on the
# labelled *base* categories and one on pseudo-labels that a Cluster-CLIP teacher assigns
# from a large open vocabulary. The second loss is what is meant to keep the *novel*
# categories, which have no labels at all, from being forgotten.
#
# We build every piece on the toy ResNet CLIP, measure it on the toy world's base/novel
# split, and then test the claim a sceptical reader cares about most: does the novel
# gain depend on a pseudo-label threshold that was tuned where it should not have been?

# %% tags=["remove-cell"]
# On Colab, install the project first; elsewhere this cell does nothing.
import os
import sys

if "google.colab" in sys.modules and not os.path.isdir("fgclip-book"):
    os.system("git clone -q https://github.com/fgclip/fgclip-book && pip -q install -e fgclip-book")
    os.chdir("fgclip-book/notebooks")

# %% tags=["parameters"]
seed = 0  # data split, k-means, query init, batch order and label subsets all derive from it
model = "toy-rn"  # a toy config or an open_clip ResNet name ("RN50")
pretrained = "toy"  # toy: the committed checkpoint; or a checkpoint path; or e.g. openai
data_root = "../data/ch3"  # where the toy world is exported, or a real COCO root
train_split = "train"  # COCO split the head is trained on ("train2017" on real COCO)
eval_split = "test"  # COCO split retrieval is measured on ("val2017" on real COCO)
n_train = 800  # training images (the held-out 10% for the threshold is taken from these)
n_eval = 500  # retrieval gallery
novel_categories = []  # real data only: the novel names (the toy world records its own split)
vocabulary_file = ""  # real data only: one open-vocabulary name per line
prompt = "a {}"  # text template for category and vocabulary names
k_clusters = 3  # Cluster-CLIP: k-means clusters per image (plus the global embedding)
n_queries = 10  # SUM-CLIP: learnable queries N (the paper uses 50)
n_layers = 1  # decoder layers
d_model = 128  # decoder width
epochs = 4
batch_size = 128
lr = 2e-3
fixed_threshold = 5e-4  # the paper's pseudo-label threshold, used as the "fixed" setting
holdout_fraction = 0.1  # share of the training images used only to choose the threshold
label_fractions = [0.01, 0.1]  # labelled-data sweep (1.0 is the main run)
query_counts = [1, 3]  # N sweep (n_queries is the main run)
device = "cpu"
precision = "fp32"  # head training: "fp32" (the reference) or "bf16" autocast; benchmarks/bench_heads.py measures both
results_path = ""  # set by `python -m fgclip run`: where the headline numbers go as JSON

# %%
import time
from pathlib import Path

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import display

from fgclip.datasets import read_coco_split
from fgclip.evaluation import encode_texts
from fgclip.index import EmbeddingIndex
from fgclip.losses.matching import choose_threshold, label_f1, log_grid, teacher_scores
from fgclip.methods.cluster_clip import cluster_clip_embeddings
from fgclip.methods.sumclip import SumClipHead
from fgclip.metrics.object_retrieval import max_similarity, object_retrieval_map
from fgclip.models import create_clip
from fgclip.reporting import found_box, write_results
from fgclip.seeding import seed_everything
from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.toyworld.export import export_coco, load_toyworld_meta
from fgclip.train.sumclip import (HeadTrainConfig, embed, encode_frozen, encode_images_cluster,
                                  encode_images_sumclip, label_matrix, load_images, subsample_labels,
                                  targets_from, train_head)
from fgclip.viz import set_style
from fgclip.viz.retrieval import make_retrieval_draw
from fgclip.viz.widgets import InteractiveFigure

set_style()
seed_everything(seed)
t_start = time.perf_counter()
print(f"seed={seed}, model={model}, pretrained={pretrained}, device={device}")

# %% [markdown]
# ## Data: the toy world as COCO, read back with pycocotools
#
# The toy world is exported at its native 64 px (the toy ResNet CLIP was pretrained on
# those images upsampled to its 128 px input, so we feed it the same kind of picture) as
# two COCO splits. `toyworld.json` records the base/novel split, 12 base and 4 novel
# shapes, and the open vocabulary: the 16 drawn shape names plus 122 names that never
# appear in any image, standing in for ImageNet-21K. Novel objects are in the training
# images, as in the paper, but their labels are never used for training.

# %%
root = Path(data_root)
world = ToyWorldConfig()
for split, n in ((train_split, n_train), (eval_split, n_eval)):
    if not (root / "annotations" / f"instances_{split}.json").is_file():
        export_coco(generate(world, n, seed=seed, split=split), root, split, world, seed)
train_records = read_coco_split(root, train_split, captions=False)[:n_train]
eval_records = read_coco_split(root, eval_split, captions=False)[:n_eval]
for split, recs, n in ((train_split, train_records, n_train), (eval_split, eval_records, n_eval)):
    if len(recs) < n:
        raise ValueError(f"{root} split {split!r} has {len(recs)} images, fewer than the {n} asked for")
meta = load_toyworld_meta(root)
if meta is not None:
    novel = meta["category_split"]["novel"]
    vocab = meta["open_vocabulary"]
else:
    novel = list(novel_categories)
    vocab = Path(vocabulary_file).read_text().split("\n")
    vocab = [v.strip() for v in vocab if v.strip()]
categories = sorted({c for r in train_records + eval_records for c in r.labels})
base = [c for c in categories if c not in novel]
vocab = vocab + [c for c in categories if c not in vocab]  # every category is a vocabulary name
clip = create_clip(model, pretrained=pretrained, device=device)
size = None if meta is not None else clip.image_size  # real photos: resize and centre-crop
train_images = load_images([r.image_path for r in train_records], size)
eval_images = load_images([r.image_path for r in eval_records], size)
print(f"{len(train_records)} training and {len(eval_records)} evaluation images from {root}")
print(f"base ({len(base)}): {', '.join(base)}\nnovel ({len(novel)}): {', '.join(novel)}")
print(f"open vocabulary: {len(vocab)} names")

# %% [markdown]
# ## The frozen CLIP, once
#
# CLIP's ResNet ends in an attention pooling. With the layer-4 map $f_1,\dots,f_P$
# ($P = hw$, here $4\times 4$), positional embeddings $p_0,\dots,p_P$ and the mean token
# $m = \frac1P\sum_j f_j$, the image embedding is
#
# $$ e = W_c\,\mathrm{MHA}\big(q = W_q(m+p_0),\; K = W_k[m+p_0,\, f_j+p_j],\; V = W_v[m+p_0,\, f_j+p_j]\big). $$
#
# Because the backbone and $W_q, W_k, W_v, W_c$ stay frozen in FOR, everything any method
# here needs from an image is computed once: the global embedding $e$, the dense
# features $v_j = W_c W_v (f_j + p_j)$ (the value path alone, as in MaskCLIP) and the
# pooling's keys and values. Text queries use the prompt `a {name}`.

# %%
t0 = time.perf_counter()
train_feats = encode_frozen(clip, train_images)
eval_feats = encode_frozen(clip, eval_images)
print(f"encoded {len(train_images) + len(eval_images)} images in {time.perf_counter() - t0:.1f} s")
logit_scale = clip.model.logit_scale.exp().item()
base_text = encode_texts(clip, [prompt.format(c) for c in base]).cpu()
vocab_text = encode_texts(clip, [prompt.format(v) for v in vocab]).cpu()
query_text = encode_texts(clip, [prompt.format(c) for c in categories]).cpu()
grid = tuple(eval_feats.dense.shape[-2:])
relevant = label_matrix([r.labels for r in eval_records], categories).T  # (categories, images)
groups = {"base": base, "novel": novel}


def evaluate(embeddings):
    """mAP@50 and mAP for base and novel queries, ranking by max similarity."""
    res = object_retrieval_map(max_similarity(query_text, embeddings), relevant, categories, groups)
    return {f"{g} {m}": v[m] for g, v in res.items() for m in ("mAP@50", "mAP")}


# %% [markdown]
# ## Cluster-CLIP, the baseline and the teacher
#
# Each image's $P$ dense features are L2-normalised and split into $k$ clusters by
# k-means (scikit-learn, seeded); the normalised mean of each cluster is one embedding,
# and the global embedding is kept next to them, $k + 1$ vectors per image. We chose
# k-means over agglomerative clustering because it gives every image the same number of
# vectors (the index size is then known in advance) and its one random choice is seeded.
# An image's score for a name $t$ is $\max_i \langle t, e_i\rangle$.

# %%
baselines = {"CLIP global": eval_feats.pooled[:, None].cpu(),
             f"Cluster-CLIP (k={k_clusters})": cluster_clip_embeddings(
                 eval_feats.dense, eval_feats.pooled, k_clusters, seed)}
rows = {name: {**evaluate(e), "embeddings/image": e.shape[1]} for name, e in baselines.items()}
display(pd.DataFrame(rows).T.style.format("{:.3f}"))

# %% [markdown]
# ## Pseudo-labels and where their threshold comes from
#
# The teacher is Cluster-CLIP run on the training images. For vocabulary name $v$ with
# text embedding $t_v$ and logit scale $s$ (CLIP's own),
#
# $$ \mathrm{score}(v) = \max_k \operatorname{softmax}_v\big(s\,\langle c_k, t_v\rangle\big), \qquad v \text{ accepted} \iff \mathrm{score}(v) > \tau . $$
#
# The paper sets $\tau = 5\times10^{-4}$ by a search whose data it does not name. We
# choose $\tau$ on a seeded held-out 10% of the *training* images, using only what
# training may see there: the F1 of the accepted labels against the base-category labels
# (novel labels are unknown at training time). The toy world also knows every novel
# object, so we can measure what neither the paper nor a real user can: the precision of
# the accepted pseudo-labels against the complete ground truth.

# %%
t0 = time.perf_counter()
teacher = cluster_clip_embeddings(train_feats.dense, train_feats.pooled, k_clusters, seed)
scores = teacher_scores(teacher, vocab_text, logit_scale)  # (train images, vocabulary)
truth = label_matrix([r.labels for r in train_records], vocab)  # complete toy ground truth
print(f"teacher on {len(train_records)} images in {time.perf_counter() - t0:.1f} s")
perm = np.random.default_rng(seed).permutation(len(train_records))
held = torch.as_tensor(perm[:max(1, round(holdout_fraction * len(perm)))])
train_idx = torch.as_tensor(np.sort(perm[len(held):]))
base_cols = torch.tensor([vocab.index(c) for c in base])
novel_cols = torch.tensor([vocab.index(c) for c in novel])
candidates = log_grid(1e-5, 0.5, 15) + [fixed_threshold]
tau_held, table = choose_threshold(scores[held][:, base_cols], truth[held][:, base_cols], candidates)


never_cols = torch.tensor([j for j, v in enumerate(vocab) if v not in categories])


def pseudo_quality(tau):
    """Accepted pseudo-labels on the training part, against the complete toy ground truth."""
    s, t = scores[train_idx], truth[train_idx]
    novel_q = label_f1(s[:, novel_cols], t[:, novel_cols], tau)
    return {"threshold": tau, **label_f1(s, t, tau), "novel precision": novel_q["precision"],
            "novel recall": novel_q["recall"],
            "never-drawn accepted/image": (s[:, never_cols] > tau).sum(1).float().mean().item()}


quality = pd.DataFrame([pseudo_quality(t) for t in log_grid(1e-5, 0.5, 15)])
fig, ax = plt.subplots(figsize=(7, 3))
for col in ("precision", "recall", "novel precision", "novel recall"):
    ax.plot(quality["threshold"], quality[col], marker=".", label=col)
for tau, name in ((tau_held, "held-out choice"), (fixed_threshold, "paper's fixed value")):
    ax.axvline(tau, ls="--", color="gray")
    ax.text(tau, 1.02, name, fontsize=7, rotation=0, ha="center")
ax.set(xscale="log", xlabel="threshold τ", ylabel="pseudo-label quality", ylim=(0, 1.1),
       title="Teacher pseudo-labels on the training images vs complete toy ground truth")
ax.legend(fontsize=7)
plt.show()
pq = pd.DataFrame([pseudo_quality(tau_held), pseudo_quality(fixed_threshold)],
                  index=["held-out τ", "fixed τ (paper)"])
display(pq.style.format("{:.3g}"))

# %% [markdown]
# ## SUM-CLIP and the two losses
#
# SUM-CLIP swaps the mean token for $N$ tokens $t_i = m + U h_i$, with
# $h = \mathrm{Dec}(Q, f)$ the $N$ learnable queries $Q$ after DETR-style decoder layers
# over the feature map, and pools each exactly as CLIP pools $m$, with the projections
# frozen: $e_i = W_c\,\mathrm{MHA}(W_q(t_i+p_0), \dots)$. $U$ starts at zero, so training
# starts from CLIP's global embedding in every slot; with a single token equal to $m$ the
# pooling reproduces CLIP's embedding exactly (a unit test checks it). Our decoder works
# at width 128 with linear maps to and from CLIP's 1,024 channels, a CPU-sized deviation.
#
# Both losses are DETR's set loss: with $p_i(v) = \operatorname{softmax}_v(s\langle e_i, t_v\rangle)$,
# the Hungarian method (scipy's `linear_sum_assignment`) finds the one-to-one assignment
# $\sigma$ of an image's targets $y_j$ to embeddings that minimises
# $\sum_j -\log p_{\sigma(j)}(y_j)$. As in DETR, the softmax has one extra, learnable
# "no object" logit, and every embedding left unmatched is pushed to it with weight
# $w_0 = 0.1$:
#
# $$ \ell = \frac{\sum_j -\log p_{\sigma(j)}(y_j) + w_0 \sum_{i\ \text{unmatched}} -\log p_i(\varnothing)}{\#\text{matched} + w_0\,\#\text{unmatched}} . $$
#
# We found the no-object term necessary, not optional: without it, an embedding that
# learned "circle" on the images where it was matched keeps answering "circle" on every
# image, and ranking by the maximum over embeddings turns that into false positives (in a
# first run, supervised training then *lowered* base retrieval below CLIP's global
# embedding). An image without labels (the semi-supervised sweep) gets no term at all.
# The total is
#
# $$ \mathcal L = \mathcal L_{\text{sup}}(\text{base labels};\ \text{base names}) + \mathcal L_{\text{pl}}(\text{accepted pseudo-labels};\ \text{open vocabulary}). $$
#
# Only the head trains (on the cached features); the held-out 10% is not trained on.

# %%
base_targets = targets_from(label_matrix([r.labels & set(base) for r in train_records], base))
memory = train_feats.memory.select(train_idx)
sup_all = [base_targets[i] for i in train_idx]


def pl_targets(tau, oracle=False):
    acc = scores[train_idx] > tau
    return targets_from(acc & truth[train_idx] if oracle else acc)


def run(name, sup=sup_all, pl=None, w_sup=1.0, w_pl=1.0, n=n_queries):
    """Train one SUM-CLIP head from the same seed and evaluate it on the gallery."""
    torch.manual_seed(seed)
    head = SumClipHead(clip.model.visual.attnpool, n, n_layers, d_model).to(device)
    cfg = HeadTrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, w_sup=w_sup, w_pl=w_pl, seed=seed,
                          precision=precision)
    t0 = time.perf_counter()
    train_head(head, memory, sup, pl if pl is not None else [None] * len(sup),
               base_text.to(device), vocab_text.to(device), logit_scale, cfg)
    emb, attn = (x.cpu() for x in embed(head, eval_feats.memory))
    rows[name] = {**evaluate(emb), "embeddings/image": n}
    print(f"{name}: trained in {time.perf_counter() - t0:.1f} s, final losses {cfg.history[-1]}")
    return head, emb, attn


pl_held = pl_targets(tau_held)
run("SUM-CLIP supervised only", w_pl=0.0)
run("SUM-CLIP pseudo-labels only", pl=pl_held, w_sup=0.0)
head, eval_emb, eval_attn = run("FOR (both losses)", pl=pl_held)
main = pd.DataFrame(rows).T
display(main.style.format("{:.3f}"))

# %%
plot = main[["base mAP@50", "novel mAP@50"]].reset_index(names="method").melt(
    id_vars="method", var_name="split", value_name="mAP@50")
fig, ax = plt.subplots(figsize=(7, 3.2))
sns.barplot(plot, y="method", x="mAP@50", hue="split", ax=ax)
ax.set(xlim=(0, 1), title=f"Object retrieval on {len(eval_records)} toy images (seed {seed})")
plt.show()

# %% [markdown]
# ## How much labelled data, and how many queries
#
# The paper's semi-supervised claim: with base labels on only 1-10% of the images (and
# pseudo-labels on all of them) novel retrieval stays close to the fully labelled run.
# And the number of queries $N$: one query is a global embedding learned end to end.

# %%
for frac in label_fractions:
    run(f"FOR, {frac:.0%} labelled", sup=subsample_labels(sup_all, frac, seed), pl=pl_held)
for n in query_counts:
    run(f"FOR, N={n}", pl=pl_held, n=n)
sweep = pd.DataFrame(rows).T.loc[[f"FOR, {f:.0%} labelled" for f in label_fractions] + ["FOR (both losses)"]
                                 + [f"FOR, N={n}" for n in query_counts]]
display(sweep.style.format("{:.3f}"))

# %% [markdown]
# ## Speed and size
#
# Visual inference from pixels to stored vectors, in one run on the same images:
# SUM-CLIP (backbone, pooling terms, head) against Cluster-CLIP (backbone, dense
# features, one k-means per image). The index part (FAISS when installed, exact numpy
# otherwise; both exact) answers a query over the gallery's stored vectors;
# `benchmarks/bench_for.py` measures it at 100k and 1M vectors.

# %%
speed_images = eval_images[:256]
t0 = time.perf_counter()
encode_images_sumclip(clip, head, speed_images)
t_sum = time.perf_counter() - t0
t0 = time.perf_counter()
encode_images_cluster(clip, speed_images, k_clusters, seed)
t_clu = time.perf_counter() - t0
index = EmbeddingIndex(eval_emb.numpy())
t0 = time.perf_counter()
index.search(query_text.numpy(), 50)
t_q = (time.perf_counter() - t0) / len(query_text)
speed = pd.DataFrame({"images/s": [len(speed_images) / t_sum, len(speed_images) / t_clu],
                      "embeddings/image": [n_queries, k_clusters + 1]},
                     index=["SUM-CLIP", "Cluster-CLIP"])
display(speed.style.format("{:.1f}"))
print(f"SUM-CLIP / Cluster-CLIP speed ratio: {t_clu / t_sum:.2f}x; "
      f"{index.backend} index over {len(index)} vectors: {t_q * 1e3:.2f} ms per query")

# %% [markdown]
# ## Try it
#
# Type a name (a drawn shape, or one of the never-drawn vocabulary names, to see what the
# model does with a query that has no answer): the top images by max similarity, each
# with the attention of the winning query over the $4\times4$ map; white boxes are the
# toy ground truth.

# %%
name_to_text = {c: t for c, t in zip(categories, query_text)}


def encode_name(name):
    if name not in name_to_text:
        name_to_text[name] = encode_texts(clip, [prompt.format(name)]).cpu()[0]
    return name_to_text[name]


draw = make_retrieval_draw(encode_name, eval_emb, eval_attn, eval_images, grid,
                           labels=[r.labels for r in eval_records],
                           boxes=[r.boxes for r in eval_records])
widget = InteractiveFigure(draw, {"name": widgets.Text(value=novel[0], description="object"),
                                  "k": widgets.IntSlider(value=5, min=2, max=8, description="top k")})
widget.show()

# %% [markdown]
# ## Critique
#
# The load-bearing part of FOR is the pseudo-label loss: the paper's own ablation shows
# that supervised training alone wrecks the novel categories, and the pseudo-labels are
# what brings them back. Two things about those pseudo-labels are left open. The
# threshold $\tau = 5\times10^{-4}$ came from a search on unnamed data; if that data was
# the evaluation split, the novel numbers are partly tuned to the test. And the
# pseudo-labels are admitted to be noisy, yet their precision is never measured. A second,
# quieter issue is circularity: the teacher is Cluster-CLIP, which is also the baseline,
# so a "gain over Cluster-CLIP on novel categories" is a student beating its teacher
# with the teacher's own labels plus base supervision. The longer argument is on
# [the critique page](../book/ch3_critique.md).
#
# ## Falsification: threshold chosen honestly, noise measured, wrong labels removed
#
# The test (run here, not described): (1) the threshold is chosen on the held-out 10% of
# the training images, never on the gallery, and compared with the paper's single fixed
# value; (2) the accepted pseudo-labels' precision is measured against the toy world's
# complete ground truth (table above); (3) FOR is retrained with every wrong
# pseudo-label removed. If the novel gain over Cluster-CLIP is real and comes from
# pseudo-label knowledge transfer, it should survive (1) and grow or hold under (3).

# %%
run("FOR, fixed τ (paper)", pl=pl_targets(fixed_threshold))
run("FOR, wrong pseudo-labels removed", pl=pl_targets(tau_held, oracle=True))
cluster_name = f"Cluster-CLIP (k={k_clusters})"
fals = pd.DataFrame(rows).T.loc[[cluster_name, "FOR (both losses)", "FOR, fixed τ (paper)",
                                 "FOR, wrong pseudo-labels removed"]]
fals["novel mAP@50 - Cluster-CLIP"] = fals["novel mAP@50"] - rows[cluster_name]["novel mAP@50"]
display(fals.style.format("{:.3f}"))

# %% [markdown]
# ## What we found

# %%
allrows = pd.DataFrame(rows).T
r_for, r_clu = allrows.loc["FOR (both losses)"], allrows.loc[cluster_name]
r_sup, r_glob = allrows.loc["SUM-CLIP supervised only"], allrows.loc["CLIP global"]
gain = r_for["novel mAP@50"] - r_clu["novel mAP@50"]
gain_fixed = fals.loc["FOR, fixed τ (paper)", "novel mAP@50 - Cluster-CLIP"]
gain_clean = fals.loc["FOR, wrong pseudo-labels removed", "novel mAP@50 - Cluster-CLIP"]
sup_gain = r_sup["novel mAP@50"] - r_clu["novel mAP@50"]
verdict = "beats" if gain > 0 else "does not beat"
display(found_box(f"What we found (seed {seed}, {len(train_idx)} training and {len(eval_records)} gallery images, one run)", [
    f"FOR {verdict} Cluster-CLIP on novel categories here: novel mAP@50 **{r_for['novel mAP@50']:.3f}** "
    f"vs {r_clu['novel mAP@50']:.3f} ({gain:+.3f}); base {r_for['base mAP@50']:.3f} vs {r_clu['base mAP@50']:.3f}. "
    f"The CLIP global embedding gets {r_glob['novel mAP@50']:.3f} novel.",
    f"Supervised-only training reaches base {r_sup['base mAP@50']:.3f} and novel {r_sup['novel mAP@50']:.3f}; "
    f"adding the pseudo-label loss changes novel by {r_for['novel mAP@50'] - r_sup['novel mAP@50']:+.3f}.",
    f"The threshold chosen on the held-out 10% of training images is τ = {tau_held:.2g} (paper: {fixed_threshold:g}). "
    f"Accepted pseudo-labels: precision {pq.loc['held-out τ', 'precision']:.2f} at the held-out τ and "
    f"{pq.loc['fixed τ (paper)', 'precision']:.2f} at the fixed τ ({pq.loc['fixed τ (paper)', 'accepted_per_image']:.1f} "
    f"names per image for {truth[train_idx].sum(1).float().mean():.1f} objects: a uniform softmax over "
    f"{len(vocab)} names already gives each {1 / len(vocab):.4f}, above the paper's τ, which was set for "
    f"about 21,000 names); novel precision {pq.loc['held-out τ', 'novel precision']:.2f} / "
    f"{pq.loc['fixed τ (paper)', 'novel precision']:.2f}.",
    f"Novel gain over Cluster-CLIP: {gain:+.3f} (held-out τ), {gain_fixed:+.3f} (fixed τ), "
    f"{gain_clean:+.3f} (wrong pseudo-labels removed): the gain {'survives' if gain > 0 else 'does not survive'} "
    f"the threshold chosen on held-out training images and {'survives' if gain_fixed > 0 else 'does not survive'} "
    f"the paper's fixed τ; removing the wrong pseudo-labels changes novel mAP@50 by {gain_clean - gain:+.3f}.",
    f"Where the gain comes from: supervised-only training is {sup_gain:+.3f} against Cluster-CLIP on novel, "
    + ("so all of the gain arrives with the pseudo-label loss." if sup_gain <= 0 else
       "so the pseudo-labels add nothing beyond it here." if sup_gain >= gain else
       "so the pseudo-label loss adds the rest."),
    f"Cluster-CLIP {'beats' if r_clu['novel mAP@50'] > r_glob['novel mAP@50'] else 'does not beat'} CLIP's "
    f"global embedding here (novel {r_clu['novel mAP@50']:.3f} vs {r_glob['novel mAP@50']:.3f}, base "
    f"{r_clu['base mAP@50']:.3f} vs {r_glob['base mAP@50']:.3f})."
    + ("" if r_clu['novel mAP@50'] > r_glob['novel mAP@50'] else
       f" Our reading: the toy ResNet's map is {grid[0]}×{grid[1]}, so one cell spans 1/{grid[1]} of the "
       "image side and a cluster mixes an object with background or a neighbour; the teacher inherits that, "
       "which caps what its pseudo-labels can teach."),
    "Labelled-data sweep, novel mAP@50: " + ", ".join(
        f"{f:.0%} {allrows.loc[f'FOR, {f:.0%} labelled', 'novel mAP@50']:.3f}" for f in label_fractions)
    + f", 100% {r_for['novel mAP@50']:.3f}. Queries: " + ", ".join(
        f"N={n} {allrows.loc[f'FOR, N={n}', 'novel mAP@50']:.3f}" for n in query_counts)
    + f", N={n_queries} {r_for['novel mAP@50']:.3f}.",
    f"SUM-CLIP visual inference ran at {t_clu / t_sum:.2f}x Cluster-CLIP's speed with {n_queries} vs "
    f"{k_clusters + 1} vectors per image.",
    "One seed and four novel categories: differences of a few points are within what a different "
    "seed could change; we have not run the seed sweep that would bound them.",
]))
write_results(results_path, {
    "seed": seed, "n_train": int(len(train_idx)), "n_eval": len(eval_records),
    "threshold_heldout": tau_held, "threshold_fixed": fixed_threshold,
    "pseudo_label_quality": pq.to_dict(orient="index"),
    "speed": {"sumclip_images_per_s": len(speed_images) / t_sum,
              "cluster_images_per_s": len(speed_images) / t_clu, "ratio": t_clu / t_sum},
    "metrics": allrows.to_dict(orient="index"),
    "wall_s": time.perf_counter() - t_start,
})
