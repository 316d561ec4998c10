"""Chapter 3's experiment (FOR, arXiv 2412.18806): how the chapter is run.

* :mod:`~fgclip.studies.for_retrieval.head`: the frozen CLIP's outputs computed once, and the
  SUM-CLIP head trained on them through the one loop (L = w_sup L_sup + w_pl L_pl);
* :mod:`~fgclip.studies.for_retrieval.data`: the COCO root or toy export, its splits, the open
  vocabulary, and everything the fold loop reads (:class:`~fgclip.studies.for_retrieval.data.ForData`);
* :mod:`~fgclip.studies.for_retrieval.folds`: rotated novel folds, the choices made on held-out
  training images, the teacher arms and their planted controls, and the per-category scores;
* :mod:`~fgclip.studies.for_retrieval.protocol`: every trained arm's learning rate and epochs
  chosen on validation images, the fold loop, the verdicts clustered by fold, the power check;
* :mod:`~fgclip.studies.for_retrieval.page`: every verdict the chapter states, and the sentences
  on forgetting and on the global slot built from them;
* :mod:`~fgclip.studies.for_retrieval.speed`: ``benchmarks/results/for.json`` read back: where
  the paper's "3x faster" can hold, and the README's table.

The paper's equations are in :mod:`fgclip.methods.sumclip`, :mod:`fgclip.methods.cluster_clip`
and :mod:`fgclip.losses.matching`.
"""
