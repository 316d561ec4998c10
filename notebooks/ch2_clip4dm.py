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
# # Finding the wrong word with CLIP's negative gradients (CLIP4DM)
#
# [![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/fgclip/fgclip-book/blob/main/notebooks/ch2_clip4dm.ipynb)
#
# A caption can be almost right: "a red star to the left of a blue ring" for an image
# where the ring is green. CLIP {cite}`radford2021clip` gives the pair one number, so it
# cannot say *which* word is wrong. The CLIP4DM paper {cite}`arxiv241218404` reads that
# word out of a frozen CLIP without any training: it takes the gradient-times-attention
# relevance of Chefer et al. {cite}`chefer2021gae` on the text encoder, but keeps the
# negative part that their rule throws away. Words that push the image-text score *down*
# get negative relevance, and the most negative word is the guess for the wrong one.
# This chapter builds the rule on our toy CLIP, measures it on toy FOIL captions
# {cite}`shekhar2017foil`, and then tests the paper's weakest point: whether one fixed
# threshold on those negative values means the same thing everywhere.

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
seed: int = 0  # every random choice below derives from it (test draws, tie breaks, bootstrap)
n_seeds: int = 3  # independent test draws: toy: fresh test scenes and foils per seed; real: seeded samples [at least 1]
n_scenes: int = 100  # toy scenes per split and draw; each gives up to 4 FOIL captions [at least 0]
model: str = "toy-vit"  # a toy config or an open_clip name such as "ViT-B-32"
pretrained: str = "toy"  # "toy": committed checkpoint, a checkpoint path, or e.g. "openai"
data_root: str = "../data/ch2"  # FOIL JSON + images; exported from the toy world when absent
val_split: str = "val"  # where the layers and every ε are tuned
test_split: str = "test"  # where everything is reported
n_last_layers: int = 0  # CLIP4DM uses the last n text layers; 0: choose n on val_split by LA [at least 0]
epsilon: float = 0.0  # the threshold rule's ε when tune_epsilon is False
tune_epsilon: bool = True  # True: the threshold rule's ε maximises word F1 on val_split
batch_size: int = 128  # pairs per forward/backward pass [> 0]
max_pairs: int = 0  # > 0: a seeded sample of max_pairs FOIL pairs per split and draw [at least 0]
device: str = "cpu"
results_path: str = ""  # set by `python -m fgclip run`: where the headline numbers go as JSON

# %%
import time

import numpy as np
import pandas as pd
import torch
from IPython.display import display

from fgclip import verdicts
from fgclip.methods.clip4dm import (AttributionConfig, caption_fits, clip4dm, clip4dm_variants,
                                    clip_score, leave_one_word_out)
from fgclip.methods.clip4dm_protocol import (ap_units, build_units, compare_units, foil_sets, labels_of,
                                             localization_units, pairs_per_second, paper_epsilon_verdicts, planted_colour_rows,
                                             quartile_verdicts, transfer_verdicts, tune_eps_f1,
                                             tune_eps_for_ap, type_tables)
from fgclip.models import create_clip, encode_image_paths, load_image_batch
from fgclip.reporting import found_box, write_results
from fgclip.seeding import seed_everything
from fgclip.viz import set_style
from fgclip.viz.words import attribution_figure, caption_widget

set_style()
seed_everything(seed)
t_start = time.perf_counter()
seeds = [seed + k for k in range(n_seeds)]
print(f"seed={seed}, test draws {seeds}, model={model}, pretrained={pretrained}, device={device}")

