"""Sweeps: a grid of simulations from a TOML/YAML spec (`spec`), run cell by cell on local
worker processes or Ray (`engines`, `cell`), merged into tidy tables (`run`)."""
