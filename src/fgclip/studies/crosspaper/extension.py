"""The book's extension of CLIP4DM to the image side, chapter 5's pointing cell: its rule
(CLIP4DM's own, no ReLU, or GAE's ReLU) chosen by pointing on the shared validation images, as
CLIP4DM's text side chooses its layers. The relevance itself is
:func:`fgclip.methods.clip4dm.pooling_relevance`; reading it as maps is
:func:`fgclip.studies.crosspaper.adapters.clip4dm_image_maps`."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from ...methods.clip4dm import pooling_relevance
from .adapters import clip4dm_image_maps
from .tasks import point_at_names

if TYPE_CHECKING:
    from .train import Stage

IMAGE_RULES = {False: "CLIP4DM's rule (no ReLU)", True: "GAE (ReLU before the head mean)"}


def choose_image_rule(pool: torch.nn.Module, stage: Stage, name_text: torch.Tensor) -> tuple[bool, dict[str, float]]:
    """The image-side extension's rule, chosen as the text side chooses its layers: pointing
    accuracy on the validation images (every (image, name) with a box; an image with no object is skipped) of
    :func:`fgclip.methods.clip4dm.pooling_relevance` without and with the ReLU; a tie keeps
    CLIP4DM's own rule. name_text: (C, D) in ``stage.train.categories`` order. Returns (relu, rule -> accuracy)."""
    cats = list(stage.train.categories)
    val = [i for i in stage.val_idx if stage.train.boxes[i]]  # an image with no object asks no name
    fmap = stage.feats.feature_map[val].to(stage.device)  # (V, C, h, w)
    queried = [tuple(stage.train.boxes[i]) for i in val]
    acc = {}
    for relu, label in IMAGE_RULES.items():
        rel = pooling_relevance(pool, fmap, name_text.to(stage.device), relu).cpu()  # (V, C, 1 + h w)
        maps = clip4dm_image_maps(rel, cats, queried, tuple(fmap.shape[-2:]))
        acc[label] = point_at_names(maps, [stage.train.boxes[i] for i in val], [stage.train.hws[i] for i in val]).accuracy
    return acc[IMAGE_RULES[True]] > acc[IMAGE_RULES[False]], acc
