"""Vectorize metadata filters: validation and matching, in pure Python.

Why here, and why pure: the Worker forwards filters to Vectorize, while the local index and the
tests evaluate them in-process; both must agree on what a filter means and on which filters are
malformed, so the rules live in one sans-I/O module that also runs inside Pyodide (no numpy).

The semantics follow Cloudflare's "Metadata filtering" reference:

* top-level keys are ANDed; a value that is not an object is an implicit ``$eq``;
* operators are ``$eq $ne $in $nin $lt $lte $gt $gte``; one key holds one operator, or one lower
  bound (``$gt``/``$gte``) together with one upper bound (``$lt``/``$lte``), which are ANDed;
* a dotted key addresses nested metadata (``"a.b"`` reads ``metadata["a"]["b"]``);
* ``$eq``/``$ne`` take a string, number, boolean or null; ``$in``/``$nin`` a non-empty list of
  those; range operators a number or a string;
* the filter is a non-empty object whose compact JSON is under 2,048 bytes; keys are non-empty,
  at most 512 characters, never start with ``$`` and never contain ``"``.

Matching is type-strict, as in a JSON index: numbers equal numbers (``1 == 1.0``), booleans are
not numbers, ranges compare numbers with numbers and strings with strings (other pairs never
match). ``$ne`` and ``$nin`` match a missing field; ``$eq``, ``$in`` and ranges do not, and a
missing field is not ``null``.

Known differences from the hosted service: Vectorize only filters on properties that have a
metadata index and compares only the first 64 bytes of indexed strings; here every property is
filterable and strings are compared whole.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from router.errors import InvalidRequestError

__all__ = [
    "FILTER_OPERATORS",
    "MAX_FILTER_JSON_BYTES",
    "MAX_FILTER_KEY_CHARS",
    "matches",
    "validate_filter",
]

EQUALITY_OPERATORS = frozenset({"$eq", "$ne"})
SET_OPERATORS = frozenset({"$in", "$nin"})
LOWER_BOUNDS = frozenset({"$gt", "$gte"})
UPPER_BOUNDS = frozenset({"$lt", "$lte"})
FILTER_OPERATORS = EQUALITY_OPERATORS | SET_OPERATORS | LOWER_BOUNDS | UPPER_BOUNDS
"""Every operator Vectorize accepts; anything else (``$regex``, ``$and``…) is rejected."""

MAX_FILTER_JSON_BYTES = 2048
"""Vectorize rejects filters whose compact JSON is 2,048 bytes or more."""

MAX_FILTER_KEY_CHARS = 512

_ABSENT: Any = object()
"""Stands for a missing field, which is distinct from an explicit ``null``."""


# --- validation -------------------------------------------------------------------------------


def validate_filter(filter: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidRequestError` naming the first problem in ``filter``.

    Why validate up front: a malformed filter must fail the request the same way locally and on
    Vectorize, instead of silently matching nothing.
    """
    if not isinstance(filter, Mapping):
        raise InvalidRequestError(f"filter must be an object, not {type(filter).__name__}")
    if not filter:
        raise InvalidRequestError("filter must be a non-empty object")
    for key, condition in filter.items():
        _validate_key(key)
        _validate_condition(key, condition)
    size = len(json.dumps(filter, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size >= MAX_FILTER_JSON_BYTES:
        raise InvalidRequestError(
            f"filter is {size} bytes of JSON; it must be under {MAX_FILTER_JSON_BYTES} bytes"
        )


def _validate_key(key: Any) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidRequestError(f"filter keys must be non-empty strings, got {key!r}")
    if len(key) > MAX_FILTER_KEY_CHARS:
        raise InvalidRequestError(f"filter key is longer than {MAX_FILTER_KEY_CHARS} characters")
    if key.startswith("$"):
        raise InvalidRequestError(
            f"filter key {key!r} starts with '$'; operators go inside a key's object "
            "and logical operators such as $and/$or are not supported"
        )
    if '"' in key:
        raise InvalidRequestError(f"filter key {key!r} must not contain '\"'")
    if "" in key.split("."):
        raise InvalidRequestError(
            f"filter key {key!r} has an empty segment; '.' only separates nested properties"
        )


def _validate_condition(key: str, condition: Any) -> None:
    if not isinstance(condition, Mapping):
        _validate_scalar(key, "$eq", condition)
        return
    if not condition:
        raise InvalidRequestError(f"filter on {key!r} has no operator")
    for operator, operand in condition.items():
        _validate_operator(key, operator, operand)
    _validate_combination(key, condition)


def _validate_operator(key: str, operator: Any, operand: Any) -> None:
    if operator not in FILTER_OPERATORS:
        supported = " ".join(sorted(FILTER_OPERATORS))
        raise InvalidRequestError(
            f"unknown filter operator {operator!r} on {key!r}; supported: {supported}"
        )
    if operator in EQUALITY_OPERATORS:
        _validate_scalar(key, operator, operand)
    elif operator in SET_OPERATORS:
        _validate_list(key, operator, operand)
    else:
        _validate_bound(key, operator, operand)


def _validate_scalar(key: str, operator: str, operand: Any) -> None:
    if operand is None or isinstance(operand, str | bool):
        return
    if isinstance(operand, int | float):
        _require_finite(key, operator, operand)
        return
    raise InvalidRequestError(
        f"{operator} on {key!r} takes a string, number, boolean or null, "
        f"not {type(operand).__name__}"
    )


def _validate_list(key: str, operator: str, operand: Any) -> None:
    if not isinstance(operand, list | tuple):
        raise InvalidRequestError(f"{operator} on {key!r} takes a list of values")
    if not operand:
        raise InvalidRequestError(f"{operator} on {key!r} takes a non-empty list")
    for item in operand:
        _validate_scalar(key, operator, item)


def _validate_bound(key: str, operator: str, operand: Any) -> None:
    if isinstance(operand, str):
        return
    if isinstance(operand, int | float) and not isinstance(operand, bool):
        _require_finite(key, operator, operand)
        return
    raise InvalidRequestError(
        f"{operator} on {key!r} takes a number or a string, not {type(operand).__name__}"
    )


def _require_finite(key: str, operator: str, number: float) -> None:
    if not math.isfinite(number):
        raise InvalidRequestError(f"{operator} on {key!r} takes a finite number")


def _validate_combination(key: str, condition: Mapping[str, Any]) -> None:
    """One operator per key, except a lower bound paired with an upper bound (a range)."""
    if len(condition) == 1:
        return
    lower = [op for op in condition if op in LOWER_BOUNDS]
    upper = [op for op in condition if op in UPPER_BOUNDS]
    if len(condition) != 2 or len(lower) != 1 or len(upper) != 1:
        raise InvalidRequestError(
            f"filter on {key!r} combines {', '.join(condition)}; a key takes one operator, "
            "or one of $gt/$gte together with one of $lt/$lte"
        )
    bounds = [condition[lower[0]], condition[upper[0]]]
    if len({_kind(bound) for bound in bounds}) != 1:
        raise InvalidRequestError(
            f"range on {key!r} mixes a number and a string; both bounds must be of one type"
        )


# --- matching ---------------------------------------------------------------------------------


def matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """True when ``metadata`` satisfies every key of a filter that passed :func:`validate_filter`.

    Why not validate here: the index validates once per query and then matches every row.
    """
    return all(
        _matches_condition(_lookup(metadata, key), condition) for key, condition in filter.items()
    )


def _lookup(metadata: Mapping[str, Any], dotted_key: str) -> Any:
    """Follow the dotted path into nested objects; ``_ABSENT`` when any step is missing."""
    value: Any = metadata
    for part in dotted_key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _matches_condition(value: Any, condition: Any) -> bool:
    if not isinstance(condition, Mapping):
        return _apply("$eq", value, condition)
    return all(_apply(operator, value, operand) for operator, operand in condition.items())


def _apply(operator: str, value: Any, operand: Any) -> bool:
    if operator == "$ne":
        return value is _ABSENT or not _equal(value, operand)
    if operator == "$nin":
        return value is _ABSENT or not any(_equal(value, item) for item in operand)
    if value is _ABSENT:
        return False
    if operator == "$eq":
        return _equal(value, operand)
    if operator == "$in":
        return any(_equal(value, item) for item in operand)
    return _in_range(operator, value, operand)


def _in_range(operator: str, value: Any, bound: Any) -> bool:
    kind = _kind(value)
    if kind not in ("number", "string") or kind != _kind(bound):
        return False
    if operator == "$lt":
        return bool(value < bound)
    if operator == "$lte":
        return bool(value <= bound)
    if operator == "$gt":
        return bool(value > bound)
    return bool(value >= bound)


def _equal(value: Any, operand: Any) -> bool:
    kind = _kind(value)
    return kind != "other" and kind == _kind(operand) and bool(value == operand)


def _kind(value: Any) -> str:
    """The JSON type of a value; booleans are not numbers, unlike in Python."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"
