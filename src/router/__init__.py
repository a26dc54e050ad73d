"""Knowledge Router: a retrieval cascade over compiled Markdown knowledge (sans-I/O core)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
