"""Chapter 0's study: how much of each chapter's task the stage can show.

For the four tasks the later chapters run on the toy world, three readers of the same
held-out scenes are compared:

* an **oracle**, a small CNN trained on the world's ground truth (which category and which
  colour, or none, each cell of an 8 x 8 grid holds: one softmax per cell), from pixels at
  the world's own size: if it cannot get near 1, the world itself is ambiguous there;
* a **linear probe** on the frozen toy CLIP: logistic regression (eq-probe, trained to
  convergence by L-BFGS) on the global embedding (shape, multi-label, retrieval) or on every
  dense feature (pointing), with the same targets; and, for ``toy-rn``, a **pooled linear
  probe** (eq-pooled-probe): a linear map of every dense feature whose cell logits are pooled
  by log-sum-exp into image scores, fitted on the image labels only (multiple-instance
  learning: an image holds a category when some cell does);
* **zero-shot**: the toy CLIP's own similarities to ``"a {name}"`` or to the phrase.

The oracle chooses lr and epochs by :func:`fgclip.train.selection.select_lr_epochs`, each
probe its L2 weight by :func:`fgclip.train.probe.fit_probe`, both on the validation split;
every reader is scored once on the test split.

The tasks (scores s_{n,c} for image n and category c, from any reader):
shape accuracy on one-object scenes (argmax_c s_{n,c}); multi-label mAP (chapter 4);
retrieval AP@50 by name, normalised by min(50, R) (chapter 3); and phrase pointing
(chapter 1), the argmax cell of s_cat + s_colour for the phrase's words, a hit inside the
phrase's boxes, phrases under 5% of the image (hull) skipped as in chapter 1.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from ..metrics.multilabel import mean_average_precision
from ..metrics.object_retrieval import average_precision_at_k
from ..metrics.pointing import argmax_point, phrase_pointing
from ..toyworld import COLORS, Scene, ToyWorldConfig, generate
from ..train.loop import HeadTraining, seeded_batches, train_loop
from ..train.probe import fit_pooled_probe, fit_probe
from ..train.selection import Selection, SelectionGrid, select_lr_epochs

TASKS = ("shape accuracy, one object (ch0)", "multi-label mAP (ch4)", "retrieval AP@50 by name (ch3)",
         "phrase pointing (ch1)")
# pointing with the category alone (no colour word): most phrases name a colour that singles out
# their object, so this column shows how much of "phrase pointing" is shape, not colour
POINTING_BY_NAME = "pointing by category name only"


@dataclass
class StageScenes:
    fit: list[Scene]  # trained on
    val: list[Scene]  # lr and epochs chosen on
    test: list[Scene]  # multi-object held-out scenes (chapter 0's test split)
    single: list[Scene]  # one-object held-out scenes


def stage_scenes(world: ToyWorldConfig, n_fit: int, n_val: int, n_test: int, seed: int) -> StageScenes:
    """The test scenes are those of ``retrieval_metrics(n=n_test, seed=seed, split="test")``."""
    return StageScenes(generate(world, n_fit, seed=seed, split="train"), generate(world, n_val, seed=seed, split="val"),
                       generate(world, n_test, seed=seed, split="test"),
                       generate(replace(world, min_objects=1, max_objects=1), n_test, seed=seed + 1, split="test"))


def box_cells(box: tuple[float, float, float, float], centres: torch.Tensor) -> torch.Tensor:
    """(g, g) bool: the cells whose centres (pixels, (g,) per axis) lie inside the box (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = box
    return (centres[:, None] >= y0) & (centres[:, None] < y1) & (centres[None] >= x0) & (centres[None] < x1)


def cell_targets(scenes: list[Scene], categories: tuple[str, ...], grid: int) -> torch.Tensor:
    """(N, C + K, g, g) in {0, 1}: cell (i, j) is 1 for category c (colour k) when its centre
    lies inside the box of an object of that category (colour); K = the world's colours."""
    colors = tuple(COLORS)
    size = scenes[0].image.shape[0]
    centres = (torch.arange(grid) + 0.5) * size / grid  # (g,) cell centres in pixels
    out = torch.zeros(len(scenes), len(categories) + len(colors), grid, grid)
    for n, scene in enumerate(scenes):
        for o in scene.objects:
            inside = box_cells(o.box, centres)
            out[n, categories.index(o.category)] += inside
            out[n, len(categories) + colors.index(o.color)] += inside
    return out.clamp_(max=1.0)


class OracleNet(nn.Module):
    """Pixels (N, 3, S, S) -> logits (N, n_out, S/8, S/8): six 3 x 3 conv layers (three of
    stride 2, receptive field 55 px, above the largest object) and a 1 x 1 classifier."""

    def __init__(self, n_out: int, width: int = 32) -> None:
        super().__init__()
        def block(i: int, o: int, stride: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1), nn.BatchNorm2d(o), nn.ReLU())
        self.body = nn.Sequential(block(3, width // 2, 2), block(width // 2, width, 2), block(width, width, 1),
                                  block(width, 2 * width, 2), block(2 * width, 2 * width, 1), block(2 * width, 2 * width, 1))
        self.head = nn.Conv2d(2 * width, n_out, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def new_oracle(n_categories: int) -> OracleNet:
    """An untrained :class:`OracleNet` for C categories: C + 1 category and K + 1 colour classes per cell."""
    return OracleNet(n_categories + 1 + len(COLORS) + 1)


def cell_classes(scenes: list[Scene], categories: tuple[str, ...], grid: int) -> torch.Tensor:
    """(N, 2, g, g) long: each cell's category in 0..C (C: no object) and colour in 0..K (K: none),
    from the object painted last over the cell's centre (later objects occlude earlier ones)."""
    colors = tuple(COLORS)
    size = scenes[0].image.shape[0]
    centres = (torch.arange(grid) + 0.5) * size / grid  # (g,) cell centres in pixels
    out = torch.empty(len(scenes), 2, grid, grid, dtype=torch.long)
    out[:, 0], out[:, 1] = len(categories), len(colors)
    for n, scene in enumerate(scenes):
        for o in scene.objects:  # in painting order: a later object overwrites
            inside = box_cells(o.box, centres)
            out[n, 0][inside] = categories.index(o.category)
            out[n, 1][inside] = colors.index(o.color)
    return out


def oracle_loss(logits: torch.Tensor, classes: torch.Tensor, n_categories: int) -> torch.Tensor:
    """Per-cell softmax cross-entropy over C + 1 categories plus over K + 1 colours; logits
    (N, C + 1 + K + 1, g, g), classes (N, 2, g, g) from :func:`cell_classes`. One softmax per
    cell, not C + K sigmoids: with under 1% of (cell, category) pairs positive, the sigmoids
    learned the shapes several times slower."""
    return (nn.functional.cross_entropy(logits[:, :n_categories + 1], classes[:, 0])
            + nn.functional.cross_entropy(logits[:, n_categories + 1:], classes[:, 1]))


def oracle_log_probs(logits: torch.Tensor, n_categories: int) -> torch.Tensor:
    """(N, C + 1 + K + 1, g, g) -> (N, C + K, g, g): each cell's log-probability of every
    category and colour (the 'none' classes dropped), the scores the tasks read."""
    cat = logits[:, :n_categories + 1].log_softmax(1)[:, :n_categories]
    col = logits[:, n_categories + 1:].log_softmax(1)[:, :-1]
    return torch.cat([cat, col], 1)


def pixels(scenes: list[Scene]) -> torch.Tensor:
    """uint8 scenes -> (N, 3, S, S) float in [0, 1]."""
    return torch.from_numpy(np.stack([s.image for s in scenes])).permute(0, 3, 1, 2).float() / 255.0


ORACLE_ARM = "oracle (CNN on pixels)"
ORACLE_LRS = (2e-3, 4e-3, 8e-3)  # the oracle's lr grid, centred on a pilot run's best (4e-3 of 1e-3 to 4e-3)


def fit_dense(make: callable, loss_of: callable, x_fit: torch.Tensor, y_fit: torch.Tensor, x_val: torch.Tensor,
              y_val: torch.Tensor, arm: str, grid: SelectionGrid, batch_size: int = 32) -> tuple[nn.Module, Selection]:
    """Train ``make()`` with ``loss_of(model(x), y)``; lr and epochs by validation loss
    (eq-selection-stop). The reader returned is the first seed's run at the chosen (lr, epoch),
    kept, not retrained."""
    snapshots: dict[tuple[float, int], dict] = {}

    def run(lr: float, seed: int, epochs: int) -> list[float]:
        torch.manual_seed(seed)
        model = make()
        gen = torch.Generator().manual_seed(seed)
        curve: list[float] = []

        def after(_row: dict) -> bool:
            model.eval()
            with torch.no_grad():
                total = sum(float(loss_of(model(x_val[i:i + 500]), y_val[i:i + 500])) * len(y_val[i:i + 500])
                            for i in range(0, len(x_val), 500))
            curve.append(total / len(x_val))
            if seed == grid.seeds[0]:
                snapshots[lr, len(curve)] = {k: v.clone() for k, v in model.state_dict().items()}
            return False
        cfg = HeadTraining(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
        train_loop(model.parameters(), lambda: seeded_batches(len(x_fit), batch_size, gen),
                   lambda b: {"loss": loss_of(model(x_fit[b]), y_fit[b])}, cfg, modules=[model],
                   desc=arm, after_epoch=after)
        return curve

    chosen = select_lr_epochs(arm, run, replace(grid, higher_is_better=False))
    model = make()
    model.load_state_dict(snapshots[chosen.lr, chosen.epochs])
    return model.eval(), chosen


def global_scores(logits: torch.Tensor, n_categories: int) -> torch.Tensor:
    """(N, C + K, g, g) cell logits or (N, C) -> (N, C) image scores: the best cell per category."""
    return logits[:, :n_categories].amax(dim=(-2, -1)) if logits.ndim == 4 else logits[:, :n_categories]


def phrase_trials(scenes: list[Scene]) -> list[tuple[int, str, str | None, str, list]]:
    """Every noun phrase of every caption: (scene index, category, colour word or None, text, boxes)."""
    trials = []
    for n, scene in enumerate(scenes):
        for caption in scene.captions:
            for ph in caption.phrases:
                colour = next((w for w in ph.text.split() if w in COLORS), None)
                trials.append((n, ph.category, colour, ph.text, [scene.objects[k].box for k in ph.object_ids]))
    return trials


def pointing_accuracy(maps: torch.Tensor, trials: list, image_size: int) -> float:
    """maps (T, g, g), one per trial -> chapter 1's per-phrase pointing accuracy."""
    points = [argmax_point(m, (image_size, image_size)) for m in maps]
    hw = [(image_size, image_size)] * len(trials)
    return phrase_pointing(points, [t[4] for t in trials], hw, min_box_area=0.05, area_rule="hull").accuracy


def cell_maps(logits: torch.Tensor, trials: list, categories: tuple[str, ...], colour: bool = True) -> torch.Tensor:
    """(N, C + K, g, g) cell logits -> (T, g, g): category logit plus the colour's, if named
    (and ``colour``)."""
    colors = tuple(COLORS)
    maps = [logits[n, categories.index(c)] + (logits[n, len(categories) + colors.index(k)] if k and colour else 0.0)
            for n, c, k, _, _ in trials]
    return torch.stack(maps)


def image_labels(scenes: list[Scene], categories: tuple[str, ...]) -> torch.Tensor:
    """(N, C) in {0, 1}: is category c in scene n (from the scene's labels, not the grid)."""
    return torch.tensor([[float(c in s.labels) for c in categories] for s in scenes])


def task_scores(image_scores_test: torch.Tensor, image_scores_single: torch.Tensor, maps: torch.Tensor | None,
                scenes: StageScenes, categories: tuple[str, ...], trials: list,
                name_maps: torch.Tensor | None = None) -> dict[str, float]:
    """The four tasks of one reader, from its (N, C) scores on the test and one-object scenes
    and its phrase maps (None: the reader has no map); with ``name_maps`` (T, g, g), maps from
    the category alone, also :data:`POINTING_BY_NAME`."""
    targets = image_labels(scenes.test, categories).long()  # (N, C)
    has = targets.sum(0) > 0
    truth = torch.tensor([categories.index(s.objects[0].category) for s in scenes.single])
    ap50 = average_precision_at_k(image_scores_test.T[has], targets.T[has].bool(), 50, "min_k_r")
    size = scenes.test[0].image.shape[0]
    return {TASKS[0]: float((image_scores_single.argmax(1) == truth).float().mean()),
            TASKS[1]: mean_average_precision(image_scores_test[:, has], targets[:, has]),
            TASKS[2]: float(ap50.mean()),
            TASKS[3]: pointing_accuracy(maps, trials, size) if maps is not None else float("nan"),
            **({POINTING_BY_NAME: pointing_accuracy(name_maps, trials, size)} if name_maps is not None else {})}


def chance_row(scenes: StageScenes, categories: tuple[str, ...], trials: list, seed: int) -> dict:
    """The floor of every task: seeded uniform random scores (N, C) and phrase maps (T, g, g)
    read by the same metrics as every other reader."""
    gen, g = torch.Generator().manual_seed(seed), scenes.test[0].image.shape[0] // 8
    maps = torch.rand(len(trials), g, g, generator=gen)
    return {"reader": "chance", "model": "random scores",
            **task_scores(torch.rand(len(scenes.test), len(categories), generator=gen),
                          torch.rand(len(scenes.single), len(categories), generator=gen), maps, scenes, categories,
                          trials, maps)}


def clip_features(clip, scenes: list[Scene]) -> tuple[torch.Tensor, torch.Tensor]:
    """Frozen toy-CLIP features in fp32: L2-normalised global (N, D) and dense (N, D, g, g)."""
    from ..models import encode_image_dense, encode_image_rows

    def per_batch(x: torch.Tensor) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            f = encode_image_dense(clip.model, x)
            return {"global": nn.functional.normalize(f.pooled.float(), dim=-1),
                    "dense": nn.functional.normalize(f.dense.float(), dim=1)}
    rows = encode_image_rows(clip, np.stack([s.image for s in scenes]), per_batch)
    return rows["global"], rows["dense"]


def text_features(clip, texts: list[str]) -> torch.Tensor:
    from ..evaluation import encode_texts
    return encode_texts(clip, texts, precision="fp32").cpu()


# eq-probe's lambda grids: the global probe has 2,000 rows, the dense one a row per cell (16-64 x more)
GLOBAL_L2S = (1e-4, 1e-3, 1e-2, 1e-1)
DENSE_L2S = (1e-6, 1e-5, 1e-4, 1e-3)
POOLED_L2S = (1e-4, 1e-3, 1e-2)
# The pooled probe is fitted for toy-rn, whose image labels chapters 3-5 read; toy-vit's 8 x 8
# grid makes it four times the rows (measured 2026-12-07 on the 2-core AMD EPYC, two threads,
# this grid: 167 s for toy-vit against 42 s for toy-rn).
POOLED_MODELS = ("toy-rn",)
POOLED_READER = "pooled linear probe"


def fit_oracle(scenes: StageScenes, categories: tuple[str, ...], grid: SelectionGrid,
               batch_size: int = 32) -> tuple[OracleNet, Selection]:
    """The oracle: :class:`OracleNet` on the fit scenes' cell classes, lr and epochs chosen
    on the validation scenes' loss (eq-selection-stop)."""
    n_c, size = len(categories), scenes.fit[0].image.shape[0]
    x = {k: pixels(getattr(scenes, k)) for k in ("fit", "val")}
    y = {k: cell_classes(getattr(scenes, k), categories, size // 8) for k in ("fit", "val")}
    return fit_dense(lambda: new_oracle(n_c), lambda out, t: oracle_loss(out, t, n_c),
                     x["fit"], y["fit"], x["val"], y["val"], ORACLE_ARM, grid, batch_size)


def oracle_row(oracle: OracleNet, scenes: StageScenes, categories: tuple[str, ...], trials: list) -> dict:
    """The oracle's task scores on the test and one-object scenes."""
    n_c = len(categories)
    with torch.no_grad():
        logits = {k: oracle_log_probs(torch.cat([oracle(x[i:i + 500]) for i in range(0, len(x), 500)]), n_c)
                  for k, x in (("test", pixels(scenes.test)), ("single", pixels(scenes.single)))}
    return {"reader": "oracle", "model": "CNN on pixels",
            **task_scores(global_scores(logits["test"], n_c), global_scores(logits["single"], n_c),
                          cell_maps(logits["test"], trials, categories), scenes, categories, trials,
                          cell_maps(logits["test"], trials, categories, colour=False))}


def stage_features(clip, scenes: StageScenes) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """:func:`clip_features` of every part of ``scenes``: {fit, val, test, single} -> (global, dense)."""
    return {k: clip_features(clip, getattr(scenes, k)) for k in ("fit", "val", "test", "single")}


def ceiling(clips: dict, scenes: StageScenes, categories: tuple[str, ...], oracle: tuple[OracleNet, Selection],
            seed: int = 0, global_l2s: tuple[float, ...] = GLOBAL_L2S, dense_l2s: tuple[float, ...] = DENSE_L2S,
            features: dict[str, dict] | None = None, pooled_models: tuple[str, ...] = POOLED_MODELS,
            pooled_l2s: tuple[float, ...] = POOLED_L2S) -> tuple[list[dict], list, dict]:
    """Rows {reader, model, task scores...} for the trained ``oracle`` (model and its
    selection record, from :func:`fit_oracle` or :func:`load_oracle`), chance (from ``seed``)
    and, per toy CLIP, its linear probes (eq-probe, lambda from the grids) and zero-shot; and
    every trained reader's selection record (:class:`Selection` or :class:`ProbeFit`); for the
    models in ``pooled_models``, also :func:`pooled_probe_row`; and per (probe reader, model) the
    interval of its multi-label mAP gain over zero-shot (:func:`fgclip.evaluation.map_gain_interval`).
    ``features``: per model, its :func:`stage_features` of these scenes, if already computed."""
    from ..evaluation import map_gain_interval

    trials = phrase_trials(scenes.test)
    rows = [oracle_row(oracle[0], scenes, categories, trials), chance_row(scenes, categories, trials, seed=seed)]
    selections, gains = [oracle[1]], {}
    image_y = {k: image_labels(getattr(scenes, k), categories) for k in ("fit", "val", "test")}  # (N, C) each
    has = image_y["test"].bool().any(0)  # the categories task_scores' mAP averages over
    for name, clip in clips.items():
        feats = features[name] if features is not None else stage_features(clip, scenes)
        g = feats["fit"][1].shape[-1]
        yg = {k: cell_targets(getattr(scenes, k), categories, g) for k in ("fit", "val")}
        probe, fit_g = fit_probe(feats["fit"][0], image_y["fit"], feats["val"][0], image_y["val"],
                                 f"linear probe, global ({name})", global_l2s)
        dense, fit_d = fit_probe(feats["fit"][1], yg["fit"], feats["val"][1], yg["val"],
                                 f"linear probe, dense ({name})", dense_l2s)
        selections += [fit_g, fit_d]
        with torch.no_grad():
            dense_logits = dense(feats["test"][1])  # (N, C + K, g, g)
            image_scores = {"linear probe": probe(feats["test"][0])}  # (N, C) per image-label reader
            rows.append({"reader": "linear probe", "model": name,
                         **task_scores(image_scores["linear probe"], probe(feats["single"][0]),
                                       cell_maps(dense_logits, trials, categories), scenes, categories, trials,
                                       cell_maps(dense_logits, trials, categories, colour=False))})
        if name in pooled_models:
            row, fit_p, image_scores[POOLED_READER] = pooled_probe_row(name, feats, image_y, scenes, categories,
                                                                       trials, pooled_l2s)
            rows.append(row)
            selections.append(fit_p)
        names = text_features(clip, [f"a {c}" for c in categories])  # (C, D)
        rows.append(zero_shot_row(name, clip, names, feats, scenes, categories, trials))
        zero = feats["test"][0] @ names.T  # (N, C) zero-shot's image scores, as its row reads them
        gains |= {(reader, name): map_gain_interval(x[:, has], zero[:, has], image_y["test"][:, has], seed=seed)
                  for reader, x in image_scores.items()}
    return rows, selections, gains


def zero_shot_row(name: str, clip, names: torch.Tensor, feats: dict, scenes: StageScenes,
                  categories: tuple[str, ...], trials: list) -> dict:
    """The toy CLIP's own reading: cosine to "a {name}" (``names``, (C, D)) for the image tasks,
    to the phrase (or the category's name) over the dense features for pointing."""
    phrases = text_features(clip, [t[3] for t in trials])  # (T, D)
    dense_of_trial = feats["test"][1][[t[0] for t in trials]]  # (T, D, g, g)
    zs_maps = torch.einsum("td,tdij->tij", phrases, dense_of_trial)
    zs_name_maps = torch.einsum("td,tdij->tij", names[[categories.index(t[1]) for t in trials]], dense_of_trial)
    return {"reader": "zero-shot", "model": name,
            **task_scores(feats["test"][0] @ names.T, feats["single"][0] @ names.T, zs_maps, scenes,
                          categories, trials, zs_name_maps)}


def pooled_probe_row(name: str, feats: dict, image_y: dict[str, torch.Tensor], scenes: StageScenes,
                     categories: tuple[str, ...], trials: list,
                     l2s: tuple[float, ...]) -> tuple[dict, object, torch.Tensor]:
    """The pooled linear probe (eq-pooled-probe) of one toy CLIP, fitted on the fit scenes'
    image labels with lambda chosen on the validation scenes, and its task scores: image
    scores for shape, multi-label and retrieval, its category's cell logits for pointing by
    name; no phrase pointing (it is never told a colour). Also returns its fit and its (N, C)
    scores of the test scenes."""
    probe, fit = fit_pooled_probe(feats["fit"][1], image_y["fit"], feats["val"][1], image_y["val"],
                                  f"{POOLED_READER} ({name})", l2s)
    with torch.no_grad():
        cells = probe.cell_logits(feats["test"][1])  # (N, C, g, g)
        name_maps = torch.stack([cells[n, categories.index(c)] for n, c, *_ in trials])  # (T, g, g)
        test = probe(feats["test"][1])  # (N, C)
        scores = task_scores(test, probe(feats["single"][1]), None, scenes, categories, trials, name_maps)
    return {"reader": POOLED_READER, "model": name, **scores}, fit, test
