"""``kr build``: compile a knowledge folder, publish it to the local state, gate and activate it."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from kr.activation import activate_gated
from kr.commands.options import gate_settings
from kr.document_cache import DocumentCache
from kr.local import local_state
from kr.progress import progress_phases
from router.adapters.local.embedders import embedder_by_name
from router.adapters.local.openai_generator import OpenAICompatibleGenerator
from router.compile.build import build_knowledge, write_package
from router.compile.doc2query import Doc2Query
from router.errors import ConfigError
from router.ops.publish import publish_package

__all__ = ["LLM_VARIABLES", "doc2query_from_env", "run"]

LLM_VARIABLES = ("KR_LLM_BASE_URL", "KR_LLM_MODEL")
"""Required by ``--doc2query``; ``KR_LLM_API_KEY`` is optional (a local server needs none)."""


def doc2query_from_env(per_section: int, environ: Mapping[str, str]) -> Doc2Query | None:
    """``--doc2query N``'s option: N questions per section from the endpoint the environment
    names; None for N = 0. ConfigError naming the variables that are missing."""
    if not per_section:
        return None
    missing = [name for name in LLM_VARIABLES if not environ.get(name)]
    if missing:
        raise ConfigError(f"--doc2query needs an LLM endpoint: set {', '.join(missing)}")
    generator = OpenAICompatibleGenerator(
        environ["KR_LLM_BASE_URL"], environ["KR_LLM_MODEL"], environ.get("KR_LLM_API_KEY")
    )
    return Doc2Query(generator, per_section)


async def run(args: argparse.Namespace) -> int:
    doc2query = doc2query_from_env(args.doc2query, os.environ)
    encoder = embedder_by_name(args.embedder)
    state = local_state(args.state)
    reuse = None if getattr(args, "full", False) else DocumentCache(state.root)
    try:
        with progress_phases() as phases:
            result = build_knowledge(
                args.knowledge_dir,
                strict=args.strict,
                encoder=encoder,
                phases=phases,
                doc2query=doc2query,
                reuse=reuse,
            )
            written = write_package(result.package, args.out, phases) if args.out else None
        if reuse is not None:
            reuse.keep(doc.path for doc in result.corpus.documents)
    finally:
        if reuse is not None:
            reuse.close()
        if hasattr(encoder, "close"):  # a Workers AI encoder: its HTTP client and thread
            encoder.close()
    if reuse is not None:
        print(f"parsed {reuse.misses} file(s), reused {reuse.hits} unchanged", file=sys.stderr)
    for diagnostic in result.corpus.diagnostics:
        print(diagnostic, file=sys.stderr)
    package = result.package
    if written is not None:
        print(f"package written to {written}")
    if args.no_activate:
        version = await publish_package(
            package.files(), state.blobs, state.kv, state.relational, activate_now=False
        )
    else:
        version, _ = await activate_gated(
            package.files(), state, force=args.force, settings=gate_settings(args), command="build"
        )
    counts = ", ".join(f"{v} {k}" for k, v in package.manifest.counts.items())
    verb = "published" if args.no_activate else "active"
    print(f"knowledge version {version} {verb} in {state.root} ({counts})")
    return 0
