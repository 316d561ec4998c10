"""Chapter 5's trained methods at tiny sizes (24 training images, 8 of them validation; 10 test
images; 2 epochs or periods; 2 seeds): each chapter's method trained by its own code on the shared
split, selected on the validation images, its per-seed modules plugged into the adapters."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fgclip.evaluation import encode_texts
from fgclip.methods.clip4dm import pooling_relevance
from fgclip.models import create_clip
from fgclip.studies.crosspaper import adapters as ad
from fgclip.studies.crosspaper import extension as xext
from fgclip.studies.crosspaper import train as tr
from fgclip.studies.crosspaper.data import encode_shared, name_embeddings, read_shared, shared_root
from fgclip.studies.crosspaper.tasks import find_wrong_word, point_at_names, presence, retrieval
from fgclip.studies.for_retrieval.head import embed
from fgclip.studies.maximage.data import word_features
from fgclip.toyworld import ToyWorldConfig
from fgclip.train.selection import SelectionGrid, select_lr_epochs

SIZES, N_VAL, SEEDS, EPOCHS = {"train": 24, "test": 10}, 8, (0, 1), 2


@pytest.fixture(scope="module")
def clip():
    return create_clip("toy-rn", "toy")


@pytest.fixture(scope="module")
def world(tmp_path_factory, clip):
    root = shared_root(tmp_path_factory.mktemp("ch5train"), ToyWorldConfig(), 0, SIZES)
    test = read_shared(root, "test")
    stage = tr.make_stage(clip, root, SIZES["train"], N_VAL, root / "cache")
    return root, stage, test, encode_shared(clip, test, root / "cache")


def train(method: str, world, seeds=SEEDS):
    root, stage, test, test_feats = world
    if method == "maximage":
        return tr.train_maximage(stage, root, SIZES["test"], seeds, epochs=EPOCHS)
    if method == "decoupling":
        return tr.train_decoupling(stage, seeds, epochs=EPOCHS)
    if method == "sumclip":
        return tr.train_sumclip(stage, seeds, epochs=EPOCHS, k_candidates=(1, 2))
    return tr.clip4dm_outputs(stage, test, test_feats, seeds)


@pytest.fixture(scope="module")
def runs(world):
    out = {m: train(m, world) for m in ("decoupling", "sumclip", "maximage")}
    clip = world[1].clip  # frozen in place (as chapter 4's prompt learner leaves it): CLIP4DM must still run
    for p in clip.model.parameters():
        p.requires_grad_(False)
    out["clip4dm"] = train("clip4dm", world)
    assert not any(p.requires_grad for p in clip.model.parameters())  # and leaves the flags as they were
    return out


def trainable(module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in module.named_parameters() if p.requires_grad}


@torch.no_grad()
def task_values(run, clip, test, feats) -> dict[str, float]:
    """Every task the method can be asked, read through the adapters, for the run's first seed."""
    m, cats, names = run.modules[0], list(test.categories), name_embeddings(clip, list(test.categories))
    present = [list(b) for b in test.boxes]  # the names queried in each image: those with a box
    assert all(present)  # every toy scene has an object
    foils = test.foils  # decoupling has no score for a caption naming no category ("three shapes on ...")
    foils = [f for f in foils if any(f.categories)] if run.method == "decoupling" else foils
    if run.method == "maximage":
        img, words = run.context.test.img, tr.name_words(clip, cats)
        maps = [ad.maximage_name_maps(m, img[i], {n: words[n] for n in ns}) for i, ns in enumerate(present)]
        bank = word_features(clip, [f.foil.split() for f in foils], "contextual", ragged=True)
        word = [ad.maximage_word_scores(m, img[f.image], bank.caption(k), f.words) for k, f in enumerate(foils)]
        scores = ad.maximage_name_scores(m, img, words)
    elif run.method == "decoupling":
        out = m(feats.dense, feats.pooled)
        maps = [ad.decoupling_name_maps(out, i, cats, ns) for i, ns in enumerate(present)]
        word = [ad.decoupling_word_scores(out, f.image, cats, f.words,
                                          {w: c for w, c in zip(f.words, f.categories) if c}) for f in foils]
        scores = ad.decoupling_presence_scores(out, cats, m.scoring)
    elif run.method == "sumclip":
        emb, attn = embed(m, feats.memory(clip))
        maps = [ad.sumclip_name_maps(emb[i], attn[i], names[[cats.index(n) for n in ns]], ns, feats.grid)
                for i, ns in enumerate(present)]
        vocab = sorted({w for f in foils for w in f.words})
        text = dict(zip(vocab, encode_texts(clip, vocab)))  # each word's text embedding alone
        word = [ad.sumclip_word_scores(emb[f.image], torch.stack([text[w] for w in f.words]), f.words) for f in foils]
        scores = ad.sumclip_name_scores(emb, names, cats)
    else:  # CLIP4DM: pointing by the pooling's relevance (the extension); no retrieval at all
        assert m.relevance.shape == (len(test), len(cats), 1 + feats.grid[0] * feats.grid[1])
        maps = [ad.clip4dm_name_maps({n: m.relevance[i, m.names.index(n)] for n in ns}, feats.grid)
                for i, ns in enumerate(present)]
        word = ad.clip4dm_word_scores(m.attributions, m.captions)
        scores = ad.clip4dm_name_scores(m.image_emb, m.name_text, m.names)
    out = {"misalignment": find_wrong_word(word, [f.word_index for f in foils]).accuracy,
           "presence": presence(scores, test.labels).mean}
    out["pointing"] = point_at_names(maps, test.boxes, test.hws).accuracy
    if (run.method, "retrieval") not in ad.NOT_APPLICABLE:
        out["retrieval"] = retrieval(scores, test.labels.astype(bool)).mean
    return out