# %% [markdown]
# ## The rule
#
# Let $s = \langle f(I), g(T) \rangle$ be the frozen CLIP's cosine score for image $I$ and caption $T$, and
# $A^h_l \in \mathbb{R}^{L \times L}$ the attention probabilities of head $h$ in text layer
# $l$. CLIP4DM forms, for each map, the element-wise product with its gradient,
#
# $$R^h_l = \nabla A^h_l \odot A^h_l, \qquad \nabla A^h_l = \frac{\partial s}{\partial A^h_l},$$
#
# averages it over heads and over a set $\mathcal{L}$ of late layers,
# $\bar R = \frac{1}{|\mathcal{L}|}\sum_{l \in \mathcal{L}} \mathbb{E}_h R^h_l$, and reads the
# row of the [EOS] token, the position that the text encoder pools. GAE
# {cite}`chefer2021gae` instead clamps, $\mathbb{E}_h [\nabla A^h_l \odot A^h_l]^+$, and rolls
# the layers out, $\bar R \leftarrow \bar R + \mathrm{cam}_l \bar R$ from $\bar R = I$. The
# BPE tokens of each whitespace word $j$ are averaged into $w_j$, and then
#
# $$\mathrm{mis}(w_j) = [\,w_j < \epsilon\,], \qquad \hat{j} = \arg\min_j w_j .$$
#
# The second rule (the most negative word) is the paper's rule for FOIL, where each
# foil caption has exactly one wrong word. Words are split as the official code splits
# them: at spaces, with "." and "," as words of their own, which are never candidates; a
# multi-word foil ("teddy bear") counts as found when the most negative word lies anywhere
# in it; tied minima are broken at random with the seed (and counted).
#
# For a global score, CLIPScore {cite}`hessel2021clipscore` is $2.5\max(s, 0)$, and
# F-CLIPScore comes in three forms. The paper's public code scores a pair by
# $F_\epsilon = (1 - \max(s, 0))\sum_j \mathrm{mis}(w_j)\, w_j$ in its threshold mode and by
# $F_{\min} = (1 - \max(s, 0))\min_j w_j$ in the most-negative mode it prescribes for FOIL:
# the latter is **F-CLIPScore as the paper's code evaluates it** on FOIL, our headline. The
# third form is our earlier reading of Eq. 11, $F_+ = \mathrm{CLIPScore} + (1 - s)\sum_j
# \mathrm{mis}(w_j)\, w_j$, kept as a named deviation. Only $F_\epsilon$ and $F_+$ have an
# $\epsilon$; each gets its own, tuned on the validation split.
# Everything costs one forward and one backward pass per pair.
#
# open_clip 3.3.0 {cite}`ilharco2021openclip` never materialises attention probabilities
# (its blocks call a fused kernel with `need_weights=False`), so
# `fgclip.models.attention.capture_attention` swaps each block's attention for an explicit
# computation with the same weights, records $A^h_l$ inside the autograd graph, and puts
# the model back on exit; a test checks the outputs are unchanged to $10^{-5}$.

# %% [markdown]
# ## Data: toy FOIL captions, read back through the FOIL reader
#
# The toy world makes four kinds of foil, each by replacing one word of a true caption:
# a shape absent from the image, a colour no object of that shape has, the opposite
# spatial relation, and a wrong object count. Nothing in this chapter is trained, so what
# is random is the draw of the test foils: the **seed axis** of every verdict below is
# `n_seeds` independent exports of test scenes and foils (on real FOIL: seeded samples of
# `max_pairs` pairs). Units are captions, clustered by their image. Each split goes out
# as FOIL-COCO JSON and comes back through the reader a real FOIL file goes through.
# Captions longer than the text context are skipped and counted.

# %%
clip = create_clip(model, pretrained=pretrained, device=device)
val = foil_sets(data_root, val_split, [seed], n_scenes, max_pairs)[seed]
test = foil_sets(data_root, test_split, seeds, n_scenes, max_pairs)
fits = {k: caption_fits(clip, df.caption.tolist()) for k, df in [("val", val), *test.items()]}
skipped = {str(k): int((~f).sum()) for k, f in fits.items()}
val = val[fits["val"]].reset_index(drop=True)
test = {s: df[fits[s]].reset_index(drop=True) for s, df in test.items()}
planted = {s: planted_colour_rows(df) for s, df in test.items()}  # positive control
counts = pd.DataFrame({f"{test_split} draw {s}": df.foil_type.value_counts() for s, df in test.items()})
counts[val_split] = val.foil_type.value_counts()
counts.loc["planted colour"] = [len(p) for p in planted.values()] + [0]
display(counts.fillna(0).astype(int))
print(f"captions skipped as longer than the context: {skipped}")

