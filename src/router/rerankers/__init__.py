"""Rerankers that need no adapter of their own: the local lexical default, a listwise LLM over
the generator port, and cosine similarity over the embedder port (``router.ports.Reranker``)."""
