"""The encoded formats of a package: one module per table, its encoder and its decoder, with the
layout described at the top (docs/index-format.md indexes them)."""
