"""The cascade's stages, one module each; the pipeline alone decides fall-through and the trace."""
