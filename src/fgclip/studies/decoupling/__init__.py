"""Chapter 4's experiment (semantic decoupling, arXiv 2412.10843): how the chapter is run.

* :mod:`~fgclip.studies.decoupling.data`: a real root read as it is or the toy world exported
  (COCO JSON and VOC XML), the labels, the validation split and the seeded partial-label draws;
* :mod:`~fgclip.studies.decoupling.features`: frozen features of the whole image resized to a
  square, cached per (model, data, split, transform), and the zero-shot diagnostic;
* :mod:`~fgclip.studies.decoupling.heads`: the variants of the framework on those features,
  trained with P-ASL through the one loop and early-stopped on validation;
* :mod:`~fgclip.studies.decoupling.stacked`: the runs of one arm trained side by side in one
  loop, with their validation curves and per-epoch states;
* :mod:`~fgclip.studies.decoupling.arms`: the rows of the chapter's tables, the logistic
  regression baseline and the trainer of one arm;
* :mod:`~fgclip.studies.decoupling.sweep`: every trained arm's lr and epochs chosen by one
  selection grid on validation, then every proportion and seed;
* :mod:`~fgclip.studies.decoupling.controls`: the chapter's cluster unit and the loss's
  gradients at unknown entries;
* :mod:`~fgclip.studies.decoupling.planted`: the positive control, the chapter's pipeline on a
  toy world whose category pairs always co-occur;
* :mod:`~fgclip.studies.decoupling.comparisons`: the pointing game, the verdicts, the A/A
  control and the power check;
* :mod:`~fgclip.studies.decoupling.findings`: the run's findings, as the chapter glues them.

The algebra is in :mod:`fgclip.methods.decoupling` and :mod:`fgclip.losses.asymmetric`.
"""
