"""Training objectives (import from the module: ranking, matching, asymmetric)."""
