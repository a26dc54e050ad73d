"""Load on the HTTP API: ``kr serve``'s app on loopback, driven by 1, 8 and 32 concurrent clients.

    python bench/load.py    # ~2 minutes: both cache modes, 1/8/32 clients, the attacker
    python bench/load.py --requests 200 --seconds 5 --modes uncached --clients 1 8
    python bench/load.py --modes uncached --clients 1 --attack-clients 4 --attack-rounds 3 \
        --attack-kinds random_words_60 typo_words_60      # issue 31's expensive question

What it does, in one run:

- builds the sample knowledge (``kr build knowledge --embedder e5``; the vector cache makes it a
  few seconds) into a temporary state folder, or uses ``--state DIR`` as it is, and creates one
  API key per tenant of the golden set with ``kr keys create``;
- starts the server in a child process on 127.0.0.1 and a free port: the app ``kr serve`` builds
  (``create_app(local_service(state), cors=..., auth=local_authenticator(state),
  shares=local_shares(...))``, anonymous on), served by uvicorn, without the access log; the
  levels and a first attacker run with each caller's share of serving time off (the server's
  capacity), a second server runs the attacker scenarios with kr serve's share on
  (``--caller-ms-per-s``); every client connects from a loopback address of its own
  (127.0.0.10…, the attacker 127.0.0.2), as distinct users would; ``--modes`` runs it with the
  query cache on (``cached``: the warm-up fills it, so nearly every request is a hit) and off
  (``uncached``: every request runs the cascade);
- per level of concurrency, ``N`` clients (one ``httpx.AsyncClient``, so one connection, each)
  ask the golden-set questions in a shuffled cycle until ``--requests`` are done or ``--seconds``
  have passed; tenant questions carry that tenant's key (``Authorization: Bearer``);
- reports throughput (completed requests / wall seconds), client-side p50/p99 latency, the
  router's own p50 (``metadata.latency_ms``), errors by status, and the server's VmRSS and VmHWM
  (``/proc/<pid>/status``) before and after the level;
- the attacker scenario (issue 12, item 4): 8 normal clients alone, then the same 8 with one more
  connection sending worst-case requests back to back (a 2,000-character random token, ~365
  random words, long digit strings, misspelt vocabulary words, accented letters, all within
  ``MAX_QUERY_CHARS``; ``--attack-kinds random_words_60 typo_words_60``: questions of 60 random
  or misspelt words instead, issue 31's expensive question), each phase with the same bounds;
  the normal callers' p50 side by side and the ratio (target: at most 2). Twice: with the
  normal callers back to back (they saturate the server by themselves, so the ratio mostly says
  what share of the CPU the attacker takes), and
  paced to ``--attack-load`` (0.5) of the single-client throughput, each starting a request every
  ``8 / (0.5 × req/s at 1 client)`` seconds (a server half idle without the attacker: the ratio
  says how long an attacker's request holds theirs up);
- then each attacker request once in this process, uncached: CPU ms, peak Python allocation
  (tracemalloc) and the functions that dominate it (cProfile).

Prints rich tables and writes ``bench/load.json`` (``--out``). The client runs in this process on
the same machine as the server, so at high concurrency both share the cores (see bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import json
import os
import platform
import random
import re
import shutil
import socket
import string
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "eval" / "golden.jsonl"
KNOWLEDGE = ROOT / "knowledge"
DEFAULT_OUT = ROOT / "bench" / "load.json"
MACHINE = "shared 2-core VM (other agents' jobs may run at the same time)"

HOST = "127.0.0.1"  # loopback only, never another interface
ATTACKER_ADDRESS = "127.0.0.2"  # the clients' own loopback addresses (callers are told apart)
WARM_UP_ADDRESS = "127.0.0.3"
REQUEST_FIELDS = ("tenant", "page", "tab", "focus", "date")
MODES = ("cached", "uncached")
ATTACK_KINDS = (
    "random_token",
    "random_words",
    "digit_token",
    "digit_words",
    "typo_words",
    "accents",
)
# Issue 31, finding 8: questions of 60 words, the API's limit in words rather than characters
# (what a caller asks who wants each question to cost the most per byte): random letters, and
# near misses of the sample's words (the typo repair's work). Not in the default cycle.
QUESTION_KINDS = ("random_words_60", "typo_words_60")
ALL_ATTACK_KINDS = (*ATTACK_KINDS, *QUESTION_KINDS)
QUESTION_WORDS = 60
MAX_QUERY_CHARS = 2000  # router.contract.MAX_QUERY_CHARS (checked in main)
REQUEST_TIMEOUT_S = 60.0


# -- the state and the server ----------------------------------------------------------------


def kr(*args: str) -> str:
    """Run ``kr`` (this interpreter's) and return its stdout; stderr is passed through on error."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from kr.cli import main; sys.exit(main())", *args],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"kr {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def prepare_state(state: Path, embedder: str, build: bool) -> None:
    if build:
        kr("build", str(KNOWLEDGE), "--state", str(state), "--embedder", embedder)
    elif not (state / "kv.sqlite").is_file():
        raise SystemExit(f"{state} holds no knowledge (no kv.sqlite): build it or omit --state")


def create_keys(state: Path, tenants: list[str]) -> dict[str, str]:
    """One fresh API key per tenant (``kr keys create``: the key alone on stdout)."""
    return {tenant: kr("keys", "create", "--tenant", tenant, "--state", str(state)).strip()
            for tenant in tenants}  # fmt: skip


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def serve_child(state: Path, port: int, cache: bool, share_ms: float | None) -> None:
    """The child process: ``kr serve``'s app (kr/commands/serve.py), the query cache on or off,
    each caller's share of serving time ``share_ms`` a second (None: kr serve's default)."""
    import uvicorn

    from kr.commands.serve import local_shares
    from kr.local import local_authenticator, local_service
    from router.api.app import create_app
    from router.api.cors import cors_policy_from

    app = create_app(
        local_service(state, cache=cache),
        cors=cors_policy_from(None),
        auth=local_authenticator(state),
        shares=local_shares(share_ms),
    )
    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False)


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def start_server(
    state: Path, cache: bool, work: Path, share_ms: float | None = None
) -> Server:
    port = free_port()
    log = work / f"server-{'cached' if cache else 'uncached'}-{share_ms}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--serve-child", str(port),
               "--state", str(state), "--cache", "on" if cache else "off"]  # fmt: skip
    if share_ms is not None:
        command += ["--caller-ms-per-s", str(share_ms)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    server = Server(process, f"http://{HOST}:{port}", log)
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server exited ({process.returncode}):\n{log.read_text()}")
            try:
                if (await client.get("/v1/health")).status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server not ready in 60 s:\n{log.read_text()}")


def memory_of(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS) of a process, in MiB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mib": found.get("VmRSS", 0.0), "hwm_mib": found.get("VmHWM", 0.0)}


# -- the requests ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """One request: its body and the tenant whose key it carries (None: anonymous)."""

    body: dict[str, Any]
    tenant: str | None = None
    kind: str = "golden"


def golden_asks(path: Path = GOLDEN) -> list[Ask]:
    asks = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        body = {"query": row["query"], **{f: row[f] for f in REQUEST_FIELDS if row.get(f)}}
        asks.append(Ask(body, row.get("tenant") or None))
    return asks


def vocabulary(folder: Path = KNOWLEDGE) -> list[str]:
    """The words of the sample knowledge (≥ 5 letters): the base of the misspelt attack."""
    words = set()
    for path in folder.rglob("*.md"):
        words.update(re.findall(r"[a-zà-ÿ]{5,}", path.read_text(encoding="utf-8").lower()))
    return sorted(words)


def _fill(rng: random.Random, word: Callable[[], str], limit: int = MAX_QUERY_CHARS) -> str:
    """Words joined by spaces up to ``limit`` characters."""
    parts: list[str] = []
    size = -1
    while True:
        item = word()
        if size + 1 + len(item) > limit:
            return " ".join(parts)
        parts.append(item)
        size += 1 + len(item)


def _misspell(rng: random.Random, word: str) -> str:
    at = rng.randrange(len(word))
    edit = rng.choice(("swap", "drop", "add", "change"))
    letter = rng.choice(string.ascii_lowercase)
    if edit == "swap" and at + 1 < len(word):
        return word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    if edit == "drop":
        return word[:at] + word[at + 1 :]
    if edit == "add":
        return word[:at] + letter + word[at:]
    return word[:at] + letter + word[at + 1 :]


def attack_query(kind: str, rng: random.Random, words: list[str]) -> str:
    """A worst-case query of ``kind``, new random text each time (never a cache hit)."""
    letters = string.ascii_lowercase
    if kind == "random_token":
        return "".join(rng.choices(letters, k=MAX_QUERY_CHARS))
    if kind == "random_words":  # ~365 words of 3-6 letters
        return _fill(rng, lambda: "".join(rng.choices(letters, k=rng.randint(3, 6))))
    if kind == "digit_token":
        return "".join(rng.choices(string.digits, k=MAX_QUERY_CHARS))
    if kind == "digit_words":
        return _fill(rng, lambda: "".join(rng.choices(string.digits, k=rng.randint(4, 12))))
    if kind == "typo_words":  # near misses of real words: the typo stage's most work
        return _fill(rng, lambda: _misspell(rng, rng.choice(words)))
    if kind == "accents":
        return "".join(rng.choices("aãáâàeéêiíoóôõuúüç", k=MAX_QUERY_CHARS))
    if kind == "random_words_60":  # 60 words of 3-8 letters
        return " ".join(
            "".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(QUESTION_WORDS)
        )
    if kind == "typo_words_60":
        return " ".join(_misspell(rng, rng.choice(words)) for _ in range(QUESTION_WORDS))
    raise ValueError(f"unknown attack kind {kind!r}; choose one of {ALL_ATTACK_KINDS}")


def attack_asks(seed: int, kinds: tuple[str, ...] = ATTACK_KINDS) -> Iterator[Ask]:
    """Attack requests cycling through ``kinds``, endlessly."""
    rng = random.Random(seed)
    words = vocabulary()
    while True:
        for kind in kinds:
            yield Ask({"query": attack_query(kind, rng, words)}, None, kind)


# -- driving the server ----------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100), interpolated; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@dataclass
class Tally:
    """What the responses of one group of callers said."""

    latencies_ms: list[float] = field(default_factory=list)  # client side, successful requests
    router_ms: list[float] = field(default_factory=list)  # metadata.latency_ms
    statuses: Counter[str] = field(default_factory=Counter)
    cache: Counter[str] = field(default_factory=Counter)
    budget_exceeded: int = 0
    vector: int = 0
    kinds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, ask: Ask, status: str, ms: float, body: dict[str, Any] | None) -> None:
        self.statuses[status] += 1
        if status != "200" or body is None:
            return
        self.latencies_ms.append(ms)
        self.kinds.setdefault(ask.kind, []).append(ms)
        meta = body.get("metadata") or {}
        if isinstance(meta.get("latency_ms"), int | float):
            self.router_ms.append(float(meta["latency_ms"]))
        self.cache[str(meta.get("cache", "?"))] += 1
        self.budget_exceeded += bool(meta.get("budget_exceeded"))
        self.vector += bool(meta.get("fallback_triggered"))

    def summary(self, seconds: float) -> dict[str, Any]:
        done = sum(self.statuses.values())
        errors = {status: n for status, n in self.statuses.items() if status != "200"}
        return {
            "requests": done,
            "ok": self.statuses.get("200", 0),
            "seconds": round(seconds, 2),
            "throughput_rps": round(done / seconds, 1) if seconds > 0 else None,
            "p50_ms": _ms(percentile(self.latencies_ms, 50)),
            "p99_ms": _ms(percentile(self.latencies_ms, 99)),
            "max_ms": _ms(max(self.latencies_ms, default=None)),
            "router_p50_ms": _ms(percentile(self.router_ms, 50)),
            "router_p99_ms": _ms(percentile(self.router_ms, 99)),
            "errors": sum(errors.values()),
            "errors_by_status": dict(sorted(errors.items())),
            "cache": dict(sorted(self.cache.items())),
            "budget_exceeded": self.budget_exceeded,
            "vector_fallbacks": self.vector,
        }


