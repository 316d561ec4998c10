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
n_seeds: int = 6  # independent test draws (6: the t interval over 3 had 2 degrees of freedom, half-widths 1.7-2.5x wider): toy: fresh test scenes and foils per seed; real: seeded samples [at least 1]
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
margin_share: float = 0.03  # equivalence margin for shares of captions (LA, hit rates) [> 0]
margin_rank: float = 0.02  # equivalence margin for rank scores (paired accuracy, AP, word AUC, word F1) [> 0]
margin_attr: float = 0.1  # equivalence margin for attribution values (min w_j), in units of the chosen |ε| [> 0]
margin_flag: float = 0.01  # margin for the share of words below ε: ~1/5 of the few-per-cent base rate seen when declared [> 0]
device: str = "cpu"
results_path: str = ""  # set by `python -m fgclip run`: where the headline numbers go as JSON

# %% tags=["remove-cell"]
from fgclip.runner import check_injected; check_injected("ch2", globals())  # the runner's checks, on what papermill injected

# %%
import time

import numpy as np
import pandas as pd
import torch
from IPython.display import display

from fgclip import verdicts
from fgclip.methods import clip4dm as c4dm
from fgclip.metrics import misalignment as mis
from fgclip.models import create_clip, load_image_batch
from fgclip.reporting import found_box, glue_findings, show_source, shown, write_results
from fgclip.seeding import seed_everything
from fgclip.studies.clip4dm import (arms as carms, comparisons as ccmp, controls as cctl, data as cdata,
                                    findings as cfind, pairs as cpairs, scale as cscale, selection as csel,
                                    speed as cspeed, units as cunits)
from fgclip.viz import forest_plot, set_style
from fgclip.viz.words import attribution_figure, caption_widget

set_style()
seed_everything(seed)
t_start = time.perf_counter()
seeds = [seed + k for k in range(n_seeds)]
margins = cunits.Margins(share=margin_share, rank=margin_rank, attr=margin_attr, flag=margin_flag)  # declared before any score is seen
print(f"seed={seed}, test draws {seeds}, model={model}, pretrained={shown(pretrained)}, device={device}")

# %% [markdown]
# ## The rule
#
# Let $s = \langle f(I), g(T) \rangle$ be the frozen CLIP's cosine score for image $I$ and
# caption $T$, and $A^h_l \in \mathbb{R}^{L \times L}$ the attention probabilities of head $h$
# in text layer $l$. CLIP4DM multiplies each map element-wise by its gradient, averages over
# heads and over a set $\Lambda$ of late layers, and reads the row of the [EOS] token, the
# position the text encoder pools:
#
# $$
# R^h_l = \nabla A^h_l \odot A^h_l, \qquad \nabla A^h_l = \frac{\partial s}{\partial A^h_l}, \qquad
# \bar R = \frac{1}{|\Lambda|}\sum_{l \in \Lambda} \mathbb{E}_h\, R^h_l
# $$ (eq-clip4dm-relevance)
#
# GAE {cite}`chefer2021gae` instead clamps, $\mathbb{E}_h [\nabla A^h_l \odot A^h_l]^+$, and
# rolls the layers out, $\bar R \leftarrow \bar R + \mathrm{cam}_l \bar R$ from $\bar R = I$.
# One function computes every variant, keyed by an `AttributionConfig` (layers, `relu`,
# `rollout`):

# %%
display(show_source(c4dm.token_relevance))

# %% [markdown]
# A check by hand: one pair, two heads, three tokens (A, G and [EOS]), one layer. Only the
# [EOS] row of the gradient is non-zero, so $\bar R_{\mathrm{EOS}}$ is the head mean of
# $\nabla A \odot A$ on that row; the ReLU of GAE turns both negative entries positive.

# %%
A = torch.tensor([[[[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]],  # (B=1, H=2, L=3, L=3)
                   [[1.0, 0, 0], [0.6, 0.4, 0], [0.4, 0.4, 0.2]]]])
G = torch.tensor([[[[0.0, 0, 0], [0, 0, 0], [1.0, -2.0, 0.5]], [[0.0, 0, 0], [0, 0, 0], [-1.0, 0.5, 1.0]]]])
r = c4dm.token_relevance([A], [G], torch.tensor([2]), c4dm.AttributionConfig(layers=(0,)))
r_gae = c4dm.token_relevance([A], [G], torch.tensor([2]), c4dm.AttributionConfig(layers=(0,), relu=True))
print(f"A, ∇A {tuple(A.shape)} -> R̄[EOS] {tuple(r.shape)}: {r[0].numpy().round(3)}; with ReLU {r_gae[0].numpy().round(3)}")
assert torch.allclose(r, torch.tensor([[(0.2 - 0.4) / 2, (-0.6 + 0.2) / 2, (0.25 + 0.2) / 2]]))