@pytest.mark.parametrize("method", ad.METHODS)
def test_modules_plug_into_the_adapters(runs, world, clip, method):
    _, _, test, feats = world
    run = runs[method]
    assert run.method == method and run.seeds == SEEDS and len(run.modules) == len(SEEDS) and run.seconds > 0
    values = task_values(run, clip, test, feats)
    expected = {"pointing", "misalignment", "presence"} | ({"retrieval"} if method != "clip4dm" else set())
    assert set(values) == expected
    assert all(0.0 <= v <= 1.0 for v in values.values()), values


@pytest.mark.parametrize("method", ["maximage", "decoupling", "sumclip"])
def test_selection_record_names_the_choice_and_every_curve(runs, world, method):
    rec, stage = runs[method].record, world[1]
    assert rec.method == method and rec.lr in rec.lrs and 1 <= rec.epochs <= rec.budget == EPOCHS
    assert len(rec.lrs) >= 3 and rec.seeds == SEEDS[:2] and str(stage.n_val) in rec.split
    assert set(rec.curves) == {(lr, s) for lr in rec.lrs for s in rec.seeds}
    assert all(len(c) == EPOCHS and np.isfinite(c).all() for c in rec.curves.values())
    grid = SelectionGrid(rec.lrs, rec.seeds, rec.budget, higher_is_better=method != "maximage")  # ch1: a loss
    again = select_lr_epochs(rec.arm, lambda lr, s, e: rec.curves[lr, s][:e], grid)  # the routine, on the record
    assert (again.lr, again.epochs) == (rec.lr, rec.epochs)
    assert tuple(stage.val_idx) == tuple(range(16, 24))


def test_clip4dm_layer_choice_is_recorded(runs):
    rec = runs["clip4dm"].record
    assert rec.extra["layers"].startswith("last ") and rec.extra["layers"] in rec.extra["LA by layers"]
    assert all(0 <= v <= 1 for v in rec.extra["LA by layers"].values())


def test_clip4dm_image_rule_is_the_better_one_on_validation_and_the_test_relevance_uses_it(runs, world):
    """Both rules' validation pointing recorded; the higher one chosen (a tie keeps CLIP4DM's own);
    the test images' relevance is pooling_relevance under that rule, names in the categories' order."""
    rec, (_, stage, test, feats) = runs["clip4dm"].record, world
    acc = rec.extra["validation pointing by image-side rule"]
    assert set(acc) == set(xext.IMAGE_RULES.values()) and all(0 <= v <= 1 for v in acc.values())
    relu = acc[xext.IMAGE_RULES[True]] > acc[xext.IMAGE_RULES[False]]
    assert rec.extra["image-side rule"] == xext.IMAGE_RULES[relu]
    assert xext.choose_image_rule(stage.clip.model.visual.attnpool, stage, runs["clip4dm"].modules[0].name_text) == \
        (relu, acc)
    want = pooling_relevance(stage.clip.model.visual.attnpool, feats.feature_map, runs["clip4dm"].modules[0].name_text,
                             relu)
    torch.testing.assert_close(runs["clip4dm"].modules[0].relevance, want)