def connection(url: str, address: str) -> httpx.AsyncClient:
    """One keep-alive connection from ``address`` (a loopback address of its own: the server
    tells anonymous callers apart by their address, as it would distinct users)."""
    transport = httpx.AsyncHTTPTransport(
        local_address=address, limits=httpx.Limits(max_connections=1, max_keepalive_connections=1)
    )
    return httpx.AsyncClient(base_url=url, timeout=REQUEST_TIMEOUT_S, transport=transport)


def caller_address(number: int) -> str:
    return f"127.0.0.{10 + number}"


async def send(client: httpx.AsyncClient, ask: Ask, keys: dict[str, str], tally: Tally) -> None:
    headers = {"authorization": f"Bearer {keys[ask.tenant]}"} if ask.tenant else {}
    started = time.perf_counter()
    try:
        response = await client.post("/v1/query", json=ask.body, headers=headers)
        body = response.json() if response.status_code == 200 else None
        status = str(response.status_code)
    except httpx.HTTPError as exc:
        body, status = None, f"transport:{type(exc).__name__}"
    tally.add(ask, status, (time.perf_counter() - started) * 1000, body)


async def drive(
    url: str,
    asks: list[Ask],
    keys: dict[str, str],
    clients: int,
    max_requests: int,
    max_seconds: float,
    seed: int,
    attacker: Iterator[Ask] | None = None,
    interval_s: float = 0.0,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``clients`` connections asking ``asks`` in a shuffled cycle until ``max_requests`` are
    sent or ``max_seconds`` passed, back to back or (``interval_s``) each starting a request
    every ``interval_s`` (never sooner than its last one ended; the clients' starts are spread
    over one interval); with ``attacker``, one more connection sends its requests back to back
    while they run. Returns the normal callers' summary and the attacker's."""
    order = list(asks)
    random.Random(seed).shuffle(order)
    sent = 0
    normal, attack = Tally(), Tally()
    started = time.perf_counter()
    deadline = started + max_seconds
    finished = asyncio.Event()

    async def caller(number: int) -> None:
        nonlocal sent
        async with connection(url, caller_address(number)) as client:
            due = started + interval_s * number / clients
            while sent < max_requests and time.perf_counter() < deadline:
                if due > time.perf_counter():
                    await asyncio.sleep(min(due, deadline) - time.perf_counter())
                    continue
                ask = order[sent % len(order)]
                sent += 1
                await send(client, ask, keys, normal)
                due = max(due + interval_s, time.perf_counter()) if interval_s else due

    async def attacking(source: Iterator[Ask]) -> None:
        async with connection(url, ATTACKER_ADDRESS) as client:
            while not finished.is_set():
                await send(client, next(source), keys, attack)

    attacker_task = asyncio.create_task(attacking(attacker)) if attacker is not None else None
    if attacker_task is not None:
        await asyncio.sleep(0)  # the attacker's first request is on its way before the others
    await asyncio.gather(*(caller(number) for number in range(clients)))
    seconds = time.perf_counter() - started
    finished.set()
    attacked = None
    if attacker_task is not None:
        await attacker_task  # its last request completes (bounded by the request timeout)
        attacked = attack.summary(time.perf_counter() - started)
        attacked["by_kind_p50_ms"] = {k: _ms(percentile(v, 50)) for k, v in attack.kinds.items()}
    return normal.summary(seconds), attacked


async def warm_up(url: str, asks: list[Ask], keys: dict[str, str]) -> dict[str, Any]:
    """Every question once, one at a time: the package, the model and (cached mode) the cache."""
    tally = Tally()
    started = time.perf_counter()
    async with connection(url, WARM_UP_ADDRESS) as client:
        for ask in asks:
            await send(client, ask, keys, tally)
    return tally.summary(time.perf_counter() - started)


async def run_mode(
    mode: str, state: Path, work: Path, asks: list[Ask], keys: dict[str, str], args: Any
) -> dict[str, Any]:
    server = await start_server(state, mode == "cached", work, share_ms=0)
    try:
        result: dict[str, Any] = {"mode": mode, "memory_started": memory_of(server.pid)}
        result["warm_up"] = await warm_up(server.url, asks[: args.warm_up], keys)
        result["memory_warm"] = memory_of(server.pid)
        levels = []
        for clients in args.clients:
            before = memory_of(server.pid)
            summary, _ = await drive(
                server.url, asks, keys, clients, args.requests, args.seconds, args.seed
            )
            after = memory_of(server.pid)
            levels.append(
                {"clients": clients, **summary, "memory_before": before, "memory_after": after}
            )
        result["levels"] = levels
        single = [lv["throughput_rps"] for lv in levels if lv["clients"] == 1]
        rps = single[0] if single else result["warm_up"]["throughput_rps"]
        if args.attack_clients > 0:
            result["attack_share_off"] = await attack_scenarios(server, asks, keys, args, rps)
        result["memory_end"] = memory_of(server.pid)
    finally:
        server.stop()
    if args.attack_clients > 0:
        result["attack"] = await shared_attack(mode, state, work, asks, keys, args, rps)
        result["caller_ms_per_s"] = args.caller_ms_per_s  # the share "attack" ran with
    return result


async def shared_attack(
    mode: str,
    state: Path,
    work: Path,
    asks: list[Ask],
    keys: dict[str, str],
    args: Any,
    rps: float | None,
) -> dict[str, Any]:
    """The attacker scenarios again on a server with each caller's share of serving time on
    (kr serve's default, or ``--caller-ms-per-s``), paced as on the unshared server."""
    server = await start_server(state, mode == "cached", work, share_ms=args.caller_ms_per_s)
    try:
        await warm_up(server.url, asks[: args.warm_up], keys)
        return await attack_scenarios(server, asks, keys, args, rps)
    finally:
        server.stop()


async def attack_scenarios(
    server: Server,
    asks: list[Ask],
    keys: dict[str, str],
    args: Any,
    single_client_rps: float | None,
) -> dict[str, Any]:
    """The attacker against back-to-back normal callers (the server saturated by them alone)
    and, with ``--attack-load``, against callers paced to that fraction of the single-client
    throughput (the server mostly idle without the attacker)."""
    found = {"back_to_back": await attack_scenario(server, asks, keys, args, 0.0)}
    if args.attack_load > 0 and single_client_rps:
        interval = args.attack_clients / (args.attack_load * single_client_rps)
        found["paced"] = await attack_scenario(server, asks, keys, args, interval)
    return found


async def attack_scenario(
    server: Server, asks: list[Ask], keys: dict[str, str], args: Any, interval_s: float
) -> dict[str, Any]:
    """The normal callers alone, then with one attacker connection, ``--attack-rounds`` times
    alternating; the figures are the medians over the rounds."""
    alone, attacked, attacker = [], [], []
    source = attack_asks(args.seed, tuple(args.attack_kinds))
    bounds = (args.attack_clients, args.attack_requests, args.attack_seconds)
    for round_ in range(args.attack_rounds):
        seed = args.seed + round_
        summary, _ = await drive(server.url, asks, keys, *bounds, seed, interval_s=interval_s)
        alone.append(summary)
        before = memory_of(server.pid)
        summary, hostile = await drive(
            server.url, asks, keys, *bounds, seed, attacker=source, interval_s=interval_s
        )
        attacked.append({**summary, "memory_before": before, "memory_after": memory_of(server.pid)})
        attacker.append(hostile)
    p50_alone = _median([r["p50_ms"] for r in alone])
    p50_attacked = _median([r["p50_ms"] for r in attacked])
    ratio = round(p50_attacked / p50_alone, 2) if p50_alone and p50_attacked else None
    return {
        "clients": args.attack_clients,
        "interval_ms": round(interval_s * 1000, 1) if interval_s else None,
        "rounds": args.attack_rounds,
        "alone": alone,
        "attacked": attacked,
        "attacker": attacker,
        "p50_alone_ms": p50_alone,
        "p50_attacked_ms": p50_attacked,
        "p50_ratio": ratio,
        "p99_alone_ms": _median([r["p99_ms"] for r in alone]),
        "p99_attacked_ms": _median([r["p99_ms"] for r in attacked]),
        "target_ratio": 2.0,
        "meets_target": ratio is not None and ratio <= 2.0,
    }


def _median(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return _ms(percentile(found, 50))


# -- the attacker requests, profiled in this process ----------------------------------------


async def profile_attacks(
    state: Path, seed: int, kinds: tuple[str, ...] = ATTACK_KINDS, top: int = 8
) -> dict[str, Any]:
    """Each attack kind once against the uncached service in this process: CPU ms, peak Python
    allocation (tracemalloc) and the functions with the most own time (cProfile)."""
    from kr.local import local_service
    from router.contract import QueryRequest

    service = local_service(state, cache=False)
    rng = random.Random(seed + 1000)
    words = vocabulary()

    async def ask(query: str) -> Any:
        return await service.query(QueryRequest(query=query), record=False)

    await ask("Qual a validade padrão da APR?")  # the package and the model, loaded
    found: dict[str, Any] = {}
    for kind in kinds:
        query = attack_query(kind, rng, words)
        await ask(attack_query(kind, rng, words))  # any first-use work of this kind, outside
        cpu = time.process_time()
        wall = time.perf_counter()
        response = await ask(query)
        cpu_ms = (time.process_time() - cpu) * 1000
        wall_ms = (time.perf_counter() - wall) * 1000
        tracemalloc.start()
        await ask(query)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        profiler = cProfile.Profile()
        profiler.enable()
        await ask(query)
        profiler.disable()
        found[kind] = {
            "chars": len(query),
            "cpu_ms": round(cpu_ms, 1),
            "wall_ms": round(wall_ms, 1),
            "router_ms": response.metadata.latency_ms,
            "budget_exceeded": response.metadata.budget_exceeded,
            "peak_alloc_mib": round(peak / 2**20, 2),
            "stages_ms": _stage_ms(response.trace),
            "top_own_time": _top(profiler, top),
        }
    return found


def _stage_ms(trace: dict[str, Any]) -> dict[str, float]:
    stages = trace.get("stages") or {}
    times = {
        name: float(s["ms"])
        for name, s in stages.items()
        if isinstance(s, dict) and isinstance(s.get("ms"), int | float) and s["ms"] >= 0.5
    }
    return dict(sorted(times.items(), key=lambda item: -item[1]))


def _top(profiler: cProfile.Profile, count: int) -> list[dict[str, Any]]:
    profiler.create_stats()  # .stats: {(file, line, name): (cc, calls, own s, cumulative s, _)}
    rows = sorted(profiler.stats.items(), key=lambda item: -item[1][2])[:count]
    out = []
    for (path, line, name), (_, calls, own, cumulative, _) in rows:
        where = re.sub(r".*/(src|site-packages|lib/python3\.\d+)/", "", path)
        where = "builtin" if where == "~" else where
        out.append(
            {
                "function": f"{where}:{line}({name})",
                "calls": calls,
                "own_ms": round(own * 1000, 1),
                "cumulative_ms": round(cumulative * 1000, 1),
            }
        )
    return out


# -- report ----------------------------------------------------------------------------------


def conditions() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args],
                              capture_output=True, text=True, check=False)  # fmt: skip
        return done.stdout.strip()

    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else ""),
        "python": platform.python_version(),
        "machine": MACHINE,
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _errors(summary: dict[str, Any]) -> str:
    found = summary["errors_by_status"]
    return ", ".join(f"{s}×{n}" for s, n in found.items()) if found else "0"


