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
# # Partial-label multi-label recognition by semantic decoupling
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/fgclip/fgclip-book/blob/main/notebooks/ch4_decoupling.ipynb)
#
# An image of a street holds a car, a person and a bicycle at once; a multi-label
# recogniser must say yes to all three. Annotating every category on every image is
# expensive, so the *partial-label* setting trains with only some (image, category) entries
# known and the rest unknown. The paper we implement {cite}`arxiv241210843` keeps CLIP
# {cite}`radford2021clip` frozen and trains two small parts on top: a *semantic
# decoupling* module that builds one visual feature per category from CLIP's spatial map,
# and one learnable prompt per category in the style of CoOp {cite}`zhou2022coop`,
# {cite}`sun2022dualcoop`. It trains them with a partial asymmetric loss {cite}`ridnik2021asl`
# on the known labels only. Its claim is that category predictions become independent of
# one another and so stop confusing co-occurring categories; its scoring rule, a softmax
# over categories, is where we aim the falsification.

# %% tags=["remove-cell"]
# On Colab, install the project first; elsewhere this cell does nothing.
import os
import sys

if "google.colab" in sys.modules and not os.path.isdir("fgclip-book"):
    os.system("git clone -q https://github.com/fgclip/fgclip-book && pip -q install -e fgclip-book")
    os.chdir("fgclip-book/notebooks")

# %% tags=["parameters"]
seed = 0  # every random choice below (data, masks, initialisations, batches) derives from it
device = "cpu"
precision = "fp32"  # head training: "fp32" (the reference) or "bf16" autocast; benchmarks/bench_heads.py measures both
data_root = "../data/ch4"  # toy world exported here when empty; or a real COCO root / VOCdevkit
data_format = "coco"  # "coco" (instances JSON via pycocotools) or "voc" (Pascal VOC XML)
train_split = "train"  # e.g. "train2014" for real COCO, "trainval" for VOC2007
test_split = "test"  # e.g. "val2014" for real COCO, "test" for VOC2007
n_train = 1000  # toy scenes exported for training (ignored for real data)
n_test = 500  # toy scenes exported for testing (ignored for real data)
model = "toy-rn"  # the frozen CLIP: "toy-rn" (ResNet, as the paper), "toy-vit", or an open_clip name such as "RN101"
pretrained = "toy"  # "toy", a checkpoint path, or e.g. "openai"
cache_dir = "../data/ch4/cache"  # frozen-CLIP features are computed once and kept here
glove_path = ""  # path of a GloVe text file for the word vectors x_c; empty = CLIP text embedding
hand_prompt = "a"  # zero-shot prompt "<hand_prompt> <name>."; its words initialise the context
proportions = [0.1, 0.3, 0.5, 0.7, 0.9]  # known-label proportions
rank = 32  # rank of the low-rank bilinear pooling (U, V: D -> rank)
epochs = 8
batch_size = 128
lr = 0.01
gamma_pos = 1.0  # P-ASL focusing on positives (the paper's choice)
gamma_neg = 2.0  # P-ASL focusing on negatives (the paper's choice)
asl_clip = 0.05  # P-ASL probability margin m for negatives
threads = 1  # torch CPU threads (one is fastest for these small ops on a shared CPU; 0 = default)
results_path = ""  # set by `python -m fgclip run`: where the headline numbers go as JSON

# %%
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pandas as pd
import torch
from IPython.display import display

from fgclip.datasets import read_detection_split
from fgclip.methods.decoupling import (category_scores, clip_word_vectors, load_glove,
                                       trainable_parameters)
from fgclip.metrics.multilabel import mean_average_precision, per_class_ap
from fgclip.metrics.pointing import argmax_point, center_point, class_pointing
from fgclip.models import create_clip
from fgclip.partial_labels import known_masks, partial_targets, save_masks
from fgclip.reporting import found_box, write_results
from fgclip.seeding import seed_everything
from fgclip.stats import paired_bootstrap_diff
from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.toyworld.export import export_coco, export_voc, write_toyworld_meta
from fgclip.train.decoupling import FitConfig, encode_image_files, fit, make_head, predict
from fgclip.viz import InteractiveFigure, set_style
from fgclip.viz.multilabel import draw_prediction, plot_map_vs_proportion

set_style()
seed_everything(seed)
if threads > 0:
    torch.set_num_threads(threads)
print(f"seed={seed}, model={model}, pretrained={pretrained}, device={device}")

