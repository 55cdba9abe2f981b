"""Independent re-implementations used to cross-check the exact models (PuLP/CBC)."""
