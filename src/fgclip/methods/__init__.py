"""One module per paper: the method each chapter implements (import from the module)."""