# %% [markdown]
# The BPE tokens $\mathcal{T}_j$ of each word $j$ are averaged into its attribution,
#
# $$
# w_j = \frac{1}{|\mathcal{T}_j|} \sum_{k \in \mathcal{T}_j} \bar R_{\mathrm{EOS},\, k}
# $$ (eq-clip4dm-word)
#
# with the words split as the official code splits them: at spaces, with "." and "," as
# words of their own, which are never candidates.

# %%
display(show_source(c4dm.word_attributions))

# %%
row = np.array([0.7, 1.0, 2.0, 4.0, -3.0])  # (T=5,): [SOT], then words of 1, 2 and 1 tokens
w_check = c4dm.word_attributions(row, counts=[1, 2, 1], keep=[0, 1, 2])
print(f"R̄[EOS] {row.shape} -> w {w_check.shape}: {w_check}")
assert w_check.tolist() == [1.0, (2.0 + 4.0) / 2, -3.0]

# %% [markdown]
# A word is misaligned under the threshold rule, and the paper's rule for FOIL, where each
# foil caption has exactly one wrong word, takes the most negative word:
#
# $$
# \mathrm{mis}(w_j) = [\,w_j < \varepsilon\,], \qquad \hat{j} = \arg\min_j w_j
# $$ (eq-clip4dm-rules)
#
# Tied minima are broken at random with the seed (and counted).

# %%
display(show_source(c4dm.threshold_words, mis.most_negative))

# %%
w_check = np.array([-0.1, 0.2, -0.3])  # (n_words=3,)
j_hat, tied = mis.most_negative(w_check, np.random.default_rng(seed))
print(f"w {w_check.shape}: mis at ε = -0.05 {c4dm.threshold_words(w_check, -0.05)}, argmin {j_hat} (tied: {tied})")
assert c4dm.threshold_words(w_check, -0.05).tolist() == [True, False, True] and j_hat == 2

# %% [markdown]
# Localisation accuracy (LA) is scored as the official code scores it: by the word. With
# $\nu$ stripping the punctuation around a word and lower-casing it, a foil caption $T'$ with
# foil word $f$ counts as found when its most negative word *is* that word,
#
# $$
# \mathrm{LA} = \frac{1}{|\mathcal{F}|} \sum_{T' \in \mathcal{F}} \big[\,\nu(\mathrm{word}_{\hat j}) = \nu(f)\,\big]
# $$ (eq-clip4dm-la)
#
# so a repeated word ("a red star and a red ring") counts wherever it stands, and a
# multi-word foil ("teddy bear") never equals one word. The **position rule** (the chapter's
# earlier reading: $\hat j$ lies in the replaced span $S$) stays as a named arm. The random
# content word and the informed floor are scored by the word rule too.

# %%
display(show_source(mis.word_matches, cunits.localization_units))
w_la, words = np.array([0.2, 0.1, 0.3, 0.0, 0.2, -0.4, 0.1]), "a red star and a red ring".split()  # (7,)
la_check = cunits.localization_units(c4dm.Attributions([words], [w_la], np.zeros(1), [np.arange(7)]), pd.DataFrame(
    {"start": [1], "length": [1], "foil_word": ["Red."]}), np.random.default_rng(seed))
print(f"foil 'Red.' at word 1, argmin at word 5 ('red'): word rule {la_check.hit[0]}, position rule {la_check.hit_pos[0]}")
assert (la_check.hit[0], la_check.hit_pos[0]) == (1.0, 0.0)

# %% [markdown]
# Word AUC asks, within one foil caption, how often a word of the foil span $S$ is more
# negative than one of the other words $N$ (ties count a half):
#
# $$
# \mathrm{AUC}(T') = \frac{1}{|S|\,|N|} \sum_{p \in S} \sum_{n \in N} \Big([w_p < w_n] + \tfrac12 [w_p = w_n]\Big)
# $$ (eq-clip4dm-auc)

