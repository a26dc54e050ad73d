"""``kr build``: compile a knowledge folder, publish it to the local state, gate and activate it."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kr.activation import activate_gated
from kr.build_base import BuildBase
from kr.commands.options import gate_settings
from kr.document_cache import DocumentCache
from kr.incremental import DeltaBuild, PackageFiles, build_fingerprint, try_delta
from kr.local import local_state
from kr.progress import progress_phases
from router.adapters.local.embedders import embedder_by_name
from router.adapters.local.openai_generator import OpenAICompatibleGenerator
from router.adapters.local.state import LocalState
from router.compile.build import build_knowledge, write_package
from router.compile.corpus import SYNONYMS_FILE
from router.compile.doc2query import Doc2Query
from router.compile.indexer import BuildConfig
from router.compile.staging import StagedFiles
from router.errors import ConfigError, QualityGateError, RouterError
from router.ops.publish import publish_direct
from router.package.version.layout import package_key
from router.package.version.manifest import Manifest

__all__ = ["LLM_VARIABLES", "build_once", "doc2query_from_env", "run", "watch"]

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
    if getattr(args, "watch", False):
        return await watch(args)
    return await build_once(args)


def _knowledge_change(_: Any, path: str) -> bool:
    """What a rebuild is for: a Markdown file or the synonyms, not an editor's swap file."""
    return path.endswith((".md", SYNONYMS_FILE))


