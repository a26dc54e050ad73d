"""``kr build``: compile a knowledge folder, publish it to the local state, gate and activate it."""

from __future__ import annotations

import argparse
import sys

from kr.activation import activate_gated
from kr.commands.options import gate_settings
from kr.local import local_state
from kr.progress import progress_phases
from router.adapters.local.embedders import embedder_by_name
from router.compile.build import build_knowledge, write_package
from router.ops.publish import publish_package

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    encoder = embedder_by_name(args.embedder)
    try:
        with progress_phases() as phases:
            result = build_knowledge(
                args.knowledge_dir, strict=args.strict, encoder=encoder, phases=phases
            )
            written = write_package(result.package, args.out, phases) if args.out else None
    finally:
        if hasattr(encoder, "close"):  # a Workers AI encoder: its HTTP client and thread
            encoder.close()
    for diagnostic in result.corpus.diagnostics:
        print(diagnostic, file=sys.stderr)
    package = result.package
    if written is not None:
        print(f"package written to {written}")
    state = local_state(args.state)
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