def test_a_tie_on_validation_keeps_clip4dms_own_rule(runs, world, monkeypatch):
    """Equal validation pointing for both rules: CLIP4DM's own (no ReLU) stays."""
    stage = world[1]
    monkeypatch.setattr(xext, "point_at_names", lambda *args, **kw: SimpleNamespace(accuracy=0.5))
    relu, acc = xext.choose_image_rule(stage.clip.model.visual.attnpool, stage, runs["clip4dm"].modules[0].name_text)
    assert relu is False and acc == {rule: 0.5 for rule in xext.IMAGE_RULES.values()}


@pytest.mark.parametrize("method", ["maximage", "decoupling", "sumclip"])
def test_same_seed_same_parameters(runs, world, method):
    first = runs[method].modules
    again = train(method, world, seeds=SEEDS).modules
    for a, b in zip(first, again):
        pa, pb = trainable(a), trainable(b)
        assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)
    p0, p1 = trainable(first[0]), trainable(first[1])
    assert any(not torch.equal(p0[k], p1[k]) for k in p0)  # another seed, another head


def test_bad_parameters_name_themselves(world):
    root, stage, test, feats = world
    for kwargs, name in (({"seeds": (0,)}, "seeds"), ({"seeds": (0, 0)}, "seeds"), ({"epochs": 0}, "epochs"),
                         ({"lrs": (1e-3,)}, "lrs"), ({"lrs": (1e-3, 2e-3, 1e-1)}, "lrs")):
        for fn in (tr.train_decoupling, tr.train_sumclip):
            with pytest.raises(ValueError, match=f"'{name}'"):
                fn(stage, **kwargs)
        with pytest.raises(ValueError, match=f"'{name}'"):
            tr.train_maximage(stage, root, SIZES["test"], **kwargs)
    for rho in (0.0, 1.5, True):
        with pytest.raises(ValueError, match="'rho'"):
            tr.train_decoupling(stage, rho=rho)
    with pytest.raises(ValueError, match="'novel'.*dragon"):
        tr.train_sumclip(stage, novel=["dragon"])
    with pytest.raises(ValueError, match="'census_seeds'"):
        tr.train_maximage(stage, root, SIZES["test"], bias_init="select")
    with pytest.raises(ValueError, match="'bias_init'"):
        tr.train_maximage(stage, root, SIZES["test"], bias_init="ones")
    with pytest.raises(ValueError, match="'n_val'"):
        tr.Stage(stage.clip, stage.train, stage.feats, 1)
    with pytest.raises(ValueError, match="'seeds'"):
        tr.clip4dm_outputs(stage, test, feats, seeds=(3,))
    with pytest.raises(ValueError, match="'prompt'"):
        tr.name_words(stage.clip, ["circle"], prompt="a circle")


def test_the_chapters_settings_copied_here_are_their_notebooks_defaults():
    """train.py repeats each chapter's grid, budget and head settings (the library cannot read a
    notebook's parameters cell at run time); this holds the copies to the notebooks."""
    import inspect

    from fgclip.runner import chapter_defaults, chapter_notebook
    from fgclip.studies.crosspaper import train as tr

    ch1, ch3, ch4 = (chapter_defaults(chapter_notebook(c)) for c in ("ch1", "ch3", "ch4"))
    for (lrs, epochs), d in ((tr.CH1_GRID, ch1), (tr.CH3_GRID, ch3), (tr.CH4_GRID, ch4)):
        assert (list(lrs), epochs) == (d["lrs"], d["epochs"])
    assert tr.CH1_HEADS == {"batch_size": ch1["batch_size"], "embed_dim": ch1["embed_dim"],
                            "temperature": ch1["temperature"], "margin": ch1["triplet_margin"],
                            "score": ch1["score"], "mask_same_text": ch1["mask_same_text"]}
    assert tr.CH4_FIT == {"gamma_pos": ch4["gamma_pos"], "gamma_neg": ch4["gamma_neg"], "clip": ch4["asl_clip"],
                          "scalar_lr": ch4["scalar_lr"]}
    dec, sumclip = inspect.signature(tr.train_decoupling).parameters, inspect.signature(tr.train_sumclip).parameters
    assert (dec["rank"].default, dec["hand_prompt"].default, dec["batch_size"].default) == \
        (ch4["rank"], ch4["hand_prompt"], ch4["batch_size"])
    assert (sumclip["n_queries"].default, sumclip["d_model"].default, sumclip["batch_size"].default,
            list(sumclip["k_candidates"].default), sumclip["fixed_threshold"].default, sumclip["prompt"].default) == \
        (ch3["n_queries"], ch3["d_model"], ch3["batch_size"], ch3["k_candidates"], ch3["fixed_threshold"], ch3["prompt"])
