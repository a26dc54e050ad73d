"""From an ``Authorization`` header to a principal, and from a principal to the request's tenant.

Why the tenant comes from here only: a tenant's documents are served to whoever names the
tenant, so the name must come from something the caller cannot forge — an API key stored for
that tenant, or a JWT signed by the configured issuer. A body ``tenant`` is at most a
consistency check (403 when it differs from the credential's).
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from router.auth.api_keys import (
    ApiKey,
    KeyStore,
    hash_key,
    key_id_of,
    key_matches,
)
from router.auth.config import AuthConfig
from router.auth.errors import (
    AdminRequiredError,
    AuthenticationError,
    CredentialsRequiredError,
    KeyStoreUnavailableError,
    TenantMismatchError,
)
from router.auth.jwt import verify_jwt
from router.errors import BindingError
from router.knowledge.tenants import is_tenant_id
from router.lru import LruCache

__all__ = [
    "KEY_CACHE_ENTRIES",
    "KEY_STORE_RETRY_S",
    "Authenticator",
    "Principal",
    "tenant_for",
]

KEY_CACHE_ENTRIES = 256
KEY_STORE_RETRY_S = 2.0
"""Seconds keyed requests are answered 503 at once after the key store failed, before it is
asked again: a locked or damaged store costs one bounded wait per interval, not one per
request (each would hold a thread for the store's whole timeout)."""
PrincipalKind = Literal["anonymous", "api_key", "jwt"]


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant the credential names (None: anonymous, shared knowledge)."""

    kind: PrincipalKind
    tenant: str | None = None
    subject: str = ""


ANONYMOUS = Principal("anonymous")


class Authenticator:
    """Checks bearer credentials: API keys against the key store, JWTs against the settings.

    Valid keys are remembered for ``config.key_cache_ttl_s`` (bounded LRU, by key hash), so a
    busy isolate reads the store about once per key and TTL; a revoked key is refused once its
    entry expires. Unknown or revoked keys are never cached (nothing to gain for an attacker).

    When the store fails (``BindingError``) a key it has not vouched for is neither accepted nor
    refused: :class:`KeyStoreUnavailableError` (503, ``Retry-After``), and for
    ``KEY_STORE_RETRY_S`` the store is not asked again; the next request after that asks it, so
    the server recovers as soon as the store does.
    """

    def __init__(
        self,
        config: AuthConfig,
        keys: KeyStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.keys = keys
        self.clock = clock
        self._valid: LruCache[str, tuple[ApiKey, float]] = LruCache(KEY_CACHE_ENTRIES)
        self._store_down_until = 0.0

    async def authenticate(self, authorization: str | None) -> Principal:
        """The caller of a request with this ``Authorization`` header value (None: absent)."""
        if authorization is None or not authorization.strip():
            if not self.config.allow_anonymous:
                raise CredentialsRequiredError("a bearer credential is required")
            return ANONYMOUS
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("use Authorization: Bearer <key or token>")
        if token.startswith("kr_"):
            return await self._api_key(token)
        return self._jwt(token)

    def is_admin(self, authorization: str | None) -> bool:
        """Whether the request presents the admin token (constant-time; False where none is
        configured): the operator's scope on routes open to tenants too (``/v1/gaps``)."""
        expected = self.config.admin_token
        if expected is None:
            return False
        scheme, _, token = (authorization or "").strip().partition(" ")
        presented = token.strip().encode("utf-8") if scheme.lower() == "bearer" else b""
        return hmac.compare_digest(presented, expected.encode("utf-8"))

    def require_admin(self, authorization: str | None) -> None:
        """Pass only a request presenting the admin token (``Bearer <KR_ADMIN_TOKEN>``, compared
        in constant time): 401 for any other credential or none — a tenant's key included —,
        403 where no admin token is configured (the operator's routes are off)."""
        expected = self.config.admin_token
        if expected is None:
            raise AdminRequiredError(
                "this route is for the operator and is off: set KR_ADMIN_TOKEN to open it"
            )
        scheme, _, token = (authorization or "").strip().partition(" ")
        presented = token.strip().encode("utf-8") if scheme.lower() == "bearer" else b""
        if not hmac.compare_digest(presented, expected.encode("utf-8")):
            raise AuthenticationError("this route needs the admin token (KR_ADMIN_TOKEN)")

    async def _api_key(self, presented: str) -> Principal:
        key_id = key_id_of(presented)
        if key_id is None or self.keys is None:
            raise AuthenticationError("invalid API key")
        now = self.clock()
        digest = hash_key(presented)
        cached = self._valid.get(digest)
        if cached is not None and cached[1] > now:
            return Principal("api_key", cached[0].tenant, cached[0].key_id)
        record = await self._find(key_id, now)
        if record is None or record.revoked or not key_matches(record, presented):
            raise AuthenticationError("invalid or revoked API key")
        if self.config.key_cache_ttl_s > 0:
            self._valid.put(digest, (record, now + self.config.key_cache_ttl_s))
        return Principal("api_key", record.tenant, record.key_id)

    async def _find(self, key_id: str, now: float) -> ApiKey | None:
        if now < self._store_down_until:
            raise KeyStoreUnavailableError(
                "the key store is unavailable; retry later", self._store_down_until - now
            )
        assert self.keys is not None
        try:
            return await self.keys.find(key_id)
        except BindingError as exc:
            self._store_down_until = self.clock() + KEY_STORE_RETRY_S
            raise KeyStoreUnavailableError(
                f"the key store is unavailable ({exc.message}); retry later", KEY_STORE_RETRY_S
            ) from exc

    def _jwt(self, token: str) -> Principal:
        settings = self.config.jwt
        if settings is None:
            raise AuthenticationError("invalid API key")
        claims = verify_jwt(token, settings, self.clock())
        tenant = claims.get(settings.tenant_claim)
        if not is_tenant_id(tenant):  # the build's grammar: no partition has another name
            raise AuthenticationError(f"token has no valid {settings.tenant_claim!r} claim")
        subject = claims.get("sub")
        return Principal("jwt", tenant, subject if isinstance(subject, str) else "")


def tenant_for(principal: Principal, requested: str | None) -> str | None:
    """The tenant a request is served as: its credential's. A body ``tenant`` may repeat it;
    naming another is a 403, and naming one without a credential a 401."""
    if principal.tenant is None:
        if requested is not None:
            raise CredentialsRequiredError("a tenant's knowledge needs that tenant's credential")
        return None
    if requested is not None and requested != principal.tenant:
        raise TenantMismatchError("the request names a tenant other than its credential's")
    return principal.tenant