# %% [markdown]
# ## Attributions for every variant from one backward pass
#
# One forward and one backward pass per batch gives all attention maps and their
# gradients; each variant is a different reduction of the same tensors: the last $n$
# layers (CLIP4DM), the same with a ReLU (isolating the paper's central change), with
# Chefer's rollout, and GAE (ReLU and rollout over all layers). The layer count $n$ is
# chosen on the validation split by LA.
#
# Images are decoded and encoded 256 at a time (`fgclip.models.encode_image_paths`); only
# their embeddings stay. At the `gpu-full` size (20,000 pairs per draw, ViT-B-32) that is
# under 50 MB per draw; the peak is one batch of 256 captions with the attention maps and
# their gradients of every text layer (12 layers × 8 heads × 77 × 77 floats each, about
# 0.6 GB for maps and as much for gradients), plus about 150 MB of pixels of one image batch.

# %%
n_text = len(clip.model.transformer.resblocks)
variants = {}
for n in range(1, n_text + 1):
    last = tuple(range(-n, 0))
    variants.update({f"last {n}": AttributionConfig(layers=last),
                     f"last {n} + ReLU": AttributionConfig(layers=last, relu=True),
                     f"last {n} + rollout": AttributionConfig(layers=last, rollout=True)})
variants["GAE (ReLU + rollout)"] = AttributionConfig(layers=tuple(range(n_text)), relu=True, rollout=True)


def attribute(df, names):  # images decoded and encoded a batch at a time: only their features stay
    feats, index = encode_image_paths(clip, df.image.tolist(), device=device)
    return clip4dm_variants(clip, feats, df.caption.tolist(), {k: variants[k] for k in names}, device=device,
                            batch_size=batch_size, image_index=index), (index, feats)


t0 = time.perf_counter()
attr_val, _ = attribute(val, variants)
rng = np.random.default_rng(seed)
choice = pd.Series({f"last {n}": localization_units(attr_val[f"last {n}"], val, rng).hit.mean()
                    for n in range(1, n_text + 1)}, name=f"LA on {val_split}")
n_chosen = n_last_layers or int(choice.to_numpy().argmax()) + 1
main = f"last {n_chosen}"
methods = {"CLIP4DM": main, "CLIP4DM + ReLU": f"{main} + ReLU",
           "CLIP4DM + rollout": f"{main} + rollout", "GAE": "GAE (ReLU + rollout)"}
attr, loo, imgs = {}, {}, {}
for s, df in test.items():  # leave-one-word-out on foil captions only (n + 1 text passes each)
    attr[s], imgs[s] = attribute(df, methods.values())
    foil = df.foil_type.ne("original").to_numpy()
    loo[s] = (leave_one_word_out(clip, imgs[s][1], df.caption[foil].tolist(), device=device,
                                 image_index=np.asarray(imgs[s][0])[foil]), foil)
attr_planted = {s: attribute(p, [main])[0][main] for s, p in planted.items() if len(p)}
print(f"attributions and leave-one-word-out on {sum(map(len, test.values())) + len(val)} captions "
      f"in {time.perf_counter() - t0:.1f} s; CLIP4DM uses the last {n_chosen} of {n_text} text layers")

# %% [markdown]
# ## What is tuned, and on which split
#
# The paper's $\epsilon = -5\cdot10^{-5}$ belongs to a ViT-B/32's gradient scale; ours is
# another network, so every $\epsilon$ is tuned on the validation split and then frozen:
# one for the threshold rule's word F1, one per F-CLIPScore form for its AP. The
# most-negative form has no $\epsilon$, so under the FOIL protocol LA does not depend on it.

# %%
orig_val = val.foil_type.eq("original").to_numpy()
lab_val = labels_of(attr_val[main], val)
eps = {"most negative": None, "threshold": tune_eps_for_ap(attr_val[main], orig_val, "threshold"),
       "additive": tune_eps_for_ap(attr_val[main], orig_val, "additive")}
eps_f1 = tune_eps_f1(attr_val[main], lab_val, np.ones(len(val), bool)) if tune_epsilon else epsilon
val_fpr = float(np.mean([np.mean(w < eps_f1) for w, o in zip(attr_val[main].w, orig_val) if o]))
selection = pd.DataFrame([
    ("layers n (last n)", f"1..{n_text}", main, "LA (most negative word)", val_split),
    ("ε, threshold rule", "80 quantiles of w_j" if tune_epsilon else "given", f"{eps_f1:.3g}", "word F1", val_split),
    ("ε, F-CLIPScore threshold form", "40 quantiles of w_j", f"{eps['threshold']:.3g}", "AP", val_split),
    ("ε, F-CLIPScore additive form", "40 quantiles of w_j", f"{eps['additive']:.3g}", "AP", val_split),
    ("ε, F-CLIPScore most-negative form", "none", "none", "the form has no ε", "-"),
    ("ε per foil type (transfer)", "80 / 40 quantiles", "table below", "word F1 / AP", val_split)],
    columns=["hyperparameter", "candidates", "chosen", "criterion", "split"])
