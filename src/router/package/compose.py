"""Building a tenant's view from its partitions, the deltas' tombstones and redirects folded in.

Why apart from the view (``package.view``): composing runs once per view (the package keeps the
views it composed), and it alone decides how partitions join: their documents' first sections
joined without a copy, whose spellings win (base over delta, shared over tenant), and what the
deltas in view hide and redirect (docs/adr/0020); a query only reads the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from router.analysis.analyzer import Analyzer, AnalyzerConfig
from router.errors import PackageFormatError
from router.package.format.string_map import FirstOf
from router.package.joined import Joined, Offset
from router.package.stores.budget import ReaderBudget
from router.package.version.manifest import Manifest
from router.package.view import PackageView
from router.package.view_parts import Amended, SectionDocs, ViewPart, ViewTexts

__all__ = ["amended_view", "compose_view"]


def compose_view(
    manifest: Manifest,
    parts: tuple[ViewPart, ...],
    shared_view: PackageView | None = None,
    budget: ReaderBudget | None = None,
) -> PackageView:
    """The view over ``parts`` (the shared partition first, then the caller's own, then the
    deltas amending them: ascending section numbers); ``shared_view`` is the package's
    anonymous view, for every view that has a tenant partition."""
    budget = budget or ReaderBudget()
    shared = parts[0].partition
    first_sections: Sequence[int] = shared.columns.first[:-1]
    for part in parts[1:]:  # each part after the one before, nothing copied
        own = part.partition
        first_sections = Joined(first_sections, Offset(own.columns.first[:-1], own.first_section))
    # base spellings win over a delta's, the shared ones over a tenant's (docs/adr/0020)
    lexicons = [p.partition.lexicon for p in parts if p.partition.amendments is None]
    lexicons += [p.partition.lexicon for p in parts if p.partition.amendments is not None]
    lexicon: Mapping[str, str] = lexicons[0] if len(lexicons) == 1 else FirstOf(*lexicons)
    end = max(p.partition.first_section + p.partition.section_count for p in parts)
    return PackageView(
        manifest=manifest,
        parts=parts,
        doc_count=sum(part.partition.doc_count for part in parts),
        section_doc=SectionDocs(first_sections, end),
        doc_first_section=first_sections,
        analyzer=Analyzer(
            AnalyzerConfig.from_dict(manifest.analyzer),
            accent_lexicon=lexicon,
            stem_cache_entries=budget.stem_words,
        ),
        texts=ViewTexts(parts),
        synonyms=shared.synonyms,
        shared_view=shared_view,
        budget=budget,
        amended=amended_view(parts),
    )


def amended_view(parts: tuple[ViewPart, ...]) -> Amended:
    """The tombstones and redirects of the deltas in view, in view numbers."""
    by_key = {part.partition.key: part for part in parts}
    dead: set[int] = set()
    forward: dict[int, int] = {}
    dead_sections = 0
    frequencies: dict[str, dict[str, int]] = {}
    for part in parts:
        amendments = part.partition.amendments
        if amendments is None:
            continue
        base = by_key.get(part.partition.entry.amends or "")
        if base is None:
            raise PackageFormatError(f"delta {part.partition.key} amends no partition in view")
        if amendments.tombstones and amendments.tombstones[-1] >= base.partition.doc_count:
            raise PackageFormatError(f"delta {part.partition.key} tombstones a missing document")
        dead.update(base.first_doc + d for d in amendments.tombstones)
        if amendments.dead or not amendments.tombstones:  # what the old copies still count
            first = base.partition.columns.first
            dead_sections += sum(first[d + 1] - first[d] for d in amendments.tombstones)
            for block, terms in amendments.dead.items():
                into = frequencies.setdefault(block, {})
                for term, count in terms.items():
                    into[term] = into.get(term, 0) + count
        forward.update(zip(amendments.old_sections, amendments.new_sections, strict=True))
    origins = {new: old for old, new in forward.items()}
    return Amended(frozenset(dead), forward, origins, dead_sections, frequencies)
