"""The files that make a version: its manifest, its partitions, where its files live (layout,
content names), which files it has (listing), and how they are gathered (fetch)."""
