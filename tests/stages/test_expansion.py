"""Stage — corrective expansion: surface-word typo repair over the corpus vocabulary."""

from __future__ import annotations

from router.package.reader import KnowledgePackage
from router.stages.expansion import surface_vocabulary


def test_surface_correction_never_touches_known_words_codes_or_short_words(
    package: KnowledgePackage,
) -> None:
    surface = surface_vocabulary(package.view(None))
    assert surface.correct("equipamento") is None  # a corpus word is not a typo
    assert surface.correct("nr35x") is None  # codes are names
    assert surface.correct("apr") is None  # too short to correct safely
    assert surface.correct("equipamneto") == "equip"
