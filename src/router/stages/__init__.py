"""The cascade's stages, one module each (their order: docs/adr/0006); the pipeline runs them."""