# %% [markdown]
# ## The method
#
# Let $f \in \mathbb{R}^{D \times h \times w}$ be the frozen image encoder's spatial feature
# map and $x_c$ a word vector for category $c$. Semantic decoupling fuses the two at every
# position with low-rank bilinear pooling, turns the result into an attention map over
# positions, and pools:
#
# $$
# \tilde f_{c,wh} = P^\top \tanh\!\big((U^\top f_{wh}) \odot (V^\top x_c)\big) + b,\qquad
# a_{c,wh} = \frac{\exp(w_a^\top \tilde f_{c,wh})}{\sum_{w'h'} \exp(w_a^\top \tilde f_{c,w'h'})},\qquad
# f^v_c = \sum_{wh} a_{c,wh}\, f_{wh}.
# $$
#
# On the text side, category $c$ has its own prompt $t_c = [V]^c_1 \cdots [V]^c_M\,[\text{CLASS}_c]$
# whose $M$ context vectors are learned while the text encoder stays frozen, giving
# $f^t_c$. The score and the probability of the paper's Eq. 9 are
#
# $$
# s_c = \frac{\cos(f^v_c, f^t_c)}{\tau},\qquad p_c = \frac{\exp(s_c)}{\sum_{c'=1}^{C} \exp(s_{c'})},
# $$
#
# and the loss is the asymmetric loss summed over the set $K$ of known entries only
# (P-ASL), with $p_m = \max(p - m, 0)$:
#
# $$
# \mathcal{L} = \frac{1}{|K|}\sum_{(i,c)\in K} \Big[ -y_{ic}(1-p_{ic})^{\gamma_+}\log p_{ic}
#   - (1-y_{ic})\, p_{m,ic}^{\gamma_-} \log(1-p_{m,ic}) \Big].
# $$
#
# **What differs from the paper here.** The paper's frozen CLIP is a ResNet-101 and its
# word vectors are GloVe. Our frozen CLIP is the book's toy ResNet CLIP (`toy-rn`, a
# ModifiedResNet with attention pooling like the paper's, at 128 px): its 4x4 layer-4 map,
# sent through the attention pooling's value and output projections (the MaskCLIP value
# path {cite}`zhou2022maskclip`), is $f$, so $D = 128$ and $f^v_c$ can be compared with
# $f^t_c$ directly. With `model = "toy-vit"` the same chapter runs on the toy ViT's 8x8 grid
# of projected patch tokens instead. GloVe cannot be downloaded here, so $x_c$ is the frozen text
# encoder's embedding of the bare class name unless `glove_path` names a GloVe file. $\tau$
# is the frozen CLIP's own temperature. The code: `fgclip.methods.decoupling`,
# `fgclip.models.prompts`, `fgclip.losses.asymmetric`.

# %% [markdown]
# ## Data: the toy world as COCO JSON and as Pascal VOC XML
#
# The toy world is exported in both formats into `data_root` (when it is not there yet) and
# read back through the real readers; the labels of an image are the categories present.
# The two readers must agree image by image. A real COCO or VOC root goes through the
# same reader chosen by `data_format`.

# %%
root = Path(data_root)
coco_file = root / "annotations" / f"instances_{train_split}.json"
voc_file = root / "VOC2007" / "ImageSets" / "Main" / f"{train_split}.txt"
toy_sizes = {train_split: n_train, test_split: n_test}
stale_toy = (root / "toyworld.json").is_file() and voc_file.is_file() and any(
    len((voc_file.parent / f"{s}.txt").read_text().split()) != n for s, n in toy_sizes.items())
if stale_toy or (not coco_file.is_file() and not voc_file.is_file()):
    world = ToyWorldConfig()
    for split, n in toy_sizes.items():
        scenes = generate(world, n, seed=seed, split=split)
        export_coco(scenes, root, split, world, seed)
        export_voc(scenes, root, split)
    write_toyworld_meta(root, world, seed)


data = {s: read_detection_split(root, s, data_format) for s in (train_split, test_split)}
other = "voc" if data_format == "coco" else "coco"
if (root / "toyworld.json").is_file():  # the toy export has both formats: they must agree
    for s in (train_split, test_split):
        a = [sorted({c for c, _ in o}) for o in data[s][1]]
        b = [sorted({c for c, _ in o}) for o in read_detection_split(root, s, other)[1]]
        assert a == b, f"COCO and VOC readers disagree on the labels of split {s}"
    print(f"COCO and VOC exports read back with identical labels on both splits")
