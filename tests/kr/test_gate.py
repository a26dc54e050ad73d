"""``kr gate``, ``kr rollback`` and the gated ``kr build``, end to end on a local state.

The candidates are the sample knowledge built with a deliberately broken field weight or
analyzer: the gate must block them (exit 3, the active version unchanged) and say which queries
got worse; ``--force`` activates anyway and logs it; ``kr rollback`` restores the previous one.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from types import MappingProxyType

import pytest

from kr.activation import ACTIVATION_LOG
from kr.cli import GATE_BLOCKED_EXIT, main
from kr.gate.compare import DEFAULT_TOLERANCES, Tolerance, parse_tolerances
from router.adapters.local.state import LocalState
from router.analysis.analyzer import AnalyzerConfig
from router.compile.build import BuildResult, build_knowledge, write_package
from router.compile.indexer import BuildConfig
from router.errors import ConfigError
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY
from router.service import package_key
from tests.common import GOLDEN, KNOWLEDGE, write_doc

# The id fields carry the exact-id and system-term queries; without them those fall apart.
BROKEN_WEIGHTS = MappingProxyType(
    {**DEFAULT_FIELD_WEIGHTS, "title": 0.0, "semantic_id": 0.0, "heading": 0.0}
)


def _active(state: LocalState) -> str | None:
    return asyncio.run(state.kv.get(ACTIVE_VERSION_KEY))


def _golden_subset(tmp_path: Path, size: int = 40) -> Path:
    """Every third golden query (all categories): enough to see a regression, quick to run."""
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "golden-subset.jsonl"
    path.write_text("\n".join(lines[::3][:size]) + "\n", encoding="utf-8")
    return path


def _candidate(tmp_path: Path, config: BuildConfig) -> Path:
    return write_package(build_knowledge(KNOWLEDGE, config).package, tmp_path / "candidate")


def test_gate_blocks_a_broken_field_weight_and_keeps_the_active_version(
    state: LocalState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _active(state)
    folder = _candidate(tmp_path, BuildConfig(field_weights=BROKEN_WEIGHTS))
    golden = str(_golden_subset(tmp_path))
    args = ["gate", str(folder), "--state", str(state.root), "--golden", golden, "--activate"]
    assert main(args) == GATE_BLOCKED_EXIT
    captured = capsys.readouterr()
    assert "BLOCKED" in captured.out and "<< BLOCKS" in captured.out
    assert "golden hit@1" in captured.err and "not activated" in captured.err
    assert "rank 1 → " in captured.out  # the diff names queries and how they got worse
    assert "Traceback" not in captured.err
    assert _active(state) == before


def test_gate_blocks_a_broken_analyzer_unless_the_tolerances_allow_it(
    state: LocalState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _active(state)
    folder = _candidate(tmp_path, BuildConfig(analyzer=AnalyzerConfig(min_word_length=6)))
    candidate = json.loads((folder / "manifest.json").read_text())["knowledge_version"]
    assert candidate != before
    golden = str(_golden_subset(tmp_path))
    gate = ["gate", str(folder), "--state", str(state.root), "--golden", golden]
    # activation requested, gate blocks: nothing changes
    assert main([*gate, "--activate"]) == GATE_BLOCKED_EXIT
    captured = capsys.readouterr()
    assert "BLOCKED" in captured.out and "not activated" in captured.err
    assert _active(state) == before
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) is None
    assert not (state.root / ACTIVATION_LOG).exists()
    # a generous tolerance lets the same candidate through; `kr gate` alone never activates...
    loose = [f"--tolerance={m}=1" for m in DEFAULT_TOLERANCES]
    assert main([*gate, *loose]) == 0
    assert "PASSES" in capsys.readouterr().out
    assert _active(state) == before
    # ...and with --activate it does: so the blocked run above was refused, not a no-op
    assert main([*gate, *loose, "--activate"]) == 0
    assert "activated" in capsys.readouterr().out
    assert _active(state) == candidate
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) == before


def test_build_runs_the_gate_then_force_activates_and_logs(
    state: LocalState,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _active(state)
    golden = str(_golden_subset(tmp_path))
    monkeypatch.setattr("router.compile.indexer.DEFAULT_FIELD_WEIGHTS", BROKEN_WEIGHTS)
    build = ["build", str(KNOWLEDGE), "--state", str(state.root), "--embedder", "none"]
    assert main([*build, "--golden", golden]) == GATE_BLOCKED_EXIT
    out = capsys.readouterr().out
    assert "BLOCKED" in out and "active in" not in out
    assert _active(state) == before
    assert not (state.root / ACTIVATION_LOG).exists()
    # the blocked version stays published (inactive): `kr gate VERSION` re-runs the comparison
    blocked = re.search(r"candidate (kv-[0-9a-f]+) vs active", out)
    assert blocked is not None
    assert main(["gate", blocked.group(1), "--state", str(state.root), "--golden", golden]) == 3
    capsys.readouterr()

    assert main([*build, "--golden", golden, "--force"]) == 0
    out = capsys.readouterr().out
    forced = _active(state)
    assert forced != before and f"FORCED activation of {forced}" in out
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) == before
    [entry] = [json.loads(line) for line in (state.root / ACTIVATION_LOG).read_text().splitlines()]
    assert entry["forced"] is True and entry["version"] == forced and entry["previous"] == before

    # one command back to the previous version, which then answers the queries
    assert main(["rollback", "--state", str(state.root)]) == 0
    out = capsys.readouterr().out
    assert f"knowledge version {before} active" in out and f"rolled back from {forced}" in out
    assert _active(state) == before
    assert main(["query", "workPermit.validity", "--state", str(state.root), "--json"]) == 0
    response = json.loads(capsys.readouterr().out)
    assert response["knowledge_version"] == before
    assert response["results"][0]["doc_id"] == "workPermit.validity"
    log = (state.root / ACTIVATION_LOG).read_text().splitlines()
    assert json.loads(log[-1])["command"] == "rollback"


def test_a_good_candidate_passes_and_is_activated(
    state: LocalState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _active(state)
    kb = tmp_path / "kb"
    for source in KNOWLEDGE.rglob("*"):
        if source.is_file():
            target = kb / source.relative_to(KNOWLEDGE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    write_doc(
        kb,
        "extra/zz.md",
        "---\nsemanticId: zz.glossary\ntitle: Glossário de siglas internas\n---\n"
        "Zebrafita: fita zebrada usada para isolar a área.\n",
    )
    golden = str(_golden_subset(tmp_path))
    build = ["build", str(kb), "--state", str(state.root), "--embedder", "none"]
    assert main([*build, "--golden", golden]) == 0
    out = capsys.readouterr().out
    assert "PASSES" in out and "active in" in out
    after = _active(state)
    assert after != before
    [entry] = [json.loads(line) for line in (state.root / ACTIVATION_LOG).read_text().splitlines()]
    assert entry == {**entry, "reason": "gate passed", "forced": False, "previous": before}


def test_rollback_without_a_previous_version_is_a_clear_error(
    tmp_path: Path, built: BuildResult, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(tmp_path / "fresh")
    assert main(["rollback", "--state", state]) == 1
    assert "no_active_version" in capsys.readouterr().err
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "none"]) == 0
    assert "active in" in capsys.readouterr().out  # first version: nothing to gate
    assert main(["rollback", "--state", state]) == 1
    err = capsys.readouterr().err
    assert "no_previous_version" in err and "Traceback" not in err


def test_gate_input_errors_are_clear(
    state: LocalState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(state.root)
    assert main(["gate", str(tmp_path / "missing"), "--state", root]) == 1
    assert "neither a package folder nor a knowledge version" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["gate", str(tmp_path / "empty"), "--state", root]) == 1
    assert "not a package folder" in capsys.readouterr().err
    assert main(["gate", "kv-0000", "--state", root, "--tolerance", "hit@1"]) == 1
    assert "expected METRIC=MAX_DROP" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="unknown metric"):
        parse_tolerances(["speed=1"])
    assert parse_tolerances(["hit@1=0.05"])["hit@1"] == Tolerance(0.05)


def test_identical_candidate_is_already_active(
    state: LocalState, built: BuildResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_package(built.package, tmp_path / "same")
    assert main(["gate", str(folder), "--state", str(state.root)]) == 0
    assert "already active" in capsys.readouterr().out
    version = built.package.knowledge_version
    assert asyncio.run(state.blobs.get(package_key(version, "manifest.json"))) is not None


def test_publish_gates_against_the_targets_active_version(
    state: LocalState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kr publish``'s path: every step but the activation, the gate against what the target
    serves, then the activation alone; blocked → uploaded but inactive, --force → activated."""
    from kr.activation import ActivationLog, gated_publish
    from kr.gate.runs import GateSettings
    from router.errors import QualityGateError
    from router.ops.publish import MemoryJournal, PublishTarget
    from router.ops.publish_plan import ACTIVATE_STEP

    before = _active(state)
    target = PublishTarget(name="target", blobs=state.blobs, kv=state.kv)
    files = build_knowledge(KNOWLEDGE, BuildConfig(field_weights=BROKEN_WEIGHTS)).package.files()
    journal, log = MemoryJournal(), ActivationLog(tmp_path / "local-state")
    settings = GateSettings(golden=_golden_subset(tmp_path))
    options = {"activate_now": True, "settings": settings, "log": log}
    with pytest.raises(QualityGateError) as blocked:
        asyncio.run(gated_publish(files, target, journal, force=False, **options))
    assert "rank 1 → " in blocked.value.details
    assert _active(state) == before
    candidate = json.loads(files["manifest.json"])["knowledge_version"]
    done = asyncio.run(journal.done("target", candidate))
    assert ACTIVATE_STEP not in done and "blob:shared.partition.bin" in done

    report = asyncio.run(gated_publish(files, target, journal, force=True, **options))
    assert report.activated and report.previous_version == before
    assert _active(state) == candidate
    assert "FORCED activation" in capsys.readouterr().out
    [entry] = log.entries()
    assert entry["command"] == "publish" and entry["forced"] is True