def _attack_rows(attacks: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str, str, Any]]:
    """(mode, share, variant, scenario) for the attacker tables: share off, then on."""
    for mode in attacks:
        for key, share in (("attack_share_off", "off"), ("attack", "on")):
            found = mode.get(key) or {}
            label = share if share == "off" else f"{mode.get('caller_ms_per_s') or 250:g} ms/s"
            for variant, scenario in found.items():
                yield mode, label, variant, scenario


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title="Load: kr serve's app on loopback, golden-set questions")
    for name in ("mode", "clients", "requests", "s", "req/s", "p50 ms", "p99 ms", "router p50",
                 "errors", "cache hits", "vector", "RSS MiB before → after",
                 "HWM MiB"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("mode", "errors") else "right")
    for mode in report["modes"]:
        for level in mode["levels"]:
            hits = sum(n for k, n in level["cache"].items() if k in ("memory", "kv"))
            before, after = level["memory_before"], level["memory_after"]
            table.add_row(
                mode["mode"], str(level["clients"]), _num(level["requests"]),
                _num(level["seconds"]), _num(level["throughput_rps"]), _num(level["p50_ms"]),
                _num(level["p99_ms"]), _num(level["router_p50_ms"]), _errors(level),
                f"{hits}/{level['ok']}", str(level["vector_fallbacks"]),
                f"{before['rss_mib']} → {after['rss_mib']}",
                str(after["hwm_mib"]),
            )  # fmt: skip
    console.print(table)
    attacks = [m for m in report["modes"] if "attack" in m]
    if attacks:
        table = Table(title="One attacker connection vs the normal callers (medians over rounds)")
        for name in ("mode", "normal callers", "requests alone / attacked", "p50 alone",
                     "p50 attacked", "ratio (≤ 2)", "p99 alone", "p99 attacked", "attacker req",
                     "attacker p50 ms", "attacker statuses", "RSS / HWM MiB after"):  # fmt: skip
            table.add_column(
                name, justify="left" if name in ("mode", "normal callers") else "right"
            )
        for mode, share, variant, a in _attack_rows(attacks):
            hostile = [h for h in a["attacker"] if h]
            statuses: Counter[str] = Counter()
            for h in hostile:
                statuses.update({"200": h["ok"], **h["errors_by_status"]})
            after = a["attacked"][-1]["memory_after"]
            pace = f"each every {a['interval_ms']:.0f} ms" if a["interval_ms"] else variant
            table.add_row(
                f"{mode['mode']}, share {share}", f"{a['clients']}, {pace.replace('_', ' ')}",
                f"{sum(r['requests'] for r in a['alone'])} / "
                f"{sum(r['requests'] for r in a['attacked'])}",
                _num(a["p50_alone_ms"]), _num(a["p50_attacked_ms"]), _num(a["p50_ratio"], 2),
                _num(a["p99_alone_ms"]), _num(a["p99_attacked_ms"]),
                _num(sum(h["requests"] for h in hostile)),
                _num(_median([h["p50_ms"] for h in hostile])),
                ", ".join(f"{s}×{n}" for s, n in sorted(statuses.items()) if n),
                f"{after['rss_mib']} / {after['hwm_mib']}",
            )  # fmt: skip
        console.print(table)
    if report.get("attack_profile"):
        table = Table(title="Each attack request once, in process, uncached")
        for name in ("kind", "chars", "CPU ms", "router ms", "peak alloc MiB", "slowest stages ms",
                     "most own time (cProfile)"):  # fmt: skip
            table.add_column(name, justify="left" if name in ("kind", "most own time") else "right")
        for kind, row in report["attack_profile"].items():
            stages = ", ".join(f"{k} {v:.0f}" for k, v in list(row["stages_ms"].items())[:3])
            top = row["top_own_time"][0] if row["top_own_time"] else {}
            name = str(top.get("function", "")).rsplit("/", 1)[-1]
            table.add_row(
                kind, str(row["chars"]), _num(row["cpu_ms"]), _num(row["router_ms"]),
                _num(row["peak_alloc_mib"], 2), stages,
                f"{name} {top.get('own_ms', '')} ms",
            )  # fmt: skip
        console.print(table)


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--requests", type=int, default=1500, help="at most, per level")
    p.add_argument("--seconds", type=float, default=6.0, help="at most, per level")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--attack-clients", type=int, default=8, help="0: no attacker scenario")
    p.add_argument("--attack-requests", type=int, default=1500, help="at most, per phase")
    p.add_argument("--attack-seconds", type=float, default=6.0, help="at most, per phase")
    p.add_argument("--attack-rounds", type=int, default=1, help="alone/attacked pairs")
    p.add_argument(
        "--attack-kinds",
        nargs="+",
        choices=ALL_ATTACK_KINDS,
        default=list(ATTACK_KINDS),
        help="what the attacker sends, in turn (default: the 2,000-character kinds; "
        f"{', '.join(QUESTION_KINDS)}: questions of {QUESTION_WORDS} words)",
    )
    p.add_argument(
        "--attack-load",
        type=float,
        default=0.5,
        help="paced variant: the normal callers' load, a fraction of the single-client "
        "throughput (0: back to back only)",
    )
    p.add_argument("--warm-up", type=int, default=None, help="questions (default: all)")
    p.add_argument("--no-profile", action="store_true", help="skip the in-process profile")
    p.add_argument("--state", type=Path, help="a built state folder, used as is (keys added)")
    p.add_argument("--embedder", default="e5", choices=("e5", "hash", "none"))
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--quiet", action="store_true", help="no tables")
    p.add_argument(
        "--caller-ms-per-s",
        type=float,
        default=None,
        help="the attacker scenarios' per-caller share (default: kr serve's); the levels and "
        "the 'share off' attacker runs use 0",
    )
    p.add_argument("--serve-child", type=int, metavar="PORT", help=argparse.SUPPRESS)
    p.add_argument("--cache", choices=("on", "off"), default="on", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if min(args.clients) < 1 or args.requests < 1 or args.seconds <= 0 or args.attack_rounds < 1:
        p.error("clients, requests, seconds and rounds must be positive")
    return args


async def measure(args: argparse.Namespace, state: Path, work: Path) -> dict[str, Any]:
    asks = golden_asks()
    tenants = sorted({a.tenant for a in asks if a.tenant})
    keys = create_keys(state, tenants)
    report: dict[str, Any] = {
        "conditions": conditions(),
        "settings": {
            "clients": args.clients,
            "requests": args.requests,
            "seconds": args.seconds,
            "attack_clients": args.attack_clients,
            "attack_requests": args.attack_requests,
            "attack_seconds": args.attack_seconds,
            "attack_rounds": args.attack_rounds,
            "attack_load": args.attack_load,
            "embedder": args.embedder if args.state is None else "as built",
            "questions": len(asks),
            "tenant_questions": sum(1 for a in asks if a.tenant),
            "attack_kinds": list(args.attack_kinds),
        },
        "modes": [],
    }
    for mode in args.modes:
        report["modes"].append(await run_mode(mode, state, work, asks, keys, args))
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_child is not None:
        serve_child(args.state, args.serve_child, args.cache == "on", args.caller_ms_per_s)
        return 0
    from router.contract import MAX_QUERY_CHARS as limit

    assert limit == MAX_QUERY_CHARS, f"router.contract.MAX_QUERY_CHARS is now {limit}"
    work = Path(tempfile.mkdtemp(prefix="kr-load-"))
    try:
        state = args.state or work / "state"
        prepare_state(state, args.embedder, build=args.state is None)
        report = asyncio.run(measure(args, state, work))
        if not args.no_profile:
            kinds = tuple(args.attack_kinds)
            report["attack_profile"] = asyncio.run(profile_attacks(state, args.seed, kinds))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if not args.quiet:
        print_report(report)
        print(f"written {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