# %%
display(show_source(mis.caption_auc))
auc_check = mis.caption_auc(np.array([0.0, -1.0, -1.0, 2.0]), np.array([0, 1, 0, 0]))  # below 2 of 3, tied with 1
print(f"w (4,), foil word 1: AUC {auc_check:.3f}")
assert np.isclose(auc_check, 2.5 / 3)

# %% [markdown]
# For a global score, CLIPScore {cite}`hessel2021clipscore` is $2.5\max(s, 0)$, and
# F-CLIPScore comes in three forms, with the penalty $P_\varepsilon = \sum_j \mathrm{mis}(w_j)\, w_j$:
#
# $$
# F_\varepsilon = (1 - \max(s, 0))\, P_\varepsilon, \qquad
# F_{\min} = (1 - \max(s, 0)) \min_j w_j, \qquad
# F_+ = 2.5\max(s, 0) + (1 - s)\, P_\varepsilon
# $$ (eq-fclipscore)
#
# The paper's public code scores a pair by $F_\varepsilon$ in its threshold mode and by
# $F_{\min}$ in the most-negative mode it prescribes for FOIL: the latter is **F-CLIPScore as
# the paper's code evaluates it** on FOIL, our headline. $F_+$ is our earlier reading of the
# paper's Eq. 11, kept as a named deviation. Only $F_\varepsilon$ and $F_+$ have an
# $\varepsilon$; each gets its own, tuned on the validation split.

# %%
display(show_source(c4dm.misalignment_penalty, c4dm.clip_score, c4dm.f_clip_score))

# %%
forms = {form: c4dm.f_clip_score(0.5, w_check, -0.05, form) for form in c4dm.F_FORMS}
print(f"s = 0.5, w {w_check.tolist()}, ε = -0.05: P_ε = {c4dm.misalignment_penalty(w_check, -0.05):.2f}, {forms}")
assert np.allclose([forms["threshold"], forms["most negative"], forms["additive"]], [-0.2, -0.15, 1.25 - 0.2])

# %% [markdown]
# | equation | function | test |
# |---|---|---|
# | {eq}`eq-clip4dm-relevance` | {func}`fgclip.methods.clip4dm.token_relevance` | `tests/test_ch2_clip4dm.py::test_no_relu_keeps_negatives_that_gae_clamps`, `tests/test_ch2_clip4dm.py::test_layer_mean_and_rollout` |
# | {eq}`eq-clip4dm-word` | {func}`fgclip.methods.clip4dm.word_attributions` | `tests/test_ch2_clip4dm.py::test_word_attributions_average_bpe_tokens` |
# | {eq}`eq-clip4dm-rules` | {func}`fgclip.methods.clip4dm.threshold_words`, {func}`fgclip.metrics.misalignment.most_negative` | `tests/test_ch2_clip4dm.py::test_rules_and_scores_by_hand`, `tests/test_ch2_protocol.py::test_span_ties_auc_f1` |
# | {eq}`eq-clip4dm-la` | {func}`fgclip.metrics.misalignment.word_matches`, {func}`fgclip.studies.clip4dm.units.localization_units` | `tests/test_foil_words.py::test_word_rule_counts_a_repeated_word_the_position_rule_does_not` |
# | {eq}`eq-clip4dm-auc` | {func}`fgclip.metrics.misalignment.caption_auc` | `tests/test_ch2_protocol.py::test_span_ties_auc_f1` |
# | {eq}`eq-fclipscore` | {func}`fgclip.methods.clip4dm.f_clip_score`, {func}`fgclip.methods.clip4dm.misalignment_penalty` | `tests/test_ch2_protocol.py::test_f_clip_score_forms_by_hand`, `tests/test_ch2_clip4dm.py::test_penalty_and_three_forms_by_hand` |
# | {eq}`eq-clip4dm-paired` (below) | {func}`fgclip.studies.clip4dm.pairs.paired_accuracy` | `tests/test_ch2_controls.py::test_paired_accuracy_and_own_original` |
#
# Everything costs one forward and one backward pass per pair. open_clip 3.3.0
# {cite}`ilharco2021openclip` never materialises attention probabilities (its blocks call a
# fused kernel with `need_weights=False`), so `fgclip.models.attention.capture_attention`
# swaps the attention of the layers a variant uses for an explicit computation with the same
# weights, records $A^h_l$ inside the autograd graph, and puts the model back on exit; a test
# checks the outputs are unchanged to $10^{-5}$.

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
assert all(p.dtype == torch.float32 for p in clip.model.parameters())  # fp32 everywhere, no autocast
data = cdata.load_draws(clip, data_root, val_split, test_split, seed, seeds, n_scenes, max_pairs)
display(data.counts(val_split, test_split))
print(f"captions skipped as longer than the context: {data.skipped}")