display(selection)
display(choice.to_frame().T.style.format("{:.3f}"))

# %% [markdown]
# ## Results per foil type
#
# LA is the share of foil captions whose most negative word lies in the foil span; word
# AUC asks, within a caption, how often the foil word is more negative than another
# word; AP ranks the originals above the foils by a pair score. Baselines: the expected
# LA of a uniformly drawn content word (stop words excluded); leave-one-word-out, which
# deletes each word in turn and attributes the score change to it ($n+1$ text passes per
# pair, no gradient); GAE; and CLIP4DM with a ReLU added back. Real FOIL replaces nouns, so
# the headline LA is on shape foils, with the all-type mean beside it.

# %%
units = pd.concat([build_units(df, {m: attr[s][k] for m, k in methods.items()}, "CLIP4DM", rng, eps, eps_f1,
                               partial={"leave-one-word-out": loo[s]}) for s, df in test.items()], ignore_index=True)
types = sorted(set(units.foil_type) - {"original"})
la_table, ap_table = type_tables(units, [*methods, "leave-one-word-out", "random content word"],
                                 ["most negative", "threshold", "additive", "CLIPScore"], types)
display(la_table.style.format("{:.3f}", na_rep="–").set_caption(f"{test_split}, draws {seeds}"))
display(ap_table.style.format("{:.3f}").set_caption("AP of originals above foils (F|form)"))
ties = {m: int(units[f"tie|{m}"].sum()) for m in [*methods, "leave-one-word-out"]}
print(f"tied minima broken at random: {ties} of {len(units)} captions")

# %% [markdown]
# Every comparison in words goes through `fgclip.verdicts.compare`: the difference of the
# two arms, pooled over the draws, with an interval from the between-draw spread and a
# bootstrap over images.

# %%
is_foil = ~units.foil_type.eq("original").to_numpy()
headline = "shape" if units.foil_type.eq("shape").any() else "foil"  # real FOIL: every foil replaces a noun
shape = units.foil_type.eq(headline).to_numpy()
orig = units.foil_type.eq("original").to_numpy()
cmp = dict(seed=seed)


def la_verdict(a, b, where, what):
    return compare_units(units, units[f"hit|{a}"], units[f"hit|{b}"], where, claim=f"LA on {what}",
                         arms=(a, b), unit="foil captions", **cmp)


v_la = [la_verdict("CLIP4DM", "random content word", shape, f"{headline} foils"),
        la_verdict("CLIP4DM", "leave-one-word-out", shape, f"{headline} foils"),
        la_verdict("CLIP4DM", "leave-one-word-out", is_foil, "all foils"),
        la_verdict("CLIP4DM", "CLIP4DM + ReLU", is_foil, "all foils (the ReLU alone)"),
        la_verdict("CLIP4DM", "GAE", is_foil, "all foils")]
v_la += [la_verdict("CLIP4DM", "random content word", units.foil_type.eq(t).to_numpy(), f"{t} foils")
         for t in types if t != headline]
ap = {f: ap_units(units, units[f"F|{f}"], is_foil) for f in ["most negative", "threshold", "additive", "CLIPScore"]}
names = {"most negative": "F-CLIPScore as the paper's code evaluates it (most negative)",
         "threshold": "F-CLIPScore, threshold form", "additive": "F-CLIPScore, additive reading"}
v_ap = [compare_units(units, ap[f], ap["CLIPScore"], orig, claim="AP of originals above foils (per-original precision)",
                      arms=(names[f], "CLIPScore"), unit="original captions", **cmp) for f in names]
v_orig = compare_units(units, units.role.eq("colour").astype(float), units["random role share"], orig,
                       claim="on original captions, the most negative word is a colour word",
                       arms=("CLIP4DM's most negative word", "a random word"), unit="original captions", **cmp)
