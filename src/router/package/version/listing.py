"""Every file of a package: the resident ones the manifest lists, the lazy ones their directories
name (a package copy, a publish read-back, ``kr`` commands that move whole versions).

Why apart from the manifest (``router.package.version.content_names``): at a million sections the
lazy
files number tens of thousands; a reader that serves queries never needs their list, and a copy
derives it from the partitions' directories, which the manifest's hashes cover.
"""

from __future__ import annotations

from collections.abc import Mapping

from router.package.format.bundle import BUNDLE_NAME, decode_bundle
from router.package.format.exact import EXACT_NAME, decode_exact_directory
from router.package.format.graph import GRAPH_NAME, decode_graph_directory
from router.package.format.records import RECORDS_INDEX_NAME, RECORDS_STEM
from router.package.format.shards import decode_directory
from router.package.format.texts import TEXTS_INDEX_NAME, decode_text_index
from router.package.format.vocabulary import VOCABULARY_NAME, decode_vocabulary_directory
from router.package.format.words import WORDS_NAME, decode_word_directory
from router.package.version.manifest import Manifest
from router.package.version.partitions import partition_file

__all__ = ["lazy_files", "postings_bytes"]


def lazy_files(manifest: Manifest, resident: Mapping[str, bytes]) -> list[str]:
    """The lazily read files of every partition (shards and head pages; vocabulary,
    exact-key, graph, word, text and record chunks), named from the partitions' resident
    directories in ``resident``."""
    names: list[str] = []
    for entry in manifest.partitions:
        bundle_name = partition_file(entry.key, BUNDLE_NAME)
        files = decode_bundle(resident[bundle_name], bundle_name)

        def blob(name: str, files: dict[str, bytes] = files) -> bytes:
            return files[name]

        shards = decode_directory(blob("postings.bin"))
        exact = decode_exact_directory(blob(EXACT_NAME))
        local = [shards.file_name(s) for s in range(len(shards.hashes))]
        local += [str(shards.page_name(s)) for s in shards.pages]
        local += [exact.file_name(c) for c in range(exact.chunks)]
        vocabulary = decode_vocabulary_directory(blob(VOCABULARY_NAME)).keys
        local += [vocabulary.file_name(c) for c in range(vocabulary.chunks)]
        graph = decode_graph_directory(blob(GRAPH_NAME))
        local += [graph.file_name(c) for c in range(len(graph.hashes))]
        words = decode_word_directory(blob(WORDS_NAME))
        local += [words.file_name(c) for c in range(words.chunks)]
        local += decode_text_index(blob(TEXTS_INDEX_NAME)).chunk_names()
        local += decode_text_index(blob(RECORDS_INDEX_NAME), RECORDS_STEM).chunk_names()
        names += [partition_file(entry.key, name) for name in sorted(set(local))]
    return names


def postings_bytes(files: Mapping[str, bytes]) -> int:
    """Bytes of a package's postings: every partition's directory (in its bundle) and shards."""
    total = sum(len(blob) for name, blob in files.items() if ".s-" in name or ".h-" in name)
    for name, blob in files.items():
        if name.endswith("." + BUNDLE_NAME):
            total += len(decode_bundle(blob, name)["postings.bin"])
    return total