# %% [markdown]
# ## Attributions for every variant from one backward pass
#
# One forward and one backward pass per batch gives all attention maps and their
# gradients; each variant is a different reduction of the same tensors
# ({func}`fgclip.studies.clip4dm.arms.layer_grid`): the last $n$ layers (CLIP4DM), the same with a ReLU (isolating the
# paper's central change), with Chefer's rollout, and GAE (ReLU and rollout over all
# layers). The layer count $n$ is chosen on the validation split by LA ({func}`fgclip.studies.clip4dm.selection.choose_layers`);
# the test draws are attributed by the four arms built from the chosen rule, plus
# leave-one-word-out on their foil captions ({func}`fgclip.studies.clip4dm.arms.attribute_draw`).
#
# Images are decoded and encoded 256 at a time (`fgclip.models.encode_image_paths`); only
# their embeddings stay. At the `gpu-full` size (20,000 pairs per draw, ViT-B-32) that is
# under 50 MB per draw; the peak is one batch of 256 captions with the attention maps and
# their gradients of every text layer (12 layers × 8 heads × 77 × 77 floats each, about
# 0.6 GB for maps and as much for gradients), plus about 150 MB of pixels of one image batch.

# %%
n_text = len(clip.model.transformer.resblocks)
t0 = time.perf_counter()
attr_val, _ = carms.attribute(clip, data.val, carms.layer_grid(n_text), device, batch_size)  # keyed by config
rng = np.random.default_rng(seed)  # tie breaks: the layer choice, then the test units, then the control
choice, main = csel.choose_layers(attr_val, data.val, n_text, rng, n_last_layers, name=f"LA on {val_split}")
arms = carms.method_arms(main, n_text)  # {arm name: AttributionConfig}
draws = {s: carms.attribute_draw(clip, df, list(arms.values()), device, batch_size) for s, df in data.test.items()}
print(f"attributions and leave-one-word-out on {sum(map(len, data.test.values())) + len(data.val)} captions "
      f"in {time.perf_counter() - t0:.1f} s; CLIP4DM uses the {main.label} of {n_text} text layers")

# %% [markdown]
# ## What is tuned, and on which split
#
# The paper's $\varepsilon = -5\cdot10^{-5}$ belongs to a ViT-B/32's gradient scale; ours is
# another network, so every $\varepsilon$ is tuned on the validation split and then frozen:
# one for the threshold rule's word F1, one per F-CLIPScore form for its paired accuracy
# (the share of foils scored below their own original, defined below). The
# most-negative form has no $\varepsilon$, so under the FOIL protocol LA does not depend on it.

# %%
eps = csel.select_epsilons(attr_val[main], data.val, tune_epsilon, epsilon)
display(selection := csel.selection_table(n_text, main, eps, tune_epsilon, val_split))
display(choice.to_frame().T.style.format("{:.3f}"))

# %% [markdown]
# ## Results per foil type
#
# LA ({eq}`eq-clip4dm-la`) is the share of foil captions whose most negative word is the foil
# word; word AUC ({eq}`eq-clip4dm-auc`) asks, within a caption, how often the foil word is more
# negative than another word; AP ranks the originals above the foils by a pair score. Baselines: the expected
# LA of a uniformly drawn content word (stop words excluded); leave-one-word-out, which
# deletes each word in turn and attributes the score change to it ($n+1$ text passes per
# pair, no gradient); GAE; and CLIP4DM with a ReLU added back. Real FOIL replaces nouns, so
# the headline LA is on shape foils, with the all-type mean beside it.

# %%
units = ccmp.unit_table(draws, arms, rng, eps)  # one row per test caption of every draw
types, headline = ccmp.foil_types(units), ccmp.headline_type(units)
la_table, ap_table = cunits.type_tables(units, [*arms, cunits.POSITION_RULE, "leave-one-word-out", "random content word"],
                                        ["most negative", "threshold", "additive", "CLIPScore"], types)
display(la_table.style.format("{:.3f}", na_rep="–").set_caption(f"{test_split}, draws {seeds}"))
display(ap_table.style.format("{:.3f}").set_caption("AP of originals above foils (F|form)"))
ties = {m: int(units[f"tie|{m}"].sum()) for m in [*arms, "leave-one-word-out"]}
print(f"tied minima broken at random: {ties} of {len(units)} captions")