class_names = sorted({c for s in data.values() for objs in s[1] for c, _ in objs})
C = len(class_names)
labels = {s: np.array([[n in {c for c, _ in objs} for n in class_names] for objs in d[1]],
                      dtype=np.int64) for s, d in data.items()}
print(f"{C} categories; train {len(labels[train_split])} images, test {len(labels[test_split])}; "
      f"labels per image {labels[train_split].sum(1).mean():.2f} on average")

# %% [markdown]
# ## Frozen features, computed once
#
# The image encoder never changes, so its dense map $f$ and pooled feature are computed
# once per split and cached. The text encoder, in contrast, runs at every training step,
# because the prompts being learned pass through it.

# %%
clip = create_clip(model, pretrained=pretrained, device=device)
cache = Path(cache_dir)
feats = {}
for s in (train_split, test_split):
    path = cache / f"{Path(model).stem}_{Path(str(pretrained)).stem}_{data_format}_{s}.pt"
    if path.is_file() and torch.load(path)["n"] == len(data[s][0]):
        feats[s] = torch.load(path)["features"]
    else:
        feats[s] = encode_image_files(clip, data[s][0], device=device)
        cache.mkdir(parents=True, exist_ok=True)
        torch.save({"n": len(data[s][0]), "features": feats[s]}, path)
dense_tr, pooled_tr = feats[train_split]
dense_te, pooled_te = feats[test_split]
print(f"dense map f: {tuple(dense_tr.shape[1:])}, pooled: {tuple(pooled_tr.shape[1:])}")
word_vectors = (load_glove(glove_path, class_names) if glove_path
                else clip_word_vectors(clip.model, clip.tokenizer, class_names))
tau = 1.0 / float(clip.model.logit_scale.detach().exp())
print(f"word vectors x_c: {'GloVe ' + glove_path if glove_path else 'CLIP text embedding of the name'} "
      f"{tuple(word_vectors.shape)}; tau = {tau:.4f}")

# %% [markdown]
# Before training anything, one diagnostic: how well do the frozen features already rank
# the categories with the hand prompt? We score the global (class-token) feature and, in
# the same way, the mean of the dense features that form $f$. The decoupled feature $f^v_c$
# is a weighted mean of those features, so the second number is roughly where it starts.

# %%
zs_head = make_head("zero-shot", clip.model, clip.tokenizer, class_names, word_vectors,
                    hand_prompt, tau, rank, "softmax", seed)
hand_text = zs_head.text_features.cpu()  # (C, D) "<hand_prompt> <name>."
diag = {"global feature": category_scores(pooled_te, hand_text, tau),
        "mean of dense features": category_scores(dense_te.mean((2, 3)), hand_text, tau)}
diag = {k: mean_average_precision(v.numpy(), labels[test_split]) for k, v in diag.items()}
print("zero-shot test mAP, hand prompt: " + ", ".join(f"{k} {v:.3f}" for k, v in diag.items()))

# %% [markdown]
# ## The partial-label protocol
#
# Each (image, category) entry of the training set is known with probability $\rho$. One
# seeded uniform draw per entry serves every $\rho$, so the masks are nested: an entry
# known at 10% is also known at 30%. The masks are saved with the run. The test set is
# always fully labelled.

# %%
masks = known_masks(labels[train_split].shape, proportions, seed)
mask_file = (Path(results_path).parent if results_path else cache) / f"known_masks_seed{seed}.npz"
save_masks(mask_file, masks, seed)
print(f"masks saved to {mask_file}: " + ", ".join(
    f"{r:.0%} -> {m.mean():.1%} known" for r, m in masks.items()))

# %% [markdown]
# ## Five variants at five known-label proportions
#
# *zero-shot*: the hand prompt "`a <name>.`" against the global image feature, no training;
# *linear probe*: a sigmoid per category on the global feature; *prompts only*: learned
# category-specific prompts against the global feature; *decoupling only*: decoupled
# features against the hand-prompt text; *full*: both. Every trained variant uses P-ASL
# with the same optimiser, epochs and batches (seeded by `seed`).

# %%
fit_cfg = FitConfig(epochs=epochs, batch_size=batch_size, lr=lr, gamma_pos=gamma_pos,
                    gamma_neg=gamma_neg, clip=asl_clip, seed=seed, device=device,
                    precision=precision)
y_test = labels[test_split]