display(verdicts.verdict_table(v_la + v_ap + [v_orig]))
role = pd.DataFrame({"most negative word": units[orig].role.value_counts(normalize=True)})
display(role.style.format("{:.3f}").set_caption("original captions: where the most negative word falls"))

# %% [markdown]
# ## Controls
#
# The localisation test (CLIP4DM against a random content word on shape foils) is read
# through two controls. **Positive:** colour foils on single-object images, with the
# foil colour replaced by the colour farthest from the object's; the image contradicts
# the word as strongly as the toy world allows, so CLIP4DM must beat a random content
# word there. **Negative:** on original captions, where nothing is wrong, the threshold
# rule must not flag words more often than the rate its $\epsilon$ was tuned to on the
# validation originals. If either control fails, the test cannot decide here.

# %%
if attr_planted:
    pl = pd.concat([build_units(p, {"CLIP4DM": attr_planted[s]}, "CLIP4DM", rng, eps, eps_f1)
                    for s, p in planted.items() if s in attr_planted], ignore_index=True)
    v_pos = compare_units(pl, pl["hit|CLIP4DM"], pl["hit|random content word"], np.ones(len(pl), bool),
                          claim="LA on planted colour foils", arms=("CLIP4DM", "random content word"),
                          unit="planted captions", **cmp)
else:  # real FOIL has no colour foils: the control cannot be built, so it cannot pass
    v_pos = verdicts.compare([0.0, 0.0], [0.0, 0.0], claim="no planted colour foils", arms=("CLIP4DM", "random"), unit="none")
v_neg = compare_units(units, units.flagged, np.full(len(units), val_fpr), orig,
                      claim="share of words flagged on original captions",
                      arms=(f"{test_split} originals", f"rate tuned on {val_split}"), unit="original captions", **cmp)
f_loc = verdicts.falsify(v_la[0], v_pos, v_neg, effect=verdicts.A_BETTER)
print(f_loc.sentence())
display(verdicts.verdict_table([v_pos, v_neg]))

# %% [markdown]
# ## An example
#
# A test image with one of its foil captions: red words pull the score down.

# %%
s0, df0 = seeds[0], test[seeds[0]]
first = int(np.flatnonzero(df0.foil_type.eq(headline))[0])
(img_raw,), img_t, _ = load_image_batch([df0.image[first]], clip)  # its pixels and model input (1, 3, S, S)
fig = attribution_figure(img_raw, attr[s0][main].words[first], attr[s0][main].w[first],
                         eps_f1, float(clip_score(attr[s0][main].cos[first])))
print(f"foil word: {df0.foil_word[first]!r} at word {int(df0.start[first])}")

# %% [markdown]
# ## Falsification: does the signal fade at low CLIPScore, and does one ε travel?
#
# The paper reads its own results as the negative signal weakening when the pair's
# CLIPScore is low, and it uses one global $\epsilon$ per benchmark. Foil types differ
# both in difficulty and in CLIPScore, so a pooled quartile table confounds the two; we
# split each foil type into CLIPScore quartiles (within each draw) and compare the
# highest quartile with the lowest, for LA and word AUC. Then we tune $\epsilon$ on one
# foil type's validation captions and apply it to another's test captions, as word F1
# and as the AP of the threshold-form F-CLIPScore.

# %%
v_quart = quartile_verdicts(units, "CLIP4DM", types, seed)
display(verdicts.verdict_table(v_quart))
if len(types) > 1:
    v_trans, eps_types = transfer_verdicts(units, {s: attr[s][main] for s in test}, val, attr_val[main], types, seed)
    display(eps_types.style.format("{:.2e}").set_caption(f"ε per foil type, tuned on {val_split}"))
    display(verdicts.verdict_table(v_trans))
else:  # real FOIL has one foil type: nothing to transfer across
    v_trans, eps_types = [], pd.DataFrame()
    print(f"one foil type ({types[0]}): no threshold transfer across types to test")

# %% [markdown]
# The reviewers' own version of the question uses the paper's two thresholds: FOIL's
# $\epsilon = -5\times10^{-5}$ against the $-1\times10^{-5}$ the paper needs on Rich-HF, on
# the same attributions. The most-negative word (LA) does not depend on $\epsilon$, so the
# test is on word F1 and on the threshold-form F-CLIPScore. The paper's thresholds are set
# for OpenAI's ViT-B/32, whose attributions have their own scale; the table of flagged
# words shows where they fall on the model this run uses.