# %% [markdown]
# Where the most negative word falls, per foil type, explains a low LA that is not a
# labelling error: if one word class draws the most negative attribution whether or not it
# is wrong, a foil in another class is found only when it is more negative still. The table
# gives, per foil type (and on the originals), the share of captions whose most negative word
# has each role; the position control below tests such a prior on each type's slot.

# %%
roles = cfind.roles_by_type(units)
display(roles.style.format("{:.3f}").set_caption("share of captions whose most negative word has each role"))
print(relation := cfind.relation_note(roles, la_table.loc[carms.MAIN, "LA"].to_dict()))

# %% [markdown]
# The paper ranks every original above every foil by a pair score and reports the AP. Our
# toy captions come in templates (objects, relations, counts) whose cosines need not be
# comparable, so a pooled AP can reward separating templates. The headline
# score comparison therefore pairs each foil $T'$ with its own original $T$ on the same image
# and asks how often the original scores higher, per foil type:
#
# $$
# \mathrm{acc}(F) = \frac{1}{|\mathcal{F}_t|} \sum_{T' \in \mathcal{F}_t}
# \Big([F(I, T) > F(I, T')] + \tfrac12 [F(I, T) = F(I, T')]\Big)
# $$ (eq-clip4dm-paired)
#
# with $\mathcal{F}_t$ the foils of type $t$; the pooled AP stays as a named row.

# %%
display(show_source(cpairs.paired_accuracy))
check = pd.DataFrame({"seed": 0, "image": ["i", "i", "j", "j"], "caption": ["a b", "a c", "d e", "d f"],
                      "original": ["a b", "a b", "d e", "d e"], "foil_type": ["original", "shape"] * 2})
acc_check = cpairs.paired_accuracy(check, [0.9, 0.5, 0.2, 0.2])  # one foil below its original, one tied
print(f"scores (4,) -> acc per caption {acc_check}")
assert np.isnan(acc_check[[0, 2]]).all() and acc_check[[1, 3]].tolist() == [1.0, 0.5]

# %% [markdown]
# Every comparison in words goes through `fgclip.verdicts.compare`: the difference of the
# two arms, pooled over the draws, with an interval from the between-draw spread and a
# bootstrap over images (the `cluster_unit` of every record: an image's original and foils
# move together). Each verdict is judged against a margin of practical equivalence declared
# in the parameters before the run: `margin_share` for shares of captions (LA and other hit
# rates), `margin_rank` for rank scores (paired accuracy, AP, word AUC, word F1). A share
# margin of 0.03 means three captions in a hundred found or missed, below which we would not
# call one rule better at finding the wrong word; a rank margin of 0.02 is two foils in a
# hundred ranked differently. The share of a caption's words below $\varepsilon$ has its own
# margin, `margin_flag` (0.01), declared when that rate sat at a few per cent on the toy CLIP
# of the time: there the share margin would call a rise of half the base rate "equivalent",
# and 0.01 was about a fifth of it. The base rate moves with the checkpoint (this run's rate on
# the validation originals is `val_fpr_originals` in the record), so every flag-rate verdict
# also prints the rate it starts from and its relative change. All are fixed in the parameters, the same for every
# checkpoint, and are not adjusted to any result. The informed floor draws a word of the foil's own word
# class (a shape word for a shape foil): a rule with nothing but a prior for word classes
# reaches it.

# %%
v_la, v_pair = ccmp.la_verdicts(units, seed, margins), ccmp.paired_verdicts(units, seed, margins)
v_floor, v_ap = ccmp.floor_verdicts(units, seed, margins), ccmp.ap_verdicts(units, seed, margins)
v_orig = ccmp.colour_word_verdict(units, seed, margins)
display(verdicts.verdict_table(v_la + v_floor + v_pair + v_ap + [v_orig]))

# %% [markdown]
# ## Controls
#
# The localization test (CLIP4DM against a random content word on the headline foils) is
# read through two controls, both on LA itself. **Positive:** colour foils on
# single-object images, the foil colour replaced by the colour farthest from the object's,
# so the image contradicts the word as strongly as the toy world allows; the rule must land
# on the planted word more often than on the same slot of the caption's own original, where
# the colour is true. A rule that simply names the colour word scores the same on both and
# fails. **Negative:** in the originals of the headline foils nothing is wrong; the rule must
# land on the slot the foil replaced as often as a random content word does, *equivalent*
# within `margin_share`. A rule with a prior for (or against) that slot's word class fails.
# If either control fails, the test cannot decide here. The position control also runs on
# every other foil type's slot: it says where the rule has a prior for a word class, and each
# type's own localisation test is read through its own slot's control. Last, per foil type,
# the rule's LA on the foil captions is compared with how often it lands on the same slot of
# their own originals, where the word is right: the comparison that separates finding the
# wrong word from a prior for its word class (a rule with only the prior scores alike on both).

