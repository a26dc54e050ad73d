"""The readers of the lazily read tables: each fetches a table's chunks per query through the
package's verified reader and keeps them under a byte budget (``stores.budget``); a table's
reader has its codec's name (``format/graph.py`` → ``stores/graph.py``)."""