# %%
v_paper_eps, flagged_share = paper_epsilon_verdicts(units, {s: attr[s][main] for s in test}, seed)
display(flagged_share.style.format("{:.3f}"))
display(verdicts.verdict_table(v_paper_eps))

# %% [markdown]
# ## Speed: one backward pass against one text pass per word
#
# Same model, same 32 test pairs, timed after a warm-up call
# (`benchmarks/bench_clip4dm.py` is the stand-alone version). Each method's work is also
# counted in FLOPs (torch's `FlopCounterMode`, forward and backward): the ratio of the two
# is the speed-up the arithmetic allows, and a measured ratio below it is overhead.

# %%
n_speed = min(32, len(df0))
_, speed_inputs, speed_index = load_image_batch(df0.image.tolist()[:n_speed], clip)
speed = pairs_per_second(clip, speed_inputs[speed_index], df0.caption.tolist()[:n_speed], variants[main], device)
display(pd.DataFrame(speed).rename_axis(f"{n_speed} pairs, {torch.get_num_threads()} threads").style.format("{:.3g}"))
flop_ratio = speed["GFLOP/pair"]["leave-one-word-out"] / speed["GFLOP/pair"]["CLIP4DM"]
print(f"CLIP4DM runs {speed['pairs/s']['CLIP4DM'] / speed['pairs/s']['leave-one-word-out']:.2f}x the pairs/s of "
      f"leave-one-word-out; their FLOPs allow {flop_ratio:.2f}x")

# %% [markdown]
# ## Try it: type a caption
#
# Each word is coloured by its attribution; words under the ε slider are framed. (In
# the rendered book this shows the figure at the default values; in Jupyter or Colab the
# controls are live.)

# %%
def attribute_one(caption: str):
    res = clip4dm(clip, img_t, [caption], variants[main], device=device)
    return res.words[0], res.w[0]


w_all = np.concatenate(attr[s0][main].w)
widget = caption_widget(img_raw, df0.caption[first], attribute_one, eps=eps_f1,
                        eps_range=tuple(float(x) for x in np.quantile(w_all, [0.01, 0.99])))
widget.show()

# %% [markdown]
# ## Critique
#
# The found box states only what the verdicts above say; the argument, and what the run
# does and does not support, is on the critique page ({doc}`../book/ch2_critique`).

# %%
all_v = v_la + v_ap + [v_orig] + v_quart + v_trans + v_paper_eps
n_foils = int(is_foil.sum())
display(found_box(f"What we found (test draws {seeds}, {n_foils} test foils, {model}, layers {main})", [
    f"{headline.capitalize()} foils (nouns replaced, the kind real FOIL has), LA "
    f"{units.loc[shape, 'hit|CLIP4DM'].mean():.3f}; all types "
    f"{units.loc[is_foil, 'hit|CLIP4DM'].mean():.3f}. Seed axis: {n_seeds} independent test draws.",
    f"Controls and conclusion: {f_loc.sentence()}", *[v.sentence() for v in all_v]]))
write_results(results_path, {
    "seeds": seeds, "seed_axis": "independent test draws (toy: exports; real: seeded samples)",
    "model": model, "pretrained": pretrained, "layers": main, "n_test_foils": n_foils,
    "epsilon": {"word F1": eps_f1, **{f"F {k}": v for k, v in eps.items()}}, "val_fpr_originals": val_fpr,
    "la_headline_shape": float(units.loc[shape, "hit|CLIP4DM"].mean()),
    "la_all_types": float(units.loc[is_foil, "hit|CLIP4DM"].mean()),
    "per_type_la": {m: row["LA"].dropna().to_dict() for m, row in la_table.iterrows()},
    "per_type_auc": {m: row["word AUC"].dropna().to_dict() for m, row in la_table.iterrows()},
    "ap": ap_table.to_dict(orient="index"), "original_caption_roles": role.iloc[:, 0].to_dict(),
    "ties": ties, "skipped_long": skipped, "eps_per_type": eps_types.to_dict(orient="index"),
    "speed_pairs_per_s": speed, "verdicts": all_v, "controls": [f_loc],
    "selection": selection.to_dict(orient="records"), "wall_s": time.perf_counter() - t_start}, chapter="ch2")