# %%
v_pos = cctl.planted_control(cctl.planted_units(clip, data.planted, main, rng, eps, device, batch_size), units,
                             margins.share, seed)  # the planted colour foils of every draw
v_pos_type, v_slot = ([f(units, t, margins.share, seed) for t in ccmp.headline_first(units)]
                      for f in (cctl.position_control, cctl.slot_verdict))  # per type, the headline first
f_types = cctl.type_falsifications([v_la[0], *v_la[6:]], v_pos, v_pos_type)  # each type through its own slot
print("\n".join(f.sentence() for f in f_types))
display(verdicts.verdict_table([v_pos, *v_pos_type, *v_slot]))
fig = forest_plot([v_la[0], v_pos, *v_pos_type, *v_slot], margin=margins.share)
power = ccmp.power_records([v_la[0], v_la[1], v_floor[0], *v_pair[:2], v_slot[0]], [v_pos_type[0]])  # the central comparisons, headline; then its negative control (target: the margin)
display(pd.DataFrame(power).round(3).set_index("claim"))

# %% [markdown]
# ## An example
#
# A test image with one of its foil captions: red words pull the score down.

# %%
df0, a0 = data.test[seeds[0]], draws[seeds[0]].attr[main]
first = int(np.flatnonzero(df0.foil_type.eq(headline))[0])
(img_raw,), img_t, _ = load_image_batch([df0.image[first]], clip)  # its pixels and model input (1, 3, S, S)
fig = attribution_figure(img_raw, a0.words[first], a0.w[first], eps.f1, float(c4dm.clip_score(a0.cos[first])))
print(f"foil word: {df0.foil_word[first]!r} at word {int(df0.start[first])}")

# %% [markdown]
# ## Falsification: does the signal fade at low CLIPScore, and does one ε travel?
#
# The paper reads its own results as the negative signal weakening when the pair's
# CLIPScore is low, and it uses one global $\varepsilon$ per benchmark. Foil types differ
# both in difficulty and in CLIPScore, so a pooled quartile table confounds the two; we
# split each foil type into quartiles (within each draw) and compare the highest quartile
# with the lowest, for LA and word AUC. The quartiles are cut on the CLIPScore of each
# foil's *own original* caption on its image, the difficulty of the image-caption pair:
# cut on the foil's own score, the lowest quartile would collect the foils whose wrong word
# lowers the score most, and more flagged words there would follow by construction.

# %%
v_quart = ccmp.quartile_verdicts(units, carms.MAIN, types, seed, margins)
display(verdicts.verdict_table(v_quart))

# %% [markdown]
# LA and word AUC only rank the words of one caption; the paper's claim is about *scale*:
# at a low CLIPScore fewer words fall below a fixed $\varepsilon$. So the same quartiles are
# compared by the share of a caption's words below the chosen $\varepsilon$ (the threshold
# rule's) and by its minimum attribution in units of $|\varepsilon|$ (margin `margin_attr`).
# A **wrong-image arm** asks the scale question where the answer is known: each draw's
# original captions are paired with another scene of the same draw (a seeded derangement) and
# attributed with the chosen rule; a mismatched image should push more words below
# $\varepsilon$ than the caption's own image does. The same arm holds the paper's own failure
# case, a badly matched pair that a score should rate below the matched one: how often
# F-CLIPScore ranks a caption's own image above the wrong one, against CLIPScore, for
# $F_{\min}$ (no $\varepsilon$, so the reviewers' mechanism, few words below $\varepsilon$ at a low
# CLIPScore, cannot act on it) and for the threshold form at its validation-chosen
# $\varepsilon$, where it can. The share of words below $\varepsilon$ is judged against
# `margin_flag` and printed with its relative change. The figure
# shows the quartile verdicts of both kinds and the wrong-image arm.

