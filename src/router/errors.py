"""The router's error hierarchy: one base class, one stable code per kind of failure.

Why codes: the HTTP API answers ``{"error": {"code", "message"}}`` and clients branch on the code,
so each error class carries the code and the HTTP status it maps to.
"""

from __future__ import annotations

__all__ = [
    "BindingError",
    "ConfigError",
    "DatasetError",
    "EmbeddingModelError",
    "GenerationError",
    "IntegrityError",
    "InvalidRequestError",
    "KnowledgeFormatError",
    "NoActiveVersionError",
    "NoPreviousVersionError",
    "PackageFormatError",
    "QualityGateError",
    "RerankError",
    "RouterError",
]


class RouterError(Exception):
    """Base of every error the router raises on purpose."""

    code = "internal_error"
    http_status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_payload(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


class ConfigError(RouterError):
    """A configuration value is missing or out of range."""

    code = "config_error"


class InvalidRequestError(RouterError):
    """The caller sent a request the router cannot serve (4xx)."""

    code = "invalid_request"
    http_status = 400


class KnowledgeFormatError(RouterError):
    """A knowledge file breaks the input contract; names the file and line."""

    code = "knowledge_format"

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.detail = message


class PackageFormatError(RouterError):
    """A knowledge package is malformed, partial or of an unknown format version."""

    code = "package_format"
    http_status = 503


class IntegrityError(PackageFormatError):
    """A package artifact does not match the sha256 recorded in its manifest."""

    code = "package_integrity"


class NoActiveVersionError(RouterError):
    """No knowledge version has been activated yet."""

    code = "no_active_version"
    http_status = 503


class NoPreviousVersionError(NoActiveVersionError):
    """A rollback was asked for but no previous knowledge version is recorded."""

    code = "no_previous_version"
    http_status = 409


class EmbeddingModelError(RouterError):
    """The query embedder is not the model the package's vectors were computed with."""

    code = "embedding_model_mismatch"
    http_status = 409


class BindingError(RouterError):
    """A platform binding (KV, R2, D1, Vectorize, Workers AI) failed or answered nonsense.

    Why its own code: an outage of a backing service is neither the caller's fault (4xx) nor a
    bug in the router; clients may retry. When it happens while loading a new knowledge version,
    the service keeps serving the version it already holds.
    """

    code = "binding_failed"
    http_status = 503


class GenerationError(RouterError):
    """The LLM answer step failed: endpoint unreachable, timed out, or answered nonsense."""

    code = "generation_failed"
    http_status = 502


class RerankError(RouterError):
    """The reranker failed: endpoint or binding unreachable, timed out, or answered nonsense.

    Why its own code: reranking is an optional refinement (PRD §3), so the cascade catches it
    and keeps the fused order (the trace says so); the code names what degraded.
    """

    code = "rerank_failed"
    http_status = 502


class DatasetError(RouterError):
    """An evaluation set (golden JSONL, BEIR folder) is missing, incomplete or malformed.

    Why its own code: ``kr eval`` and ``kr gate`` read sets the user points them at; a wrong
    path or split is the user's to fix, and the message says what was expected where.
    """

    code = "dataset_error"
    http_status = 400


class QualityGateError(RouterError):
    """A candidate package scored below the active one by more than a tolerance.

    Why an error: the gate's verdict must stop an activation wherever it is asked for (``kr
    build``, ``kr publish``); ``details`` holds the readable diff (metrics and the queries that
    got worse) for the caller to print.
    """

    code = "quality_gate"
    http_status = 409

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details
