"""The errors of authentication: 401 for a missing or bad credential, 403 for a wrong tenant.

Why two classes: a 401 tells the caller to present (another) credential and carries
``WWW-Authenticate: Bearer``; a 403 says the credential is good but does not reach what was
asked, so presenting it again cannot help.
"""

from __future__ import annotations

from router.errors import RouterError

__all__ = ["AuthenticationError", "CredentialsRequiredError", "TenantMismatchError"]


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
