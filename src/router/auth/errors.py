"""The errors of authentication: 401 for a missing or bad credential, 403 for a wrong tenant,
503 when the key store cannot say.

Why three classes: a 401 tells the caller to present (another) credential and carries
``WWW-Authenticate: Bearer``; a 403 says the credential is good but does not reach what was
asked, so presenting it again cannot help; a 503 says nothing about the credential — the
store that would check it is down — and asks the caller to retry (``Retry-After``).
"""

from __future__ import annotations

from router.errors import RouterError

__all__ = [
    "AdminRequiredError",
    "AuthenticationError",
    "CredentialsRequiredError",
    "KeyStoreUnavailableError",
    "TenantMismatchError",
]


class AuthenticationError(RouterError):
    """The credential is malformed, unknown, revoked, expired or badly signed (401)."""

    code = "unauthorized"
    http_status = 401


class CredentialsRequiredError(AuthenticationError):
    """No credential, where one is needed: anonymous access is off, or a tenant was asked for."""

    code = "credentials_required"


class TenantMismatchError(RouterError):
    """The request names a tenant other than its credential's (403)."""

    code = "tenant_mismatch"
    http_status = 403


class KeyStoreUnavailableError(RouterError):
    """The key store failed (an outage, a locked or damaged file): the key is neither accepted
    nor refused. 503 with ``Retry-After``; the request is never served, as the key's tenant or
    as anonymous."""

    code = "key_store_unavailable"
    http_status = 503

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class AdminRequiredError(RouterError):
    """An operator's route (the evaluation report) on a server without an admin token: it is
    off, whatever the caller presents (403)."""

    code = "admin_required"
    http_status = 403
