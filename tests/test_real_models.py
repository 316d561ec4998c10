"""Real open_clip architectures, offline: the activation OpenAI's weights need, the model's
own preprocessing, random weights on request, and short errors for unknown names."""
from pathlib import Path

import matplotlib.cbook
import open_clip
import pytest
import torch
import yaml
from PIL import Image

from fgclip.models import create_clip
from fgclip.models.factory import build_real_model, check_model_name, needs_quick_gelu

REPO = Path(__file__).resolve().parents[1]
GPU_FULL = sorted((REPO / "notebooks" / "params").glob("ch*/gpu-full.yaml"))


def activations(model) -> set[type]:
    return {type(m) for m in model.modules()
            if isinstance(m, (torch.nn.GELU, open_clip.transformer.QuickGELU))}


@pytest.mark.parametrize("name, pretrained, expected", [
    ("ViT-B-32", "openai", True), ("RN50", "openai", True), ("RN101", "openai", True),
    ("ViT-B-32", "laion2b_s34b_b79k", False), ("ViT-B-32", "none", False),
    ("ViT-B-32-quickgelu", "openai", False),  # the architecture has it already
])
def test_needs_quick_gelu(name, pretrained, expected):
    assert needs_quick_gelu(name, pretrained) is expected


@pytest.mark.parametrize("name", ["ViT-B-32", "RN50"])
def test_openai_weights_get_quick_gelu_and_their_own_transform(name):
    model, preprocess = build_real_model(name, "openai", load_weights=False)
    assert activations(model) == {open_clip.transformer.QuickGELU}
    normalize = preprocess.transforms[-1]
    assert tuple(normalize.mean) == pytest.approx(open_clip.OPENAI_DATASET_MEAN)
    random_init, _ = build_real_model(name, "none")
    assert activations(random_init) == {torch.nn.GELU}


@pytest.mark.parametrize("path", GPU_FULL, ids=lambda p: p.parent.name)
def test_gpu_full_sets_build_the_activation_their_weights_need(path):
    params = yaml.safe_load(path.read_text())
    name, pretrained = params["model"], params["pretrained"]
    if name in ("toy-vit", "toy-rn"):
        pytest.skip(f"{path.parent.name} uses the toy CLIP")
    model, _ = build_real_model(name, pretrained, load_weights=False)
    want = open_clip.transformer.QuickGELU if pretrained == "openai" else torch.nn.GELU
    assert activations(model) == {want}


def test_a_real_architecture_at_random_weights_encodes_a_real_photo():
    clip = create_clip("ViT-B-32", pretrained="none")
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        photo = Image.open(f).convert("RGB")  # 512 x 600, not square
    x = clip.preprocess(photo).unsqueeze(0)
    assert x.shape == (1, 3, 224, 224)
    with torch.no_grad():
        f = clip.model.encode_image(x)
        t = clip.model.encode_text(clip.tokenizer(["A woman in a uniform"]))
    assert f.shape == t.shape == (1, 512) and torch.isfinite(f).all()


def test_unknown_model_names_are_refused_briefly():
    with pytest.raises(ValueError, match=r"parameter 'model'.*did you mean ViT-B-32") as err:
        check_model_name("ViT-B32")
    assert len(str(err.value)) < 300
    with pytest.raises(ValueError, match="parameter 'model'"):
        create_clip("no-such-clip", pretrained="none")


def test_toy_weights_exist_only_for_toy_models():
    with pytest.raises(ValueError, match="parameter 'pretrained'"):
        create_clip("RN50", pretrained="toy")
    assert check_model_name("toy-rn") == "toy-rn"
