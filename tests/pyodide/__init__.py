"""The Pyodide test layer: the real Worker in Pyodide under Node, and wrangler's config checks."""
