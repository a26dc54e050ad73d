"""Dense retrieval: the text a section is embedded from, vector encoding, the exact index."""
