"""Chapter 1's experiment (MaxImage, arXiv 1908.02950): how the chapter is run.

* :mod:`~fgclip.studies.maximage.data`: Flickr30K Entities splits through the real reader,
  with the frozen image grid and word features cached once (the toy world exported in
  that format when ``data_root`` holds no dataset);
* :mod:`~fgclip.studies.maximage.heads`: the heads trained by retrieval on those features
  through the one loop, their maps, and the pointing game with its baselines;
* :mod:`~fgclip.studies.maximage.arms`: the training arms (each a named config) and the
  "what was chosen on which split" table;
* :mod:`~fgclip.studies.maximage.evaluation`: the evaluation protocol: per-phrase scores of
  every arm and caption-blind floor on the same phrases, ready for the verdicts;
* :mod:`~fgclip.studies.maximage.init_census`: how the heads' biases start, chosen on the
  validation loss before any arm trains;
* :mod:`~fgclip.studies.maximage.grounding`: the grounding test's power check and sentence;
* :mod:`~fgclip.studies.maximage.bias`: the centre-bias sweep, its cross-evaluation and its
  falsification;
* :mod:`~fgclip.studies.maximage.seeds` and :mod:`~fgclip.studies.maximage.causes`: every
  seed below a floor, named with its cause (an outlier and its mechanism, or its arm's);
* :mod:`~fgclip.studies.maximage.figures`: word maps and the caption widget on a split.

The paper's equations are in :mod:`fgclip.methods.maximage`.
"""