# %%
q_table = cscale.quartile_table(units, types, eps.f1, margins)  # rows 'type | metric', columns Q1 (lowest) .. Q4
display(q_table.style.format("{:.3f}"))
v_scale = cscale.scale_quartile_verdicts(units, types, eps.f1, seed, margins)
wrong = cscale.wrong_image_units(clip, units, main, eps.f1, rng, device, batch_size, eps.forms.get("threshold"))
v_wrong = cscale.wrong_image_verdicts(wrong, eps.f1, seed, margins)
display(verdicts.verdict_table(v_scale + v_wrong))
fig = forest_plot(v_quart + v_scale + v_wrong, margin=margins.share)

# %% [markdown]
# Then we tune $\varepsilon$ on one foil type's validation captions and apply it to
# another's test captions, as word F1 and as the threshold-form F-CLIPScore's paired
# accuracy (each foil against its own original, the score its ε is also tuned by). Here ε is
# the thing being trained, so each test draw tunes its own pair of ε on its own random half of
# the validation images: the spread between draws then carries the tuning's chance too. (With
# one ε shared by every draw, this comparison reversed on a fresh seed.)

# %%
v_trans, eps_types = ccmp.transfer(units, draws, main, data.val, attr_val[main], seed, margins)
if v_trans:
    display(eps_types.style.format("{:.2e}").set_caption(f"ε per foil type, tuned per draw on half of {val_split}"))
    display(verdicts.verdict_table(v_trans))
else:  # real FOIL has one foil type: nothing to transfer across
    print(f"one foil type ({types[0]}): no threshold transfer across types to test")

# %% [markdown]
# The reviewers' own version of the question uses the paper's two thresholds: FOIL's
# $\varepsilon = -5\times10^{-5}$ against the $-1\times10^{-5}$ the paper needs on Rich-HF, on
# the same attributions. The most-negative word (LA) does not depend on $\varepsilon$, so the
# test is on word F1 and on the threshold-form F-CLIPScore's paired accuracy. The paper's thresholds are set
# for OpenAI's ViT-B/32, whose attributions have their own scale; the table of flagged
# words shows where they fall on the model this run uses.

# %%
v_paper_eps, flagged_share = ccmp.paper_epsilon_verdicts(units, {s: d.attr[main] for s, d in draws.items()}, seed, margins)
display(flagged_share.style.format("{:.3f}"))
display(verdicts.verdict_table(v_paper_eps))

# %% [markdown]
# ## Speed: one backward pass against one text pass per word
#
# Same model, same 32 test pairs, timed after a warm-up call
# (`benchmarks/bench_clip4dm.py` is the stand-alone version). Each method's work is also
# counted in FLOPs (torch's `FlopCounterMode`, forward and backward): the ratio of the two
# is the speed-up the arithmetic predicts. One timed call per method is a reading of this
# machine, not a verdict: caching and thread scheduling can put it above the FLOP count as
# well as below.

# %%
speed = cspeed.speed(clip, df0, main, device)
display(pd.DataFrame(speed.table).rename_axis(f"{speed.n_pairs} pairs, {torch.get_num_threads()} threads").style.format(
    "{:.3g}").set_caption(f"CLIP4DM {speed.measured:.2f}x the pairs/s of leave-one-word-out; FLOPs allow {speed.allowed:.2f}x"))

# %% [markdown]
# ## Try it: type a caption
#
# Each word is coloured by its attribution; words under the ε slider are framed. (In
# the rendered book this shows the figure at the default values; in Jupyter or Colab the
# controls are live.)

# %%
def attribute_one(caption: str):
    res = c4dm.clip4dm(clip, img_t, [caption], main, device=device)
    return res.words[0], res.w[0]


widget = caption_widget(img_raw, df0.caption[first], attribute_one, eps=eps.f1,
                        eps_range=tuple(float(x) for x in np.quantile(np.concatenate(a0.w), [0.01, 0.99])))
widget.show()

# %% [markdown]
# ## Every verdict at a glance
#
# Each row is one comparison this chapter states in words (the `verdicts` of its
# `ch2.json`): the difference A − B and its interval, coloured by the outcome
# ({func}`fgclip.viz.verdicts.forest_plot`). The shaded band is the share margin
# (`margin_share`); rows of rank scores are judged against `margin_rank` and rows of
# minimum attributions against `margin_attr`, as their tables say. A row whose interval lies inside its margin is equivalent; one that crosses zero but
# reaches beyond the margin is one the chapter cannot tell at this size.

