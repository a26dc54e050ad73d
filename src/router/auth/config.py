"""Authentication settings, validated on construction, and their reading from ``KR_*`` names.

Why one reader for both sides: ``kr serve`` reads the process environment (and its flags) and
the Worker reads its ``env`` vars and secrets, under the same names, so a setting means the same
thing on both. Only the default of anonymous access differs (on locally, off in the Worker).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from router.auth.jwt import DEFAULT_MAX_LIFETIME_S, JwtSettings, parse_jwks
from router.errors import ConfigError

__all__ = [
    "DEFAULT_KEY_CACHE_TTL_S",
    "MIN_ADMIN_TOKEN_CHARS",
    "AuthConfig",
    "auth_config_from",
    "parse_switch",
]

DEFAULT_KEY_CACHE_TTL_S = 30.0
"""How long an isolate trusts a key it found valid: a revoked key stops working within this."""
MAX_KEY_CACHE_TTL_S = 300.0
MIN_ADMIN_TOKEN_CHARS = 32
"""An admin token is a secret guessed by no one: at least 32 characters (``openssl rand -hex 32``
gives 64)."""

Getter = Callable[[str], str | None]


@dataclass(frozen=True)
class AuthConfig:
    """Who may call: anonymous callers (shared knowledge only) or not, and the JWT rules.

    ``key_cache_ttl_s`` bounds how long a positive key lookup is reused (0: every request reads
    the key store), hence how long a revoked key may still work in an isolate that saw it.
    ``admin_token`` opens the operator's routes (the evaluation report, which names every
    tenant's golden queries); None: they are off. No tenant credential opens them.
    """

    allow_anonymous: bool = True
    jwt: JwtSettings | None = None
    key_cache_ttl_s: float = 0.0
    admin_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not 0 <= self.key_cache_ttl_s <= MAX_KEY_CACHE_TTL_S:
            raise ConfigError(f"the key cache TTL must be within 0..{MAX_KEY_CACHE_TTL_S:.0f} s")
        token = self.admin_token
        if token is not None and (len(token) < MIN_ADMIN_TOKEN_CHARS or token != token.strip()):
            raise ConfigError(
                f"KR_ADMIN_TOKEN must have at least {MIN_ADMIN_TOKEN_CHARS} characters, no spaces"
            )


def parse_switch(name: str, raw: str | None, default: bool) -> bool:
    """``on``/``off`` (also true/false, 1/0); empty or absent gives ``default``."""
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value not in ("on", "off", "true", "false", "1", "0"):
        raise ConfigError(f"{name} must be on or off, got {raw!r}")
    return value in ("on", "true", "1")


def auth_config_from(
    get: Getter, allow_anonymous: bool, key_cache_ttl_s: float = DEFAULT_KEY_CACHE_TTL_S
) -> AuthConfig:
    """``KR_ALLOW_ANONYMOUS``, ``KR_KEY_CACHE_TTL_S``, ``KR_ADMIN_TOKEN``,
    ``KR_JWT_HS256_SECRET``, ``KR_JWKS`` (a JWKS document as JSON), ``KR_JWT_TENANT_CLAIM``,
    ``KR_JWT_AUDIENCE``, ``KR_JWT_ISSUER``, ``KR_JWT_MAX_LIFETIME_S`` (how far ahead a token's
    ``exp`` may be); the arguments are the defaults of the side reading them."""
    ttl = _number(get, "KR_KEY_CACHE_TTL_S", key_cache_ttl_s)
    return AuthConfig(
        allow_anonymous=parse_switch(
            "KR_ALLOW_ANONYMOUS", _text(get, "KR_ALLOW_ANONYMOUS"), allow_anonymous
        ),
        jwt=_jwt_settings(get),
        key_cache_ttl_s=ttl,
        admin_token=_text(get, "KR_ADMIN_TOKEN") or None,
    )


def _jwt_settings(get: Getter) -> JwtSettings | None:
    secret = _text(get, "KR_JWT_HS256_SECRET")
    jwks = _text(get, "KR_JWKS")
    if not secret and not jwks:
        return None
    return JwtSettings(
        hs256_secret=secret.encode("utf-8") if secret else None,
        rsa_keys=parse_jwks(jwks) if jwks else (),
        tenant_claim=_text(get, "KR_JWT_TENANT_CLAIM") or "tenant",
        audience=_text(get, "KR_JWT_AUDIENCE") or None,
        issuer=_text(get, "KR_JWT_ISSUER") or None,
        max_lifetime_s=_number(get, "KR_JWT_MAX_LIFETIME_S", DEFAULT_MAX_LIFETIME_S),
    )


def _number(get: Getter, name: str, default: float) -> float:
    raw = _text(get, name)
    try:
        return float(raw) if raw else default
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


def _text(get: Getter, name: str) -> str | None:
    value = get(name)
    return None if value is None else str(value).strip()
