"""Each chapter's experiment, one package per chapter named after its paper: how the chapter is run.

``maximage`` (chapter 1), ``clip4dm`` (chapter 2), ``for_retrieval`` (chapter 3, FOR) and
``decoupling`` (chapter 4) hold their chapter's data preparation, head trainers, arms, folds,
controls, selection and the verdicts it states. What a paper's equations define is in
:mod:`fgclip.methods`; the loops they train with in :mod:`fgclip.train`. A study imports
those and everything below them, never another study.
"""
