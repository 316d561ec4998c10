"""FOR's training loop on cached features, its data helpers, inference paths and the widget."""
import ipywidgets as widgets
import matplotlib
import numpy as np
import pytest
import torch
from open_clip.modified_resnet import AttentionPool2d
from PIL import Image

matplotlib.use("Agg")

from fgclip.methods.sumclip import SumClipHead, pool_memory  # noqa: E402
from fgclip.models import create_clip, images_to_tensor  # noqa: E402
from fgclip.studies.for_retrieval.head import (HeadTrainConfig, embed, encode_frozen, encode_images_cluster,  # noqa: E402
                                               encode_images_sumclip, label_matrix, subsample_labels,
                                               targets_from, train_head)
from fgclip.viz.retrieval import make_retrieval_draw  # noqa: E402
from fgclip.viz.widgets import InteractiveFigure  # noqa: E402


def test_label_matrix_targets_and_unknown_names():
    m = label_matrix([{"a", "c"}, set()], ["a", "b", "c"])
    assert m.tolist() == [[True, False, True], [False, False, False]]
    assert [t.tolist() for t in targets_from(m)] == [[0, 2], []]
    with pytest.raises(ValueError, match="'z'"):
        label_matrix([{"z"}], ["a"])


def test_subsample_labels_is_seeded_and_keeps_the_fraction():
    t = [torch.tensor([i]) for i in range(100)]
    a, b = subsample_labels(t, 0.1, seed=3), subsample_labels(t, 0.1, seed=3)
    assert sum(x is not None for x in a) == 10
    assert [x is None for x in a] == [x is None for x in b]
    assert sum(x is not None for x in subsample_labels(t, 0.001, 0)) == 1  # at least one image
    with pytest.raises(ValueError, match="fraction"):
        subsample_labels(t, 0.0, 0)


def test_train_head_learns_a_separable_toy_task():
    """Two kinds of feature map, each labelled with its own class: the loss must fall."""
    torch.manual_seed(0)
    pool = AttentionPool2d(spacial_dim=2, embed_dim=16, num_heads=2, output_dim=8)
    proto = torch.randn(2, 16, 2, 2) * 3
    kind = torch.arange(64) % 2
    fmap = proto[kind] + 0.1 * torch.randn(64, 16, 2, 2)
    mem = pool_memory(pool, fmap)
    text = torch.nn.functional.normalize(torch.randn(2, 8), dim=-1)
    targets = [torch.tensor([int(k)]) for k in kind]
    head = SumClipHead(pool, n_queries=2, d_model=8, n_heads=2)
    cfg = HeadTrainConfig(epochs=30, batch_size=16, lr=1e-2, w_pl=0.0)
    hist = train_head(head, mem, targets, [None] * 64, text, text, 10.0, cfg)
    assert hist[-1]["sup"] < 0.5 * hist[0]["sup"]
    emb, attn = embed(head, mem)
    pred = (emb @ text.T).amax(1).argmax(1)  # best class over the queries
    assert (pred == kind).float().mean() > 0.9
    with pytest.raises(ValueError, match="w_sup and w_pl"):
        train_head(head, mem, targets, targets, text, text, 1.0, HeadTrainConfig(w_sup=0, w_pl=0))


def test_inference_paths_agree_with_the_cached_path():
    torch.manual_seed(0)
    clip = create_clip("toy-rn", pretrained=None)
    images = np.random.default_rng(0).integers(0, 255, (3, 64, 64, 3), dtype=np.uint8)
    head = SumClipHead(clip.model.visual.attnpool, n_queries=4).eval()
    torch.nn.init.normal_(head.up.weight, std=0.05)
    feats = encode_frozen(clip, images)
    cached, _ = embed(head, feats.memory)
    torch.testing.assert_close(encode_images_sumclip(clip, head, images), cached, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        ref = clip.model.encode_image(images_to_tensor(torch.from_numpy(images), clip))
    torch.testing.assert_close(feats.pooled, ref)
    assert encode_images_cluster(clip, images, k=3).shape == (3, 4, 128)


def test_retrieval_widget_redraws_for_a_new_name():
    rng = np.random.default_rng(0)
    emb = torch.nn.functional.normalize(torch.randn(6, 2, 4), dim=-1)
    attn = torch.softmax(torch.randn(6, 2, 5), -1)
    images = rng.integers(0, 255, (6, 16, 16, 3), dtype=np.uint8)
    names = {"x": emb[2, 1], "y": emb[4, 0]}
    draw = make_retrieval_draw(lambda n: names[n], emb, attn, images, (2, 2),
                               labels=[{"x"} if i == 2 else set() for i in range(6)])
    w = InteractiveFigure(draw, {"name": widgets.Text(value="x"), "k": widgets.IntSlider(value=3, min=2, max=5)})
    first = w.redraw()
    assert "hit" in first.axes[0].get_title()  # image 2 is the best match for "x"
    w.controls["name"].value = "y"
    assert w.figure is not first and "miss" in w.figure.axes[0].get_title()
    with pytest.raises(ValueError, match="positions"):
        make_retrieval_draw(lambda n: names[n], emb, attn, images, (3, 3))
