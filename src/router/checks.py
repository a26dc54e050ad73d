"""Checks shared by the typed configs, each raising ``ConfigError`` naming field and allowed values.

Why on construction: a typo in a method name ("weigthed") or thresholds in the wrong order used to
run silently with another behaviour; a config that cannot be what its author meant is refused
where it is written, with the field's name, not at the first query.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping

from router.errors import ConfigError

__all__ = [
    "check_choice",
    "check_count",
    "check_keys",
    "check_order",
    "check_range",
    "check_weights",
]


def check_choice(owner: str, name: str, value: object, allowed: Collection[str]) -> None:
    """``value`` must be one of ``allowed``."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ConfigError(f"{owner}.{name} must be one of {choices}, not {value!r}")


def check_range(
    owner: str,
    name: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    *,
    above: float | None = None,
) -> None:
    """``low <= value <= high`` and ``value > above`` (each bound optional)."""
    wrong = (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value != value  # NaN
        or (low is not None and value < low)
        or (high is not None and value > high)
        or (above is not None and value <= above)
    )
    if wrong:
        bounds = []
        if above is not None:
            bounds.append(f"> {above}")
        if low is not None:
            bounds.append(f">= {low}")
        if high is not None:
            bounds.append(f"<= {high}")
        raise ConfigError(f"{owner}.{name} must be a number {' and '.join(bounds)}, not {value!r}")


def check_count(owner: str, name: str, value: int, minimum: int = 1) -> None:
    """``value`` must be a whole number of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{owner}.{name} must be a whole number >= {minimum}, not {value!r}")


def check_order(owner: str, names: tuple[str, ...], values: tuple[float, ...]) -> None:
    """``values`` must not increase: e.g. high ≥ medium ≥ abstain."""
    pairs = list(zip(names, values, strict=True))
    for (a, x), (b, y) in itertools.pairwise(pairs):
        if x < y:
            order = " >= ".join(names)
            raise ConfigError(f"{owner} needs {order}; {a}={x} is below {b}={y}")


def check_keys(
    owner: str, name: str, mapping: Mapping[str, object], allowed: Collection[str]
) -> None:
    """Every key of ``mapping`` must be one of ``allowed``."""
    unknown = sorted(k for k in mapping if k not in allowed)
    if unknown:
        choices = ", ".join(allowed)
        raise ConfigError(f"{owner}.{name} has unknown keys {unknown}; allowed: {choices}")


def check_weights(
    owner: str, name: str, mapping: Mapping[str, float], allowed: Collection[str] | None = None
) -> None:
    """Known keys (when ``allowed`` is given) and non-negative numbers."""
    if allowed is not None:
        check_keys(owner, name, mapping, allowed)
    for key, value in mapping.items():
        check_range(owner, f"{name}[{key!r}]", value, 0.0)
