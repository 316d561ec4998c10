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
# We build every piece on the toy ResNet CLIP and measure it the way a referee would ask:
# the novel split rotates over disjoint folds that together cover every drawn category,
# every trained arm runs under several seeds, every choice (Cluster-CLIP's $k$, the
# pseudo-label threshold) is made on held-out *training* images, and every comparison
# stated in words comes from a paired verdict with its interval
# ({mod}`fgclip.verdicts`). The falsification asks whether the pseudo-label loss is what
# keeps novel categories from being forgotten, with a planted teacher that must show the
# effect and a shuffled one that must not.

# %% tags=["remove-cell"]
# On Colab, install the project (a shallow clone, a regular install that keeps Colab's own
# torch) and work in its notebooks folder, on every run; elsewhere this cell does nothing.
import os
import subprocess
import sys

if "google.colab" in sys.modules:
    home = "/content/fgclip-book"
    if not os.path.isdir(home):
        subprocess.run(["git", "clone", "-q", "--depth", "1", "https://github.com/fgclip/fgclip-book", home],
                       check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", home], check=True)
    import importlib
    importlib.invalidate_caches()  # the running interpreter sees the new package without a restart
    os.environ["FGCLIP_HOME"] = home  # where the installed package finds checkpoints/ and notebooks/
    os.chdir(f"{home}/notebooks")

# %% tags=["parameters"]
seed: int = 0  # folds, data split, k-means, query init, batch order and label shuffles all derive from it
n_seeds: int = 3  # training seeds per fold (seed, seed + 1, ...) [at least 1]
n_folds: int = 4  # the novel split rotates over this many disjoint folds of the drawn categories [at least 2]
model: str = "toy-rn"  # a toy config or an open_clip ResNet name ("RN50")
pretrained: str = "toy"  # toy: the committed checkpoint; or a checkpoint path; or e.g. openai
data_root: str = "../data/ch3"  # where the toy world is exported, or a real COCO root
train_split: str = "train"  # COCO split the head is trained on ("train2017" on real COCO)
eval_split: str = "test"  # COCO split retrieval is measured on ("val2017" on real COCO)
n_train: int = 600  # training images (the validation part is carved from these) [> 0]
n_eval: int = 500  # retrieval gallery [> 0]
novel_categories: list = []  # real data only: one fixed novel split (the toy world rotates folds)
base_categories: list = []  # real data only: the base names; other categories are dropped (48/17 on COCO)
vocabulary_file: str = ""  # real data only: one open-vocabulary name per line (never extended)
prompt: str = "a {}"  # text template for category and vocabulary names
k_candidates: list[int] = [1, 2, 3, 4, 6]  # Cluster-CLIP's k, chosen on the validation images [non-empty; each at least 1]
n_queries: int = 6  # SUM-CLIP: learnable queries N (the paper uses 50) [at least 1]
n_layers: int = 1  # decoder layers [at least 1]
d_model: int = 32  # decoder width [> 0]
residual: bool = False  # m-residual (t_i is m plus U h_i); False is the paper's design, t_i is U h_i
train_out: bool = True  # fine-tune the pooling's output projection W_c (the setting where forgetting can happen)
epochs: int = 3  # [at least 1]
batch_size: int = 96  # [> 0]
lr: float = 2e-3  # [> 0]
fixed_threshold: float = 5e-4  # the paper's pseudo-label threshold (set for 21,843 ImageNet-21K names) [0 to 1]
holdout_fraction: float = 0.2  # share of the training images used only to choose k and the threshold [0 to 1]
device: str = "cpu"
precision: str = "auto"  # head training: "auto" (bf16 where the device runs it natively, else fp32), "fp32" (the reference) or "bf16"
results_path: str = ""  # set by `python -m fgclip run`: where the headline numbers go as JSON

# %%
import time

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from IPython.display import display

from fgclip import verdicts
from fgclip.datasets import read_coco_split
from fgclip.evaluation import encode_texts
from fgclip.losses.matching import choose_threshold, log_grid, teacher_scores
from fgclip.methods.cluster_clip import cluster_clip_embeddings
from fgclip.models import create_clip
from fgclip.reporting import found_box, write_results
from fgclip.seeding import seed_everything
from fgclip.toyworld import ToyWorldConfig
from fgclip.toyworld.export import load_toyworld_meta
from fgclip.train.for_folds import (acceptance, category_folds, choose_k, coco_root, data_facts, data_sentence,
                                    novel_matrix, open_vocabulary, score_rows, teacher_arms, train_and_embed,
                                    vocabulary_scaled_tau)
from fgclip.train.sumclip import encode_frozen, label_matrix, load_images, targets_from
from fgclip.viz import set_style
from fgclip.viz.retrieval import make_retrieval_draw
from fgclip.viz.widgets import InteractiveFigure

set_style()
seed_everything(seed)
seeds = [seed + k for k in range(n_seeds)]
t_start = time.perf_counter()
print(f"seeds={seeds}, folds={n_folds}, model={model}, pretrained={pretrained}, device={device}")

# %% [markdown]
# ## Data: the toy world as COCO, read back with pycocotools
#
# The toy world is exported at its native 64 px (the toy ResNet CLIP was pretrained on
# those images upsampled to its 128 px input) as two COCO splits. `toyworld.json` records
# the open vocabulary: the drawn shape names plus names that never appear in any image,
# standing in for ImageNet-21K. Instead of the one base/novel split the export also
# records, the drawn categories are dealt into `n_folds` disjoint folds (seeded); each
# fold is novel once, its labels unseen in training, while the others are base. Novel
# objects are in the training images, as in the paper, but their labels are never used.
# On real data the vocabulary file is used as it is: no evaluation name is appended.
#
# If `data_root` holds both COCO splits (real COCO, or an earlier export), it is read as
# it is; otherwise the toy world goes into a subfolder of `data_root` named after the
# world, seed and sizes that made it, so a rerun with another seed or size gets its own
# images.

# %%
root = coco_root(data_root, {train_split: n_train, eval_split: n_eval}, ToyWorldConfig(), seed)
meta = load_toyworld_meta(root)  # None on real data
vocab = open_vocabulary(meta, vocabulary_file)  # real data: checked here, before any image or model loads
train_records = read_coco_split(root, train_split, captions=False)[:n_train]
eval_records = read_coco_split(root, eval_split, captions=False)[:n_eval]
for split, recs, n in ((train_split, train_records, n_train), (eval_split, eval_records, n_eval)):
    if len(recs) < n:
        raise ValueError(f"{root} split {split!r} has {len(recs)} images, fewer than the {n} asked for")
categories = sorted({c for r in train_records + eval_records for c in r.labels})
if base_categories:
    categories = [c for c in categories if c in set(base_categories) | set(novel_categories)]
folds = [sorted(novel_categories)] if novel_categories else category_folds(categories, n_folds, seed)
clip = create_clip(model, pretrained=pretrained, device=device)
size = None if meta is not None else clip.image_size  # real photos: resized, not cropped
train_images = load_images([r.image_path for r in train_records], size)
eval_images = load_images([r.image_path for r in eval_records], size)
print(f"{root}: {len(train_records)} training and {len(eval_records)} gallery images; {len(categories)} categories, "
      f"open vocabulary of {len(vocab)} names")
display(pd.DataFrame({"novel categories": [", ".join(f) for f in folds],
                      "of them in the vocabulary": [sum(c in vocab for c in f) for f in folds]}))

# %% [markdown]
# ## The frozen CLIP, once
#
# CLIP's ResNet ends in an attention pooling. With the last map $f_1,\dots,f_P$,
# positional embeddings $p_0,\dots,p_P$ and the mean token $m = \frac1P\sum_j f_j$,
#
# $$ e = W_c\,\mathrm{MHA}\big(q = W_q(m+p_0),\; K = W_k[m+p_0,\, f_j+p_j],\; V = W_v[m+p_0,\, f_j+p_j]\big). $$
#
# The backbone and $W_q, W_k, W_v$ stay frozen here, so everything any arm needs from an
# image is computed once: the global embedding $e$, the dense features
# $v_j = W_c W_v (f_j + p_j)$ (MaskCLIP's value path) and the pooling's keys and values.
#
# That cache is what bounds memory at real sizes. With RN50 it holds per image three
# 49 × 2048 maps ($f_j + p_j$, keys, values) and the 1024 × 7 × 7 dense features, about
# 1.4 MB in float32, so the `gpu-full` run's 25,000 images need about 36 GB on the device
# (the batches are written into tensors allocated once, never concatenated into a second
# copy), plus 3.8 GB of host memory for the images at 224 px.

# %%
t0 = time.perf_counter()
train_feats, eval_feats = encode_frozen(clip, train_images), encode_frozen(clip, eval_images)
print(f"encoded {len(train_images) + len(eval_images)} images in {time.perf_counter() - t0:.1f} s; "
      f"map {tuple(eval_feats.dense.shape[-2:])}")
logit_scale = clip.model.logit_scale.exp().item()
vocab_text = encode_texts(clip, [prompt.format(v) for v in vocab]).cpu()
query_text = encode_texts(clip, [prompt.format(c) for c in categories]).cpu()
relevant = label_matrix([r.labels & set(categories) for r in eval_records], categories).T  # (C, I)
truth = label_matrix([r.labels & set(vocab) for r in train_records], vocab)  # complete on the toy, annotated on real data
perm = np.random.default_rng(seed).permutation(len(train_records))
held = torch.as_tensor(np.sort(perm[:max(2, round(holdout_fraction * len(perm)))]))
train_idx = torch.as_tensor(np.sort(perm[len(held):]))
val_relevant = label_matrix([train_records[i].labels & set(categories) for i in held], categories).T
memory, eval_memory = train_feats.memory.select(train_idx), eval_feats.memory

# %% [markdown]
# ## The arms
#
# **Cluster-CLIP** (baseline and teacher): each image's $P$ dense features, L2-normalised,
# are split by k-means (seeded) into $k$ clusters; each cluster's normalised mean is one
# vector, stored with the global embedding. $k$ is chosen per fold on the validation
# images by the base categories' mAP. An image's score for a name $t$ is
# $\max_i\langle t, e_i\rangle$. **CLIP global** stores the global embedding alone.
#
# **SUM-CLIP** swaps the mean token for $N$ tokens $t_i = U h_i$ with
# $h = \mathrm{Dec}(Q, f)$ the $N$ learnable queries after DETR-style decoder layers, and
# pools each as CLIP pools $m$. We fine-tune the pooling's output projection $W_c$ (the
# "o" of the paper's v,o ablation; the paper fine-tunes the backbone instead, which a CPU
# cannot afford across 4 folds and 3 seeds), so the learned vectors can leave the text
# space and novel categories can be forgotten. The **frozen arm** keeps $W_c$ frozen and
# adds the $m$-residual, $t_i = m + U h_i$ with $U$ starting at zero (not the paper's
# design): it starts at CLIP's global embedding and cannot forget much.
#
# Both losses are DETR's set loss (Hungarian matching, a learnable "no object" logit
# with weight 0.1 for unmatched slots): $\mathcal L_{\text{sup}}$ on the fold's base labels,
# $\mathcal L_{\text{pl}}$ on the names the teacher accepts,
# $\mathrm{score}(v) = \max_k \operatorname{softmax}_v(\lambda\langle c_k, t_v\rangle) > \tau$.
# $\tau$ is chosen on the validation images by the F1 of accepted labels against the base
# labels; the paper's fixed $\tau = 5\times10^{-4}$ and the same value scaled to our
# vocabulary, $\tau\cdot 21843/V$, are arms. Two oracle-style arms use the toy world's
# complete ground truth, which no real user has (on real data they use the annotations,
# which miss every present but unannotated vocabulary name): the teacher's wrong labels
# removed, and a **planted teacher** that gives every image its correct names (the
# positive control).
# Its **shuffled** twin gives each image another image's correct names (the negative
# control). A last arm removes the fold's novel names from the teacher's vocabulary.

# %%
head_kw = dict(n_queries=n_queries, n_layers=n_layers, d_model=d_model, residual=residual, train_out=train_out)
frozen_kw = {**head_kw, "residual": True, "train_out": False}
train_kw = dict(epochs=epochs, batch_size=batch_size, lr=lr, precision=precision)
tau_scaled, grid = vocabulary_scaled_tau(fixed_threshold, len(vocab)), log_grid(1e-5, 0.5, 15)
rows, selection, tau_stats, teachers, clusters = [], [], [], {}, {}
args = (clip.model.visual.attnpool, memory, eval_memory)
t0 = time.perf_counter()
for f, novel in enumerate(folds):
    base = [c for c in categories if c not in novel]
    bq = torch.tensor([categories.index(c) for c in base])
    k, _ = choose_k(train_feats.dense[held], train_feats.pooled[held], query_text[bq], val_relevant[bq],
                    k_candidates, seed)
    if k not in teachers:
        teachers[k] = cluster_clip_embeddings(train_feats.dense, train_feats.pooled, k, seed)
    keep = torch.tensor([v not in novel for v in vocab])  # the vocabulary without the novel names
    scores, scores_rm = (teacher_scores(teachers[k], t, logit_scale) for t in (vocab_text, vocab_text[keep]))
    bcols = [vocab.index(c) for c in base if c in vocab]
    bcols_rm = [[v for v in vocab if v not in novel].index(c) for c in base if c in vocab]
    taus = {"held-out": choose_threshold(scores[held][:, bcols], truth[held][:, bcols], grid)[0],
            "held-out, names removed": choose_threshold(scores_rm[held][:, bcols_rm], truth[held][:, bcols], grid)[0],
            "fixed": fixed_threshold, "scaled": tau_scaled}
    for name, key in (("held-out τ", "held-out"), ("fixed τ (paper)", "fixed"), ("τ scaled to V", "scaled")):
        tau_stats.append({"fold": f, "τ": name, **acceptance(scores[train_idx], truth[train_idx], taus[key])})
    if tau_stats[-2]["share of vocabulary"] >= 0.5:  # accepts most names: nothing to test
        del taus["fixed"]
    selection += [{"hyperparameter": f"Cluster-CLIP k (fold {f})", "candidates": str(k_candidates), "chosen": k,
                   "criterion": "base-category mAP", "split": "validation (training images)"},
                  {"hyperparameter": f"τ (fold {f})", "candidates": "15 values 1e-5..0.5",
                   "chosen": f"{taus['held-out']:.2g}", "criterion": "F1 of accepted base labels",
                   "split": "validation (training images)"}]
    sup = targets_from(label_matrix([train_records[i].labels & set(base) for i in train_idx], base))
    pl_arms = teacher_arms(scores[train_idx], scores_rm[train_idx], truth[train_idx], taus, vocab_text, keep, seed + f)
    for s in seeds:
        if (k, s) not in clusters:
            clusters[k, s] = cluster_clip_embeddings(eval_feats.dense, eval_feats.pooled, k, s)
        runs = {"CLIP global": eval_feats.pooled[:, None].cpu(), "Cluster-CLIP": clusters[k, s]}
        fit = lambda pl, vt, kw: train_and_embed(*args, sup, pl, query_text[bq], vt, logit_scale, s, kw, train_kw)  # noqa: E731
        runs["supervised only"] = fit(None, vocab_text, head_kw)[0]
        runs["FOR, frozen (m-residual)"] = fit(pl_arms["FOR"][0], vocab_text, frozen_kw)[0]
        for name, (pl, vt) in pl_arms.items():
            runs[name], attn = fit(pl, vt, head_kw)
            if name == "FOR":
                for_attn, for_novel = attn, novel
        runs["FOR + global slot"] = torch.cat([runs["CLIP global"], runs["FOR"]], 1)
        for name, emb in runs.items():
            rows += score_rows(name, f, s, query_text, emb, relevant, categories, novel)
for_emb = runs["FOR"]
rows = pd.DataFrame(rows)
t_train = time.perf_counter() - t0
print(f"{len(folds)} folds x {len(seeds)} seeds x {rows['arm'].nunique()} arms in {t_train:.0f} s")
selection += [{"hyperparameter": "τ, paper's fixed value", "candidates": "-", "chosen": f"{fixed_threshold:g}",
               "criterion": "set by the paper", "split": "unknown (the paper does not say)"},
              {"hyperparameter": "τ scaled to V", "candidates": "-", "chosen": f"{tau_scaled:.3g}",
               "criterion": f"{fixed_threshold:g} x 21843 / {len(vocab)}", "split": "none (derived)"}]
display(pd.DataFrame(selection))

# %% [markdown]
# ## Results per arm
#
# Mean AP over (fold, seed, category), split by the category's role in its fold, under
# the three conventions of {mod}`fgclip.metrics.object_retrieval`: AP@50 normalised by the
# hits in the top 50 (torchmetrics), AP@50 normalised by $\min(50, R)$ (monotone), and
# full AP. The paper reports "mAP@50" without saying which normalisation; we do not know.
# "FOR + global slot" ranks by the maximum over the learned slots and CLIP's global
# embedding: it can only differ from CLIP global where a learned slot's similarity to the
# query exceeds the global one's, so fine-tuned slots whose similarities sit on a lower
# scale leave it equal to CLIP global.

# %%
metrics = ["AP@50", "AP@50 min(50,R)", "AP"]
primary = "AP@50 min(50,R)"
table = rows.groupby(["arm", "role"])[metrics].mean().unstack("role")
table.columns = [f"{r} {m}" for m, r in table.columns]
display(table.sort_values(f"novel {primary}").style.format("{:.3f}"))
taus = pd.DataFrame(tau_stats).groupby("τ").mean(numeric_only=True).drop(columns="fold")
display(taus.style.format("{:.3g}"))
fig, ax = plt.subplots(figsize=(7, 4.5))
sns.barplot(rows[rows["role"] == "novel"], y="arm", x=primary, hue="seed", ax=ax,
            order=table.sort_values(f"novel {primary}").index)
ax.set(xlim=(0, 1), title=f"Novel {primary}: {len(folds)} folds x {len(seeds)} seeds, {len(eval_records)} gallery images")
plt.show()

# %% [markdown]
# ## Verdicts
#
# Each comparison pairs two arms per (category, seed): $a[s, c]$ is the AP of category
# $c$ in the fold where it is novel, under training seed $s$. The interval combines the
# between-seed spread with a bootstrap over categories ({func}`fgclip.verdicts.compare`).
# The categories of one fold share a trained head, so the interval treats somewhat
# dependent units as independent; with only a few folds a fold-level bootstrap would have
# too few clusters to be informative.

# %%
def V(a, b, claim, metric=primary):
    m = [novel_matrix(rows, arm, metric, seeds, categories) for arm in (a, b)]
    return verdicts.compare(*m, claim=f"{claim} (novel {metric})", arms=(a, b), unit="categories", seed=seed)


headline = [V("FOR", b, f"FOR vs {b}", m) for m in metrics for b in ("Cluster-CLIP", "CLIP global")]
v_sup = V("FOR", "supervised only", "pseudo-label loss on top of supervision")
v_forget = V("supervised only", "CLIP global", "forgetting: supervised-only training vs CLIP's own embedding")
pairs = [("Cluster-CLIP", "CLIP global", "clustering vs the global embedding"),
         ("FOR + global slot", "FOR", "adding CLIP's global embedding as one more slot"),
         ("FOR + global slot", "CLIP global", "FOR + global slot vs global"),
         ("FOR, frozen (m-residual)", "FOR", "frozen pooling with m-residual vs the trainable setting"),
         ("FOR, fixed τ (paper)", "FOR", "paper's fixed τ vs held-out τ"),
         ("FOR, τ scaled to V", "FOR", "vocabulary-scaled τ vs held-out τ"),
         ("FOR, novel names removed", "FOR", "novel names removed from the teacher vocabulary"),
         ("FOR, wrong labels removed (oracle)", "FOR", "oracle: wrong pseudo-labels removed")]
others = [V(*p) for p in pairs if p[0] in set(rows["arm"])]  # the fixed-τ arm only where it can decide
display(verdicts.verdict_table(headline + [v_sup, v_forget] + others))

# %% [markdown]
# ## Critique
#
# The load-bearing part of FOR is the pseudo-label loss: the paper's ablation has
# supervised training alone wreck the novel categories, and the pseudo-labels bring them
# back. Three things about that are open. The threshold $\tau = 5\times10^{-4}$ came from
# a search on unnamed data, and it was set for a vocabulary of about 21,000 names: on a
# smaller vocabulary a uniform softmax already puts every name above it. The
# pseudo-labels are admitted to be noisy, yet their precision is never measured. And the
# teacher is Cluster-CLIP, which is also the baseline, so a gain over Cluster-CLIP is a
# student beating its teacher with the teacher's own labels plus base supervision; if the
# vocabulary holds the evaluation names, it may also be a leak of the test queries. The
# longer argument is on [the critique page](../book/ch3_critique.md).
#
# ## Falsification: is it the pseudo-labels that stop the forgetting?
#
# The test: FOR against supervised-only training, novel AP paired per (category, seed).
# The positive control plants a teacher that gives every training image its correct
# names: if this setting can show a repair at all, that teacher must beat supervised-only.
# The negative control gives each image another image's correct names: the same label
# distribution without the image-to-label link, which must not beat supervised-only. When
# either control misbehaves, the test cannot decide here.

# %%
positive = V("planted teacher (correct labels)", "supervised only", "planted teacher with correct labels vs supervision alone")
negative = V("planted teacher, shuffled", "supervised only", "shuffled correct labels vs supervision alone")
fals = verdicts.falsify(v_sup, positive, negative, effect=verdicts.A_BETTER)
display(verdicts.verdict_table([v_sup, positive, negative]))
print(fals.sentence())

# %% [markdown]
# ## Try it
#
# Type a name (a drawn shape, or a never-drawn vocabulary name, to see what the model does
# with a query that has no answer): the top images by max similarity under the last FOR
# head trained above, each with the winning query's attention over the map; white boxes
# are the annotated objects.

# %%
name_to_text = {c: t for c, t in zip(categories, query_text)}


def encode_name(name):
    if name not in name_to_text:
        name_to_text[name] = encode_texts(clip, [prompt.format(name)]).cpu()[0]
    return name_to_text[name]


draw = make_retrieval_draw(encode_name, for_emb, for_attn, eval_images, tuple(eval_feats.dense.shape[-2:]),
                           labels=[r.labels for r in eval_records], boxes=[r.boxes for r in eval_records],
                           box_sizes=[(r.height, r.width) for r in eval_records])  # boxes scaled to the shown images
widget = InteractiveFigure(draw, {"name": widgets.Text(value=for_novel[0], description="object"),
                                  "k": widgets.IntSlider(value=5, min=2, max=8, description="top k")})
widget.show()

# %% [markdown]
# ## What we found

# %%
fixed = taus.loc["fixed τ (paper)"]
facts = data_facts(meta is not None, categories, folds, vocab, eval_feats.dense.shape[-2:])
bullets = [data_sentence(facts)] + [v.sentence() for v in headline[:2] + [v_forget, v_sup] + others]
bullets.append(fals.sentence())
bullets.append(f"The paper's fixed τ accepts {fixed['accepted/image']:.1f} of {len(vocab)} names per image "
               f"(precision {fixed['precision']:.3f})" + ("; an arm that accepts most of the vocabulary cannot "
               "decide anything about the threshold, so it was not trained" if fixed["share of vocabulary"] >= 0.5
               else "") + f". The vocabulary-scaled τ = {tau_scaled:.3g} accepts {taus.loc['τ scaled to V', 'accepted/image']:.1f} "
               f"(precision {taus.loc['τ scaled to V', 'precision']:.3f}), the held-out τ "
               f"{taus.loc['held-out τ', 'accepted/image']:.1f} (precision {taus.loc['held-out τ', 'precision']:.3f}); "
               f"precision is measured against {facts['precision_against']}.")
bullets.append("Speed: `benchmarks/bench_for.py` times backbone, head and clustering per map size "
               "(benchmarks/results/for.json); this chapter makes no speed claim.")
display(found_box(f"What we found ({len(folds)} folds x seeds {seeds}, {len(train_idx)} training and "
                  f"{len(eval_records)} gallery images)", bullets))
write_results(results_path, {
    "seeds": seeds, "folds": folds, "n_train": int(len(train_idx)), "n_val": int(len(held)),
    "n_eval": len(eval_records), "verdicts": headline + [v_sup, v_forget] + others + [positive, negative],
    "controls": [fals], "selection": selection, "tau_acceptance": taus.to_dict(orient="index"),
    "tau_fixed_undecidable": bool(fixed["share of vocabulary"] >= 0.5), "metrics": table.to_dict(orient="index"),
    "data": facts, "found": bullets, "train_s": t_train, "wall_s": time.perf_counter() - t_start,
}, chapter="ch3")
