"""Configuration checks with the project's pinned wrangler, offline.

Why: ``wrangler.toml`` is code too — a typo in a binding, an environment that forgot one, or a
migration D1 cannot apply would only show at deploy time. ``wrangler deploy --dry-run`` bundles
the Worker exactly as a deploy would (without uploading), and ``d1 migrations apply --local``
applies ``migrations/d1`` to a fresh local database, as on a fresh clone.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from router.api.pages import PLAYGROUND_DIR
from tests.pyodide.client import ROOT, run_wrangler

WRANGLER_TOML = ROOT / "wrangler.toml"
MIGRATIONS = ROOT / "migrations" / "d1"
BINDINGS = {
    "kv_namespaces": "KNOWLEDGE_KV",
    "r2_buckets": "KNOWLEDGE_BUCKET",
    "d1_databases": "KNOWLEDGE_DB",
    "vectorize": "KNOWLEDGE_VECTORS",
}
AI_BINDING = "AI"
ENVIRONMENTS = ("dev", "production")


def _config() -> dict[str, Any]:
    with WRANGLER_TOML.open("rb") as handle:
        return tomllib.load(handle)


def _binding_names(section: dict[str, Any]) -> dict[str, list[str]]:
    names = {key: [b["binding"] for b in section.get(key, [])] for key in BINDINGS}
    names["ai"] = [section["ai"]["binding"]] if "ai" in section else []
    return names


def test_every_environment_declares_the_documented_bindings() -> None:
    config = _config()
    assert config["main"] == "src/entry.py"
    assert "python_workers" in config["compatibility_flags"]
    expected = {key: [name] for key, name in BINDINGS.items()} | {"ai": [AI_BINDING]}
    assert _binding_names(config) == expected
    assert set(config.get("env", {})) >= set(ENVIRONMENTS)
    for name in ENVIRONMENTS:
        env = config["env"][name]
        assert _binding_names(env) == expected, name  # bindings are not inherited
        assert env["d1_databases"][0]["migrations_dir"] == "migrations/d1"
    # Each deployment has its own resources.
    for key, field in (("r2_buckets", "bucket_name"), ("d1_databases", "database_name")):
        resources = [config[key][0][field]] + [
            config["env"][e][key][0][field] for e in ENVIRONMENTS
        ]
        assert len(set(resources)) == len(resources), key
    # The binding names are documented in the file's header and used by the Worker's adapters.
    text = WRANGLER_TOML.read_text(encoding="utf-8")
    adapters = (ROOT / "src" / "router" / "adapters" / "cloudflare" / "service.py").read_text(
        encoding="utf-8"
    )
    for name in [*BINDINGS.values(), AI_BINDING]:
        assert re.search(rf"^#\s+{name}\s", text, re.MULTILINE), f"{name} is not documented"
        assert f'"{name}"' in adapters, f"{name} is not the name the adapters read"


@pytest.mark.parametrize("environment", ["", *ENVIRONMENTS])
def test_deploy_dry_run_bundles_the_worker(environment: str, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    result = run_wrangler(["deploy", "--dry-run", "--outdir", str(out), f"--env={environment}"])
    log = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
    assert "--dry-run: exiting now." in log
    assert "[WARNING]" not in log, log  # e.g. an unknown key or a missing --env
    assert (out / "entry.py").is_file()
    assert (out / "router" / "api" / "app.py").is_file()
    assert (out / "router" / "adapters" / "cloudflare" / "service.py").is_file()
    for name in [*BINDINGS.values(), AI_BINDING]:
        assert f"env.{name}" in log, f"{name} missing from the bundle's bindings"
    if environment:
        resource = _config()["env"][environment]["r2_buckets"][0]["bucket_name"]
        assert resource in log
    # The playground's files go up as static assets in every environment (their _headers too).
    assets = [p for p in PLAYGROUND_DIR.iterdir() if p.is_file()]
    assert f"Read {len(assets)} files from the assets directory {PLAYGROUND_DIR}" in log


def test_the_worker_serves_the_playground_kr_serve_serves() -> None:
    """One folder for both servers: ``[assets]`` names the folder ``kr serve`` serves; the
    Worker runs first for no path, so /v1/* (no such file) reaches the app."""
    assets = _config()["assets"]
    assert (ROOT / assets["directory"]).resolve() == PLAYGROUND_DIR.resolve()
    assert "run_worker_first" not in assets and "binding" not in assets
    for name in ENVIRONMENTS:
        assert "assets" not in _config()["env"][name]  # inherited, not redefined
    assert not (PLAYGROUND_DIR / "v1").exists()


def _tables_created_by_migrations() -> set[str]:
    pattern = re.compile(r"CREATE TABLE(?: IF NOT EXISTS)?\s+(\w+)", re.IGNORECASE)
    tables: set[str] = set()
    for migration in sorted(MIGRATIONS.glob("*.sql")):
        tables.update(pattern.findall(migration.read_text(encoding="utf-8")))
    return tables


def test_d1_migrations_apply_to_a_fresh_local_database(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    expected = _tables_created_by_migrations()
    assert {"knowledge_versions", "knowledge_documents", "knowledge_sections"} <= expected
    local = ["--local", "--persist-to", state, "--env="]
    applied = run_wrangler(["d1", "migrations", "apply", "KNOWLEDGE_DB", *local])
    for migration in sorted(MIGRATIONS.glob("*.sql")):
        assert migration.name in applied.stdout
    query = "SELECT name FROM sqlite_master WHERE type = 'table'"
    listed = run_wrangler(["d1", "execute", "KNOWLEDGE_DB", *local, "--json", "--command", query])
    tables = {row["name"] for row in json.loads(listed.stdout)[0]["results"]}
    assert expected <= tables, expected - tables
    assert "d1_migrations" in tables
