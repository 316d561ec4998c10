"""One module per paper, only what its equations define (import from the module); how each
chapter runs it is in :mod:`fgclip.studies`."""