# %%
v = {"la": v_la, "floor": v_floor, "slot": v_slot, "paired": v_pair, "ap": v_ap, "colour-word": [v_orig], "controls": [v_pos, *v_pos_type],
     "quartiles": v_quart, "scale": v_scale, "wrong-image": v_wrong, "transfer": v_trans,
     "paper-eps": cfind.informative_paper_eps(v_paper_eps, ccmp.paper_eps_scale(eps))}  # a paper-ε row that cannot fail here is shown, not counted
fig = forest_plot(cfind.all_verdicts(v), margin=margins.share)  # as ch2.json lists them

# %% [markdown]
# ## Critique
#
# The closing box states only what the verdicts above say; the argument, and what the run
# does and does not support, is on the critique page ({doc}`../book/ch2_critique`).

# %% tags=["remove-output"]
run, headline_numbers = cfind.run_summary(units, headline, seeds, model, f"the {main.label} of {n_text} text layers")
findings = cfind.findings(v, f_types, power, run, relation, speed, eps, eps_types, v_paper_eps)
glue_findings("ch2", findings)
display(found_box("What we found", list(findings.values())))

# %% [markdown]
# ```{admonition} What we found
# :class: tip
# This run: {glue:md}`ch2-run`.
#
# **Finding the wrong word.** CLIP4DM's most negative word against a content word drawn at
# random, on the headline foils: {glue:md}`ch2-random`. Against leave-one-word-out, which
# pays one text pass per word, on the same foils: {glue:md}`ch2-loo-head`; on all foils:
# {glue:md}`ch2-loo-all`. The paper's one change to GAE, keeping the negatives, measured
# alone: {glue:md}`ch2-relu`; and against GAE itself: {glue:md}`ch2-gae`. Against the random
# content word on every other foil type: {glue:md}`ch2-per-type`; why a type can sit below
# it: {glue:md}`ch2-relation`. The official word rule against the position rule on all foils:
# {glue:md}`ch2-rule`. On original captions, where
# nothing is wrong, how often the most negative word is a colour word compared with a word
# drawn at random: {glue:md}`ch2-colour-word`. Against the informed floor, a word of the
# foil's own class: {glue:md}`ch2-floor`. Each foil type's foils against the same slot of
# their own originals, where the word is right (a prior for the word class lands on both
# alike): {glue:md}`ch2-slot`.
#
# **Controls.** {glue:md}`ch2-controls` The position control on every foil type's slot:
# {glue:md}`ch2-position-controls`. Power of the central comparisons: {glue:md}`ch2-power`.
#
# **F-CLIPScore.** Each foil against its own original, per foil type, the two forms the
# paper's code uses against CLIPScore: {glue:md}`ch2-paired`. The pooled AP of the paper's
# protocol, which mixes caption templates: the form the paper's code evaluates on FOIL,
# {glue:md}`ch2-ap-min`; the threshold form, {glue:md}`ch2-ap-threshold`; our additive
# reading, {glue:md}`ch2-ap-additive`.
#
# **The weakest claim.** The signal by CLIPScore quartile within each foil type:
# {glue:md}`ch2-quartiles`. On the attributions' own scale (share of words below ε, minimum
# attribution): {glue:md}`ch2-scale`. Original captions on another scene against their own
# image: {glue:md}`ch2-wrong-image`. One ε across foil types, tuned on a type's own validation foils
# against tuned on the others: {glue:md}`ch2-transfer`. The paper's two thresholds on the
# same attributions: {glue:md}`ch2-paper-eps`; {glue:md}`ch2-paper-scale`. Deviations in the
# chosen ε: {glue:md}`ch2-deviations`.
#
# **Speed**, which the paper sells: {glue:md}`ch2-speed`.
# ```

# %%
# ';': the path write_results returns (this machine's folders) stays out of the page
write_results(results_path, cfind.record(
    v, f_types, findings, {"argmin_roles_by_type": roles, "eps_per_type": eps_types, "scale_quartiles": q_table, "flagged_share": flagged_share},
    la_table=la_table, ap_table=ap_table, eps=eps, margins=margins, **headline_numbers, seeds=seeds, model=model,
    pretrained=pretrained, layers=main.label, n_text_layers=n_text, ties=ties, skipped_long=data.skipped,
    speed_pairs_per_s=speed.table, speed_ratio=speed._asdict() | {"table": None}, paper_eps_scale=ccmp.paper_eps_scale(eps),
    power_check=power, selection=selection.to_dict(orient="records"), wall_s=time.perf_counter() - t_start), chapter="ch2");
