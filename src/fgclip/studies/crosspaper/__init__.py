"""Chapter 5 (issue 36): the four papers on one stage, every method on every task it can be asked.

:mod:`fgclip.studies.crosspaper.tasks` reads four tasks (pointing, wrong-word localization,
category presence, retrieval by name) off three method-independent outputs;
:mod:`fgclip.studies.crosspaper.adapters` turns each method's native outputs into them, and
says in ``NOT_APPLICABLE`` why a cell stays empty; :mod:`fgclip.studies.crosspaper.data` is the
one shared split (the toy world exported once in every real format and read back through the
real COCO and FOIL readers) and its frozen features, cached once; :mod:`fgclip.studies.crosspaper.train`
trains each chapter's method on it once per seed with the chapter's own code and selection;
:mod:`fgclip.studies.crosspaper.extension` chooses the rule of the book's image-side extension of
CLIP4DM (its pointing cell) on validation; :mod:`fgclip.studies.crosspaper.evaluate` scores every method and reference unit by unit,
:mod:`fgclip.studies.crosspaper.judge` compares each method with the frozen CLIP's reading of each task
through planted controls, and :mod:`fgclip.studies.crosspaper.findings` writes the closing
sentences from those verdicts. This study sits one layer
above the chapters' studies: it reuses their pieces (chapter 4's square transform and cache).
"""
from .adapters import ADAPTERS, METHODS, NOT_APPLICABLE, TASKS, NotApplicable, adapter
from .data import (FoilItem, SharedFeatures, SharedSplit, encode_shared, name_embeddings, read_shared,
                   shared_root, word_categories)
from .train import (Clip4dmOutputs, MethodRun, Record, Stage, clip4dm_outputs, make_stage, name_words,
                    train_decoupling, train_maximage, train_sumclip)
from .tasks import (CategoryAP, Localization, NameMaps, NameScores, PointingTrials, WordScores,
                    find_wrong_word, map_points, point_at_names, pointing, presence, retrieval)

__all__ = ["ADAPTERS", "METHODS", "NOT_APPLICABLE", "TASKS", "NotApplicable", "adapter", "CategoryAP",
           "Localization", "NameMaps", "NameScores", "PointingTrials", "WordScores", "find_wrong_word",
           "map_points", "point_at_names", "pointing", "presence", "retrieval", "FoilItem", "SharedFeatures",
           "SharedSplit", "encode_shared", "name_embeddings", "read_shared", "shared_root", "word_categories",
           "Clip4dmOutputs", "MethodRun", "Record", "Stage", "clip4dm_outputs", "make_stage", "name_words",
           "train_decoupling", "train_maximage", "train_sumclip"]
