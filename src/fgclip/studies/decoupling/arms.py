"""Chapter 4's arms: the rows of its tables (:class:`Arm`), the logistic-regression baseline, and
the :class:`Trainer` that trains the runs of an arm side by side on the fit split, scoring the
validation split after every epoch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from sklearn.linear_model import LogisticRegression
from torch import nn

from ...partial_labels import UNKNOWN
from .features import Features
from .heads import FitConfig, Prediction, predict
from .stacked import Member, MemberRuns, continue_members, train_members


@dataclass(frozen=True)
class Arm:
    """One row of the chapter's tables: its display ``name`` (the results' "variant"), the
    :func:`~fgclip.studies.decoupling.heads.make_head` ``variant`` it builds (untrained rows name
    their own kind) and its scoring rule (``fgclip.methods.decoupling.SCORINGS``)."""

    name: str
    variant: str
    scoring: str


LINEAR_PROBE = Arm("linear probe", "linear probe", "sigmoid")
PROMPTS_ONLY = Arm("prompts only", "prompts only", "softmax")
DECOUPLING_ONLY = Arm("decoupling only", "decoupling only", "softmax")
FULL = Arm("full (paper, softmax)", "full", "softmax")
FULL_BIAS = Arm("full, sigmoid+bias", "full", "sigmoid+bias")
FULL_AFFINE = Arm("full, sigmoid+affine", "full", "sigmoid+affine")
TRAINED = (LINEAR_PROBE, PROMPTS_ONLY, DECOUPLING_ONLY, FULL, FULL_BIAS, FULL_AFFINE)
ZERO_SHOT = Arm("zero-shot", "zero-shot", "softmax")
UNTRAINED = Arm("untrained init", "full", "softmax")
LOGISTIC = Arm("logistic regression", "logistic regression", "sigmoid")
ROWS = (ZERO_SHOT, UNTRAINED, LOGISTIC, *TRAINED)  # the order of the chapter's tables
FULL_RULES = (FULL, FULL_BIAS, FULL_AFFINE)  # the full model under each scoring rule
DIAGNOSED = (FULL, DECOUPLING_ONLY, PROMPTS_ONLY)  # the arms whose per-proportion curves the chapter draws
ROW_NAMES = [arm.name for arm in ROWS]


def logistic_scores(train_x: np.ndarray, targets: np.ndarray, test_x: np.ndarray,
                    c_reg: float = 1.0) -> np.ndarray:
    """One scikit-learn logistic regression per category on the L2-normalised global feature,
    fitted on that category's known entries only; decision values s (N_test, C).

    A category whose known entries hold a single class gets a constant score.
    """
    norm = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    xa, xb = norm(np.asarray(train_x, dtype=np.float64)), norm(np.asarray(test_x, dtype=np.float64))
    out = np.zeros((len(xb), targets.shape[1]))
    for c in range(targets.shape[1]):
        known = targets[:, c] != UNKNOWN
        y = targets[known, c]
        if len(np.unique(y)) < 2:
            continue
        out[:, c] = LogisticRegression(C=c_reg, max_iter=500).fit(xa[known], y).decision_function(xb)
    return out


class Trainer:
    """Trains the runs (:class:`~fgclip.studies.decoupling.stacked.Member`) of one :class:`Arm`
    side by side on the fit split, scoring the validation split after every epoch; the frozen
    CLIP, its cached features and the base FitConfig are fixed.

    make: ``lambda variant, scoring, seed: nn.Module`` (a bound ``make_head``).
    """

    def __init__(self, make: Callable, fit_feats: Features, val_feats: Features,
                 test_feats: Features, cfg: FitConfig) -> None:
        self.make, self.fit_feats, self.val_feats, self.test_feats = make, fit_feats, val_feats, test_feats
        self.cfg = cfg

    def train_members(self, arm: Arm, members: list[Member], targets: Callable, epochs: int,
                      validate: bool = True) -> MemberRuns:
        """Every member of ``arm`` trained for ``epochs`` epochs (:func:`~fgclip.studies.decoupling.stacked.train_members`);
        targets(member) -> its (fit, validation) targets; ``validate=False``: no per-epoch validation."""
        return train_members(lambda sd: self.make(arm.variant, arm.scoring, sd), members, targets,
                             self.fit_feats, self.val_feats, self.cfg, epochs, validate)

    def continue_members(self, runs: MemberRuns, which: list[int], targets: Callable, extra: int
                         ) -> tuple[MemberRuns, float]:
        """Members ``which`` of ``runs`` trained ``extra`` epochs on from their end
        (:func:`~fgclip.studies.decoupling.stacked.continue_members`)."""
        return continue_members(runs, which, targets, self.fit_feats, self.val_feats, self.cfg, extra)

    def test(self, head: nn.Module) -> Prediction:
        """(scores s, log p, attention) of ``head`` on the test features."""
        return predict(head, *self.test_feats, device=self.cfg.device)