def run(variant, rho, scoring="softmax", cfg=fit_cfg):
    """Train one variant at known proportion rho; test scores, attention maps, head."""
    head = make_head(variant, clip.model, clip.tokenizer, class_names, word_vectors,
                     hand_prompt, tau, rank, scoring, seed)
    if variant != "zero-shot":
        fit(head, dense_tr, pooled_tr, partial_targets(labels[train_split], masks[rho]), cfg)
    scores, attention = predict(head, dense_te, pooled_te, device=device)
    return scores, attention, head


rows, full_runs, n_params = [], {}, {}
for rho in proportions:
    for variant in ("zero-shot", "linear probe", "prompts only", "decoupling only", "full"):
        scores, attention, head = run(variant, rho)
        rows.append({"variant": variant, "known": rho,
                     "mAP": mean_average_precision(scores, y_test)})
        n_params[variant] = trainable_parameters(head)
        if variant == "full":
            full_runs[rho] = (scores, attention)
results = pd.DataFrame(rows).pivot(index="variant", columns="known", values="mAP")
results = results.loc[["zero-shot", "linear probe", "prompts only", "decoupling only", "full"]]
table = results.copy()
table["average"] = results.mean(axis=1)
table["trainable params"] = pd.Series(n_params)
shown = table.rename(columns={r: f"{r:.0%} known" for r in proportions})
display(shown.style.format({**{c: "{:.3f}" for c in shown.columns[:-1]},
                            "trainable params": "{:,}"}))
fig = plot_map_vs_proportion(results, title=f"toy world, seed {seed}")

# %% [markdown]
# How to read the table. The paper's numbers (average mAP 81.7 on COCO, 78.3 at 10% known)
# come from a ResNet-101 CLIP trained on 400M image-text pairs; ours from a 10M-parameter
# toy CLIP trained on 40k toy captions, so only comparisons *within* the table mean
# anything. The decoupled variants can only be as good as the dense features they pool:
# the toy CLIP was trained contrastively through its pooled embedding alone, and nothing
# asked its per-position features to match text. The diagnostic above (mean of the dense
# features against the global feature) measures that gap before any training; the "What we found" box below compares
# it with the trained variants. Our toy images are also simple (one to three shapes on a
# plain background), so the global feature already sees every object, which removes much
# of the "semantic confusion" that decoupling is meant to fix.

# %% [markdown]
# ## Where the attention looks: a pointing game
#
# Each category's attention map $a_c$ is also a localiser. For every test image and every
# category present, we take the argmax cell of $a_c$ (model trained at 50% known labels,
# or the middle proportion) and count a hit when its centre falls inside a box of that
# category (tolerance 0 pixels: the toy images are only 64 pixels wide), averaging per
# category as in TorchRay {cite}`fong2019torchray`. The baseline points at the image centre.

