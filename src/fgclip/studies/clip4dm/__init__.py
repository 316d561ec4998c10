"""Chapter 2's experiment (CLIP4DM, arXiv 2412.18404): how the chapter is run.

Nothing is trained; the seed axis of every verdict is the draw of the test foils, and
units are captions clustered by their image. Everything tuned is tuned on the validation
split.

* :mod:`~fgclip.studies.clip4dm.data`: the foil captions of the validation split and of
  every test draw (toy exports per seed, or seeded samples of a real FOIL file), and the
  planted colour foils of the positive control;
* :mod:`~fgclip.studies.clip4dm.arms`: the variant grid and the compared rules, each an
  :class:`~fgclip.methods.clip4dm.AttributionConfig`, and a draw's attributions keyed by them;
* :mod:`~fgclip.studies.clip4dm.units`: one row per caption (hits, ties, word AUC,
  F-CLIPScore) and the comparison on them (:func:`~fgclip.studies.clip4dm.units.compare_units`);
* :mod:`~fgclip.studies.clip4dm.selection`: the text layers and every ε, chosen on validation;
* :mod:`~fgclip.studies.clip4dm.comparisons`: every verdict the chapter states, each with its
  margin, and the power record of the central one;
* :mod:`~fgclip.studies.clip4dm.pairs`: each foil paired with its own original (the paired
  score comparison, the original's word at the foil's slot);
* :mod:`~fgclip.studies.clip4dm.controls`: the planted positive and the position negative
  control (on every foil type's slot), both on LA itself;
* :mod:`~fgclip.studies.clip4dm.scale`: the low-CLIPScore test on the attributions' own scale
  (share of words below ε, minimum attribution) and the wrong-image arm;
* :mod:`~fgclip.studies.clip4dm.findings`: the closing findings and the results record;
* :mod:`~fgclip.studies.clip4dm.speed`: CLIP4DM against leave-one-word-out, timed and in FLOPs.

The paper's equations are in :mod:`fgclip.methods.clip4dm`.
"""
