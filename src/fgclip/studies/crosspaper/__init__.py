"""Chapter 5 (issue 36): the four papers on one stage, every method on every task it can be asked.

:mod:`fgclip.studies.crosspaper.tasks` reads four tasks (pointing, wrong-word localization,
category presence, retrieval by name) off three method-independent outputs;
:mod:`fgclip.studies.crosspaper.adapters` turns each method's native outputs into them, and
says in ``NOT_APPLICABLE`` why a cell stays empty.
"""
from .adapters import ADAPTERS, METHODS, NOT_APPLICABLE, TASKS, NotApplicable, adapter
from .tasks import (CategoryAP, Localization, NameMaps, NameScores, PointingTrials, WordScores,
                    find_wrong_word, map_points, point_at_names, pointing, presence, retrieval)

__all__ = ["ADAPTERS", "METHODS", "NOT_APPLICABLE", "TASKS", "NotApplicable", "adapter", "CategoryAP",
           "Localization", "NameMaps", "NameScores", "PointingTrials", "WordScores", "find_wrong_word",
           "map_points", "point_at_names", "pointing", "presence", "retrieval"]
