"""Each caller's share of the server's time: one busy caller cannot take it from the others.

Why: the per-request bounds (query length, typo candidates, expansions, the latency budget)
make every request cheap, but not equally cheap — a question that reaches the vector stage
costs ~10× one answered lexically, and a single connection sending such questions back to back
kept a core busy and raised every other caller's median latency almost fourfold
(bench/load.py). A per-caller token bucket over the time the server spends on the caller's
requests caps that: a caller may use ``ms_per_s`` milliseconds of serving time a second, with
bursts of up to ``burst_ms``; past that its next request waits (no CPU is spent waiting) until
its debt is paid, or is refused with 429 and ``Retry-After`` when the wait would be longer than
``max_wait_s``. Concurrent requests are bounded per caller too, since the debt is only known
once a request ends.

Who "a caller" is: the credential (an API key or a JWT subject) when there is one, otherwise
the client address — the connection's peer locally, or a header the platform sets and callers
cannot forge (``cf-connecting-ip`` behind Cloudflare), never one a caller could vary at will.
State is a bounded LRU of callers, so a flood of new addresses costs bounded memory.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from router.checks import check_range
from router.errors import ConfigError, RouterError
from router.lru import LruCache

__all__ = [
    "DEFAULT_SHARE",
    "CallerShares",
    "RateLimitedError",
    "ShareConfig",
    "share_config_from",
]


class RateLimitedError(RouterError):
    """The caller used more than its share of serving time, or has too many requests open."""

    code = "rate_limited"
    http_status = 429

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ShareConfig:
    """A caller's share: ``ms_per_s`` of serving time a second (0: no limit), ``burst_ms`` of
    credit, at most ``max_in_flight`` requests open, waits of at most ``max_wait_s``."""

    ms_per_s: float = 250.0
    burst_ms: float = 1_000.0
    max_wait_s: float = 2.0
    max_in_flight: int = 4
    callers: int = 10_000

    def __post_init__(self) -> None:
        check_range("ShareConfig", "ms_per_s", self.ms_per_s, 0, 1_000_000)
        check_range("ShareConfig", "burst_ms", self.burst_ms, 0, 3_600_000)
        check_range("ShareConfig", "max_wait_s", self.max_wait_s, 0, 60)
        check_range("ShareConfig", "max_in_flight", self.max_in_flight, 1, 10_000)
        check_range("ShareConfig", "callers", self.callers, 1, 10_000_000)

    @property
    def enabled(self) -> bool:
        return self.ms_per_s > 0


DEFAULT_SHARE = ShareConfig()
"""A quarter of a core a caller, sustained: an interactive user asks a question every few
seconds at a few to ~50 ms each; a server-side app proxying many users should raise it
(``KR_CALLER_MS_PER_S``) or give each user a credential."""


@dataclass
class _Account:
    debt_ms: float
    updated: float
    in_flight: int = 0


class CallerShares:
    """The accounts of recent callers; ``admit`` before a request, ``settle`` after it."""

    def __init__(
        self, config: ShareConfig = DEFAULT_SHARE, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self._clock = clock
        self._accounts: LruCache[str, _Account] = LruCache(config.callers)

    async def admit(self, caller: str) -> None:
        """Wait for the caller's debt to fall within its burst, then count the request open;
        ``RateLimitedError`` when that wait is too long or too many of its requests are open."""
        if not self.config.enabled:
            return
        account = self._account(caller)
        if account.in_flight >= self.config.max_in_flight:
            raise RateLimitedError(
                f"at most {self.config.max_in_flight} requests of one caller at a time", 1.0
            )
        wait_s = self._wait_s(account)
        if wait_s > self.config.max_wait_s:
            raise RateLimitedError(
                f"this caller used its share of the server (retry in {math.ceil(wait_s)} s)",
                wait_s,
            )
        account.in_flight += 1
        if wait_s > 0:
            try:
                await asyncio.sleep(wait_s)
            except BaseException:
                account.in_flight -= 1
                raise

    def settle(self, caller: str, spent_ms: float) -> None:
        """Charge a finished request's serving time and close it.

        One charge is at most what ``max_wait_s`` pays back (``ms_per_s × max_wait_s``): a
        caller sending one request at a time is slowed to its share, never refused, whatever
        one request cost (the first one after a start also loads the package). With
        ``max_wait_s`` 0 nobody waits: a caller over its burst is refused until it has paid."""
        if not self.config.enabled:
            return
        account = self._account(caller)
        account.in_flight = max(0, account.in_flight - 1)
        charge = max(0.0, spent_ms)
        if self.config.max_wait_s > 0:
            charge = min(charge, self.config.ms_per_s * self.config.max_wait_s)
        account.debt_ms += charge

    def debt_ms(self, caller: str) -> float:
        """The caller's debt now (0 for one not seen recently)."""
        account = self._accounts.get(caller)
        return self._paid_down(account) if account is not None else 0.0

    def _account(self, caller: str) -> _Account:
        account = self._accounts.get(caller)
        if account is None:
            account = _Account(debt_ms=0.0, updated=self._clock())
            self._accounts.put(caller, account)
        account.debt_ms = self._paid_down(account)
        account.updated = self._clock()
        return account

    def _paid_down(self, account: _Account) -> float:
        elapsed = max(0.0, self._clock() - account.updated)
        return max(0.0, account.debt_ms - elapsed * self.config.ms_per_s)

    def _wait_s(self, account: _Account) -> float:
        over = account.debt_ms - self.config.burst_ms
        return over / self.config.ms_per_s if over > 0 else 0.0


Getter = Callable[[str], str | None]


def share_config_from(get: Getter, default: ShareConfig = DEFAULT_SHARE) -> ShareConfig:
    """``KR_CALLER_MS_PER_S`` (0: off) and ``KR_CALLER_BURST_MS`` over ``default``."""
    return ShareConfig(
        ms_per_s=_number(get, "KR_CALLER_MS_PER_S", default.ms_per_s),
        burst_ms=_number(get, "KR_CALLER_BURST_MS", default.burst_ms),
        max_wait_s=default.max_wait_s,
        max_in_flight=default.max_in_flight,
        callers=default.callers,
    )


def _number(get: Getter, name: str, default: float) -> float:
    raw = (get(name) or "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
