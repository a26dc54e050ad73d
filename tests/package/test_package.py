"""The compiled package: reproducible bytes, manifest hashes, integrity on load."""

from __future__ import annotations

import asyncio
import json

import pytest

from router.compile.build import BuildResult, build_knowledge
from router.errors import IntegrityError, PackageFormatError
from router.package.reader import load_package
from router.package.version.fetch import FETCH_BATCH, fetch_package_files
from router.package.version.listing import lazy_files
from router.package.version.manifest import Manifest, sha256_hex
from router.package.version.partitions import SHARED_PARTITION
from tests.common import KNOWLEDGE


def test_same_input_gives_byte_identical_package(built: BuildResult) -> None:
    again = build_knowledge(KNOWLEDGE).package
    assert again.files() == built.package.files()
    assert again.knowledge_version == built.package.knowledge_version


def test_manifest_describes_every_artifact(built: BuildResult) -> None:
    manifest = json.loads(built.package.files()["manifest.json"])
    assert manifest["format_version"] == 3
    assert manifest["analyzer"]["language"] == "portuguese"
    assert manifest["bm25"] == {"method": "lucene", "k1": 1.5, "b": 0.75}
    assert manifest["counts"]["documents"] >= 60
    required = Manifest.from_bytes(built.package.files()["manifest.json"]).artifact_names
    partitions = manifest["partitions"]
    assert partitions[0]["key"] == SHARED_PARTITION and len(partitions) >= 2  # sample has tenants
    assert sum(p["sections"] for p in partitions) == manifest["counts"]["sections"]
    for name in required:
        blob = built.package.artifacts[name]
        assert manifest["artifacts"][name] == {"sha256": sha256_hex(blob), "bytes": len(blob)}
    assert set(manifest["artifacts"]) == set(required)  # the resident files only
    files = built.package.files()
    lazy = {n for n in files if n != "manifest.json" and n not in required}
    assert {n.split(".")[1].split("-")[0] for n in lazy} == {
        "s",
        "v",
        "x",
        "g",
        "w",
        "texts",
        "records",
    }
    assert all(n.split("-")[-1] == f"{sha256_hex(files[n])[:16]}.bin" for n in lazy)
    resident = {n: files[n] for n in required}
    assert lazy_files(Manifest.from_bytes(files["manifest.json"]), resident) == sorted(lazy)


def test_corrupt_or_truncated_artifacts_are_refused(built: BuildResult) -> None:
    files = dict(built.package.files())
    tenant = next(n for n in files if n.startswith("t-") and n.endswith(".partition.bin"))
    for name in ("shared.partition.bin", tenant):  # any partition refuses the whole version
        damaged = bytearray(files[name])
        damaged[100] ^= 0xFF
        with pytest.raises(IntegrityError):
            load_package(files["manifest.json"], {**files, name: bytes(damaged)}.__getitem__)
    with pytest.raises(IntegrityError):
        load_package(files["manifest.json"], {**files, "shared.partition.bin": b"{}"}.__getitem__)
    with pytest.raises(PackageFormatError):
        load_package(b"{not json", files.__getitem__)


def test_every_change_of_content_changes_the_version(built: BuildResult, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    copy = tmp_path / "kb"
    shutil.copytree(KNOWLEDGE, copy)
    target = next(copy.rglob("*.md"))
    target.write_text(target.read_text(encoding="utf-8") + "\nLinha nova.\n", encoding="utf-8")
    assert build_knowledge(copy).package.knowledge_version != built.package.knowledge_version


def test_a_version_is_gathered_in_one_round_trip_and_a_missing_file_refuses_it(
    built: BuildResult,
) -> None:
    """Every resident file is requested before any arrives (a version of twenty partitions
    loaded one get after another cost twenty round trips); a missing one refuses the load."""
    files = built.package.files()
    in_flight, most = 0, 0

    async def get(name: str) -> bytes | None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)
        in_flight -= 1
        return files.get(name)

    manifest = Manifest.from_bytes(files["manifest.json"])
    resident = manifest.names_to_read()
    gathered = asyncio.run(fetch_package_files(get, "test", with_lazy=False))
    assert set(gathered) == {"manifest.json", *resident}
    assert most == min(len(resident), FETCH_BATCH) > 1

    async def without_one(name: str) -> bytes | None:
        return None if name == resident[-1] else files.get(name)

    with pytest.raises(PackageFormatError, match="has no"):
        asyncio.run(fetch_package_files(without_one, "test", with_lazy=False))


def test_a_cold_isolate_reads_the_manifest_and_the_shared_bundle_in_one_round_trip(
    built: BuildResult,
) -> None:
    """The shared partition's bundle has a fixed name, so it is asked for with the manifest:
    a cold query's load is one round trip, not two; a bundle the manifest does not list is
    never returned, and a damaged one is still refused when it is decoded."""
    files = built.package.files()
    before_any_arrived: list[str] = []  # asked for before the first answer came back
    arrived = 0

    async def get(name: str) -> bytes | None:
        nonlocal arrived
        if not arrived:
            before_any_arrived.append(name)
        await asyncio.sleep(0)
        arrived += 1
        return files.get(name)

    gathered = asyncio.run(
        fetch_package_files(get, "test", with_lazy=False, with_vectors=False, partitions={"shared"})
    )
    manifest = Manifest.from_bytes(files["manifest.json"])
    resident = manifest.names_to_read(with_vectors=False, partitions={"shared"})
    assert set(gathered) == {"manifest.json", *resident}
    assert sorted(before_any_arrived) == sorted(["manifest.json", *resident])  # one round trip
    assert arrived == len(before_any_arrived)  # and nothing after it
