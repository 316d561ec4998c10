"""One entry point for every CLIP the book uses: real open_clip models or our toy configs.

``create_clip('ViT-B-32', pretrained='openai')`` gives the real model (needs internet or
an open_clip cache) with QuickGELU, as OpenAI trained it; ``create_clip('ViT-B-32',
pretrained='none')`` the same architecture at random weights (how the tests exercise the
real-data path without a download); ``create_clip('toy-vit', pretrained='toy')`` the toy
CLIP with the checkpoint committed under ``checkpoints/``; ``pretrained`` may also be a
file path. Real models get the eval transform of their own pretrained configuration
(mean, std, interpolation, resize mode), from ``open_clip.create_model_and_transforms``.
"""
from __future__ import annotations

import contextlib
import difflib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import open_clip
import torch

from ..paths import project_home

CONFIG_DIR = Path(__file__).parent / "configs"
TOY_MODELS = tuple(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))

def committed_checkpoint(name: str) -> Path:
    """The toy checkpoint committed under the project's ``checkpoints/`` folder."""
    return project_home() / "checkpoints" / f"{name}.pt"

open_clip.add_model_config(CONFIG_DIR)
NO_WEIGHTS = (None, "none", "")  # pretrained values that mean a random initialisation


def check_model_name(name: str) -> str:
    """``name`` if it is a toy config or an open_clip architecture; else a short ValueError
    that names the parameter and the closest known names (not open_clip's whole list)."""
    known = set(TOY_MODELS) | set(open_clip.list_models())
    if name in known or name.startswith(("hf-hub:", "local-dir:")):
        return name
    close = difflib.get_close_matches(name, sorted(known), n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"parameter 'model': unknown model {name!r} (toy models: "
                     f"{', '.join(TOY_MODELS)}; or any name of open_clip.list_models()){hint}")


def needs_quick_gelu(name: str, pretrained: str | None) -> bool:
    """True when the weights named by ``pretrained`` were trained with QuickGELU.

    open_clip 3.3 builds 'ViT-B-32', 'RN50', ... with nn.GELU; OpenAI's weights (and any tag
    whose pretrained configuration says ``quick_gelu``) need x * sigmoid(1.702 x) instead,
    and open_clip only warns. A '-quickgelu' architecture already has it.
    """
    if pretrained in NO_WEIGHTS or name.endswith("-quickgelu"):
        return False
    return pretrained == "openai" or bool(open_clip.get_pretrained_cfg(name, pretrained).get("quick_gelu"))


@dataclass
class Clip:
    """A model together with what is needed to feed it."""

    model: open_clip.CLIP
    preprocess: Callable  # PIL image -> (3, H, W) tensor, open_clip's own eval transform
    tokenizer: Callable  # list[str] -> (N, context_length) long tensor
    name: str
    pretrained: str | None
    checkpoint_info: dict[str, Any] | None = None  # a toy checkpoint's fields but its weights

    @property
    def image_size(self) -> int:
        size = self.model.visual.image_size
        return size[0] if isinstance(size, (tuple, list)) else int(size)

    @property
    def mean_std(self) -> tuple[torch.Tensor, torch.Tensor]:
        mean = getattr(self.model.visual, "image_mean", None) or open_clip.OPENAI_DATASET_MEAN
        std = getattr(self.model.visual, "image_std", None) or open_clip.OPENAI_DATASET_STD
        return torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)


@contextlib.contextmanager
def _quiet_open_clip():
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def load_toy_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by ``fgclip.train``; errors name the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain data only
    for field in ("model_name", "state_dict"):
        if field not in ckpt:
            raise KeyError(f"checkpoint {path} has no field {field!r}")
    return ckpt


def build_real_model(name: str, pretrained: str | None, load_weights: bool = True):
    """(model, eval transform) of an open_clip architecture, QuickGELU where its weights need it.

    ``load_weights=False`` builds the architecture and transform exactly as they would hold
    those weights (activation; mean, std, interpolation and resize mode of the tag's
    pretrained configuration) without fetching them: how the tests check it offline.
    """
    tag = None if pretrained in NO_WEIGHTS else pretrained
    quick_gelu = needs_quick_gelu(name, tag)
    with _quiet_open_clip():
        if load_weights or tag is None:
            model, _, preprocess = open_clip.create_model_and_transforms(
                name, pretrained=tag, device="cpu", force_quick_gelu=quick_gelu)
        else:
            cfg = open_clip.get_pretrained_cfg(name, tag)
            model, _, preprocess = open_clip.create_model_and_transforms(
                name, pretrained=None, device="cpu", force_quick_gelu=quick_gelu,
                image_mean=cfg.get("mean"), image_std=cfg.get("std"),
                image_interpolation=cfg.get("interpolation"), image_resize_mode=cfg.get("resize_mode"))
    return model, preprocess


def create_clip(name: str = "toy-vit", pretrained: str | None = "toy", device: str = "cpu",
                ) -> Clip:
    """Build a CLIP. ``pretrained``: 'none' or None (random init), 'toy' (the committed
    checkpoint of a toy model), an open_clip tag such as 'openai', or a weights file."""
    check_model_name(name)
    info = None
    if name in TOY_MODELS:
        with _quiet_open_clip():  # it warns that a random init is random
            model = open_clip.create_model(name, pretrained=None, device="cpu")
        if pretrained not in NO_WEIGHTS:
            path = committed_checkpoint(name) if pretrained == "toy" else Path(pretrained)
            ckpt = load_toy_checkpoint(path)
            if ckpt["model_name"] != name:
                raise ValueError(f"checkpoint {path} is for model {ckpt['model_name']!r}, not {name!r}")
            state = {k: v.float() for k, v in ckpt["state_dict"].items()}
            model.load_state_dict(state)
            info = {k: v for k, v in ckpt.items() if k != "state_dict"}
        preprocess = open_clip.image_transform(model.visual.image_size, is_train=False,
                                               mean=getattr(model.visual, "image_mean", None),
                                               std=getattr(model.visual, "image_std", None))
    else:
        if pretrained == "toy":
            raise ValueError(f"parameter 'pretrained': 'toy' weights exist only for {TOY_MODELS}, "
                             f"not {name!r}; use 'none', an open_clip tag or a weights file")
        model, preprocess = build_real_model(name, pretrained)
    model = model.to(device).eval()
    return Clip(model, preprocess, open_clip.get_tokenizer(name), name, pretrained, info)


def images_to_tensor(images: torch.Tensor, clip: Clip) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> normalised float (B, 3, S, S) at the model's input size.

    The batched equivalent of open_clip's eval transform for images already square.
    """
    x = images.permute(0, 3, 1, 2).float().div_(255.0)  # (B, 3, H, W)
    if x.shape[-1] != clip.image_size:
        x = torch.nn.functional.interpolate(x, size=clip.image_size, mode="bicubic",
                                            align_corners=False).clamp_(0, 1)
    mean, std = clip.mean_std
    return (x - mean.to(x.device)) / std.to(x.device)