async def watch(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    """Build, then rebuild after every save (watchfiles, 300 ms debounce) until interrupted.

    Each rebuild reuses the unchanged files' parse (the document cache) and goes through the
    gate like ``kr build``; a build that fails (a malformed file under ``--strict``, a blocked
    gate) is reported and the active version keeps serving until the next save."""
    from watchfiles import awatch

    await _build_reporting(args)
    print(f"watching {args.knowledge_dir} (Ctrl-C to stop)", flush=True)
    async for changes in awatch(
        args.knowledge_dir, watch_filter=_knowledge_change, debounce=300, stop_event=stop
    ):
        names = sorted({Path(path).name for _, path in changes})
        print(f"changed: {', '.join(names[:5])}{' …' if len(names) > 5 else ''}", flush=True)
        await _build_reporting(args)
    return 0


async def _build_reporting(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    try:
        await build_once(args)
    except (RouterError, OSError) as exc:
        reason = f"[{exc.code}] {exc.message}" if isinstance(exc, RouterError) else str(exc)
        if isinstance(exc, QualityGateError):
            print(exc.details, flush=True)
        print(f"build failed: {reason} (the active version keeps serving)", flush=True)
    else:
        print(f"built in {time.perf_counter() - started:.1f} s", flush=True)


async def build_once(args: argparse.Namespace) -> int:
    """One ``kr build``: compile — a delta against the last full build when it may (docs/adr/
    0020), else everything, reusing unchanged files' parse — publish, gate and activate.

    A full build keeps its documents on disk (``router.compile.spill``) and writes the
    package's files to a staging folder in the state as they are made, published from there
    and removed at the end (``router.compile.staging``): bounded memory at a million
    sections."""
    state = local_state(args.state)
    staging_root = state.root / "build"
    staging_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="staging-", dir=staging_root) as staging:
        return await _build_once(args, state, StagedFiles(staging))


async def _build_once(args: argparse.Namespace, state: LocalState, staged: StagedFiles) -> int:
    doc2query = doc2query_from_env(args.doc2query, os.environ)
    encoder = embedder_by_name(args.embedder)
    full = getattr(args, "full", False)
    reuse = None if full else DocumentCache(state.root)
    base = BuildBase(state.root)
    root = Path(args.knowledge_dir)
    config = BuildConfig()
    fingerprint = build_fingerprint(root, config, args.embedder)
    delta: DeltaBuild | None = None
    try:
        reason = _full_build_reason(args, full, doc2query)
        if reason is None:
            found = try_delta(
                root,
                base,
                base_reader(state, base.version),
                config=config,
                fingerprint=fingerprint,
                strict=args.strict,
                encoder=encoder,
                reuse=reuse,
            )
            delta, reason = (found, None) if isinstance(found, DeltaBuild) else (None, found)
        if delta is None:
            print(f"full build: {reason}", file=sys.stderr)
            with progress_phases() as phases:
                result = build_knowledge(
                    root,
                    config,
                    strict=args.strict,
                    encoder=encoder,
                    phases=phases,
                    doc2query=doc2query,
                    reuse=reuse,
                    spill=True,
                    store=staged,
                )
                written = write_package(result.package, args.out, phases) if args.out else None
            if reuse is not None:
                reuse.keep(doc.path for doc in result.corpus.documents)
            base.record(
                root,
                result.package,
                result.corpus.documents,
                fingerprint,
                result.corpus.diagnostics,
            )
    finally:
        base.close()
        if reuse is not None:
            reuse.close()
        if hasattr(encoder, "close"):  # a Workers AI encoder: its HTTP client and thread
            encoder.close()
    if delta is not None:
        return await _publish_delta(args, state, delta)
    if reuse is not None:
        print(f"parsed {reuse.misses} file(s), reused {reuse.hits} unchanged", file=sys.stderr)
    for diagnostic in result.corpus.diagnostics:
        print(diagnostic, file=sys.stderr)
    if written is not None:
        print(f"package written to {written}")
    return await _publish(args, state, result.package.files(), result.package.manifest)


def _full_build_reason(
    args: argparse.Namespace, full: bool, doc2query: Doc2Query | None
) -> str | None:
    """Why this build compiles everything whatever changed, or None."""
    if full:
        return "--full"
    if args.out:
        return "--out writes a whole package"
    if doc2query is not None:
        return "--doc2query writes questions for every section"
    return None


def base_reader(state: LocalState, version: str | None) -> Callable[[str], bytes]:
    """Reads a file of the base version from where ``kr build`` published it."""

    def read(name: str) -> bytes:
        return _base_path(state, version, name).read_bytes()

    return read


def base_sizer(state: LocalState, version: str | None) -> Callable[[str], int]:
    """The size of a file of the base version, without reading it."""

    def size(name: str) -> int:
        return _base_path(state, version, name).stat().st_size

    return size


def _base_path(state: LocalState, version: str | None, name: str) -> Path:
    if version is None:
        raise KeyError(name)
    return state.blobs.root / package_key(version, name)


async def _publish_delta(args: argparse.Namespace, state: LocalState, delta: DeltaBuild) -> int:
    scan = delta.scan
    print(
        f"delta build on {delta.base_version}: {len(scan.changed)} changed or added, "
        f"{len(scan.removed)} removed, {scan.unchanged} unchanged",
        file=sys.stderr,
    )
    for diagnostic in delta.diagnostics:
        print(diagnostic, file=sys.stderr)
    package = delta.package
    version = delta.base_version
    files = PackageFiles(
        package.files(),
        delta.base_manifest,
        base_reader(state, version),
        base_sizer(state, version),
    )
    return await _publish(args, state, files, package.manifest)


async def _publish(
    args: argparse.Namespace, state: LocalState, files: Mapping[str, bytes], manifest: Manifest
) -> int:
    """Publish to the local state; gate and activate unless ``--no-activate``."""
    if args.no_activate:
        report = await publish_direct(
            files, state.blobs, state.kv, state.relational, activate_now=False
        )
        version = report.version
        print(report.blob_summary(), flush=True)
    else:
        version, _ = await activate_gated(
            files, state, force=args.force, settings=gate_settings(args), command="build"
        )
    counts = ", ".join(f"{v} {k}" for k, v in manifest.counts.items())
    verb = "published" if args.no_activate else "active"
    print(f"knowledge version {version} {verb} in {state.root} ({counts})", flush=True)
    return 0