# %%
rho_point = 0.5 if 0.5 in full_runs else proportions[len(proportions) // 2]
_, att = full_runs[rho_point]
trials = [(i, c) for i, objs in enumerate(data[test_split][1]) for c in sorted({n for n, _ in objs})]
boxes_of = [[[b for n, b in data[test_split][1][i] if n == c]] for i, c in trials]
hws = [data[test_split][2][i] for i, _ in trials]
att_points = [argmax_point(att[i, class_names.index(c)], data[test_split][2][i]) for i, c in trials]
ctr_points = [center_point(hw) for hw in hws]
classes = [c for _, c in trials]
pointing = {name: class_pointing(pts, [b[0] for b in boxes_of], hws, classes, tolerance=0.0)
            for name, pts in (("decoupling attention", att_points), ("image centre", ctr_points))}
display(pd.DataFrame({k: {"pointing accuracy": v.mean_accuracy, "trials": len(v.hits)}
                      for k, v in pointing.items()}).T.style.format(
    {"pointing accuracy": "{:.3f}", "trials": "{:.0f}"}))

# %% [markdown]
# ## Try it: one image, one known-label proportion
#
# Pick a test image and the proportion of known labels the full model was trained with.
# The bars are the scores $s_c$ (present categories in orange); below, each category's
# attention map with that category's boxes.

# %%
images = data[test_split][0]


def draw(image_index=0, known=rho_point):
    from PIL import Image
    scores, attention = full_runs[known]
    objs = data[test_split][1][image_index]
    present = sorted({c for c, _ in objs})
    boxes = {c: [b for n, b in objs if n == c] for c in present}
    image = np.asarray(Image.open(images[image_index]).convert("RGB"))
    return draw_prediction(image, scores[image_index], attention[image_index], class_names,
                           present, boxes, title=f"image {image_index}, {known:.0%} known")


controls = {"image_index": widgets.IntSlider(value=0, min=0, max=len(images) - 1,
                                             description="image"),
            "known": widgets.SelectionSlider(options=list(full_runs), value=rho_point,
                                             description="known")}
InteractiveFigure(draw, controls).show()

# %% [markdown]
# ## Critique: is the prediction of each category independent?
#
# The paper motivates its design by saying that each category is predicted on its own,
# from its own visual feature and its own prompt. But Eq. 9 turns the $C$ scores into
# probabilities with one shared softmax, and the loss is applied to those probabilities.
# On an image with three categories present, the three positive probabilities share at
# most a total of one, so raising one lowers the others: the training signal couples the
# categories exactly where a multi-label model should not. Either the softmax matters (and
# the "independent categories" explanation is wrong) or it does not (and it is an artefact
# that a per-category sigmoid could replace). The experiment below trains the full model
# both ways with everything else fixed. A second, smaller question: the paper credits
# P-ASL for much of the gain below 30% known labels; we compare it with a plain partial
# BCE (P-ASL with $\gamma_+ = \gamma_- = m = 0$) at 10%. A longer argument is on the
# critique page.
#
# ## Falsification: softmax over categories vs a sigmoid per category
#
# We run the review's test as stated: the full model, $p_c = \sigma(s_c)$ in place of Eq. 9,
# the same $\tau$, loss, data, masks, initialisation and batches. One caveat belongs to the
# test itself: a softmax ignores any offset shared by all categories, a sigmoid does not,
# and with no bias term and a small $\tau$ every sigmoid probability starts close to one.
# A gap in favour of the softmax therefore mixes "coupling helps" with "the sigmoid lacks
# a threshold". So we also run a control, *sigmoid+bias*: $p_c = \sigma(s_c + \beta)$ with one
# learnable offset $\beta$ shared by all categories, started at $-1/\tau$ (every probability
# starts small). A second control, *sigmoid+affine*, also learns the scale:
# $p_c = \sigma(t \cos(f^v_c, f^t_c) + \beta)$ started at SigLIP's $t = 10$, $\beta = -10$,
# because with CLIP's frozen $1/\tau$ near 100 a sigmoid saturates, which a shift-invariant
# softmax never feels. Both controls still predict each category independently. The
# interval is a paired bootstrap {cite}`efron1993bootstrap` over the $C$ per-category AP
# differences (macro mAP is their mean), one training seed, stated below.

# %%
fals = []
for scoring in ("sigmoid", "sigmoid+bias", "sigmoid+affine"):
    for rho in [r for r in (0.1, 0.5) if r in masks]:
        s_sig, _, _ = run("full", rho, scoring=scoring)
        ap_soft, ap_sig = per_class_ap(full_runs[rho][0], y_test), per_class_ap(s_sig, y_test)
        d, lo, hi = paired_bootstrap_diff(ap_soft, ap_sig, seed=seed)
        fals.append({"comparison": f"softmax - {scoring}", "known": rho, "A": ap_soft.mean(),
                     "B": ap_sig.mean(), "difference": d, "95% low": lo, "95% high": hi})
low_rho = min(proportions)
bce_cfg = FitConfig(**{**fit_cfg.__dict__, "gamma_pos": 0.0, "gamma_neg": 0.0, "clip": 0.0})
s_bce, _, _ = run("full", low_rho, cfg=bce_cfg)
ap_asl, ap_bce = per_class_ap(full_runs[low_rho][0], y_test), per_class_ap(s_bce, y_test)
d, lo, hi = paired_bootstrap_diff(ap_asl, ap_bce, seed=seed)
fals.append({"comparison": "P-ASL - partial BCE", "known": low_rho, "A": ap_asl.mean(),
             "B": ap_bce.mean(), "difference": d, "95% low": lo, "95% high": hi})
fals = pd.DataFrame(fals)
display(fals.style.format({c: "{:.3f}" for c in ("A", "B", "difference", "95% low", "95% high")}
                          | {"known": "{:.0%}"}))

# %% [markdown]
# ## What we found

# %%
full_avg, zs_avg = table.loc["full", "average"], table.loc["zero-shot", "average"]
best = table["average"].idxmax()
sm = fals[fals.comparison.str.startswith("softmax - ")]


def verdict(row):
    if row["95% low"] > 0:
        return "softmax better"
    if row["95% high"] < 0:
        return "sigmoid better"
    return "no clear difference"


verdicts = [verdict(r) for _, r in sm.iterrows()]
# the fairest independent rule is the sigmoid that learns its own scale and offset
fair = [verdict(r) for _, r in sm.iterrows() if r["comparison"] == "softmax - sigmoid+affine"]
caveat = (f" This is one seed, on a model that {'stays below' if full_avg < zs_avg else 'beats'} "
          "zero-shot.")
if "softmax better" in fair:
    independence = ("even a sigmoid that learns its own scale and offset loses to the softmax, "
                    "so what the softmax adds here is the coupling between categories itself: "
                    "the opposite of the paper's explanation, which credits independent "
                    "predictions." + caveat)
elif "sigmoid better" in fair:
    better_at = [f"{r['known']:.0%}" for _, r in sm.iterrows()
                 if r["comparison"] == "softmax - sigmoid+affine" and verdict(r) == "sigmoid better"]
    independence = ("a sigmoid that learns its own scale and offset is never worse than the "
                    f"softmax and is better at {', '.join(better_at)} known: the gap to the other "
                    "sigmoids was calibration, the coupling does not help, and independent "
                    "predictions would serve the paper's own argument better." + caveat)
elif "softmax better" in verdicts:
    independence = ("the softmax beats the sigmoids that cannot set their own calibration, but "
                    "not the one that learns its scale and offset: what the softmax supplies is "
                    "calibration, not coupling, and independent predictions lose nothing once "
                    "calibrated." + caveat)
else:
    independence = ("the rules cannot be told apart, so independent sigmoids could replace the "
                    "softmax without loss." + caveat)
bullets = [
    f"Average mAP over {', '.join(f'{r:.0%}' for r in proportions)} known labels: full model "
    f"**{full_avg:.3f}**, zero-shot hand prompt {zs_avg:.3f}, best variant *{best}* "
    f"({table.loc[best, 'average']:.3f}); {len(y_test)} test images, {len(labels[train_split])} "
    f"training images, {epochs} epochs, seed {seed}.",
    f"Trainable parameters: full {n_params['full']:,}, decoupling only "
    f"{n_params['decoupling only']:,}, prompts only {n_params['prompts only']:,}, linear probe "
    f"{n_params['linear probe']:,} (the paper's full model has about 4.8M on a ResNet-101).",
] + [
    f"{r['comparison'].capitalize()} at {r['known']:.0%} known: {r['difference']:+.3f} mAP "
    f"(95% CI {r['95% low']:+.3f} to {r['95% high']:+.3f}): {verdict(r)}."
    for _, r in sm.iterrows()
] + [
    f"P-ASL minus partial BCE at {low_rho:.0%} known: {fals.iloc[-1]['difference']:+.3f} mAP "
    f"(95% CI {fals.iloc[-1]['95% low']:+.3f} to {fals.iloc[-1]['95% high']:+.3f}).",
    f"Pointing with the attention argmax (model at {rho_point:.0%} known): "
    f"{pointing['decoupling attention'].mean_accuracy:.3f}, image centre "
    f"{pointing['image centre'].mean_accuracy:.3f} over {len(trials)} (image, category) trials: "
    + ("the attention localises better than the centre prior."
       if pointing["decoupling attention"].mean_accuracy > pointing["image centre"].mean_accuracy
       else "the attention does not beat the centre prior, so on this toy CLIP it is not a "
            "localiser."),
    f"Why decoupling {'helps' if full_avg > table.loc['prompts only', 'average'] else 'does not help'} "
    f"here: zero-shot mAP from the mean dense feature is {diag['mean of dense features']:.3f} against "
    f"{diag['global feature']:.3f} from the global feature; the decoupling-only variant averages "
    f"{table.loc['decoupling only', 'average']:.3f} and prompts only "
    f"{table.loc['prompts only', 'average']:.3f}.",
    "On the independence claim: " + independence + " ("
    + "; ".join(f"{r['comparison']} at {r['known']:.0%}: {verdict(r)}" for _, r in sm.iterrows())
    + ")",
]
display(found_box(f"What we found (seed {seed}, toy CLIP {model})", bullets))
write_results(results_path, {
    "seed": seed, "model": model, "n_train": len(labels[train_split]), "n_test": len(y_test),
    "epochs": epochs, "mAP": {v: {str(k): float(x) for k, x in row.items()}
                              for v, row in results.iterrows()},
    "average_mAP": table["average"].astype(float).to_dict(), "trainable_params": n_params,
    "falsification": fals.to_dict(orient="records"),
    "pointing": {k: v.mean_accuracy for k, v in pointing.items()},
})
