"""JWT verification without I/O or C extensions: HS256 (stdlib hmac) and RS256 (pure Python).

Why our own ~100 lines: the Worker runs in Pyodide, which has no ``cryptography``, and PyJWT
needs it for RS256. RS256 verification is one modular exponentiation (``pow``) and a byte
comparison with the PKCS#1 v1.5 encoding of the SHA-256 digest (RFC 8017 §8.2.2); only public
keys are involved, so timing leaks nothing secret. The JWKS is configuration (JSON), never
fetched here: fetching belongs to an adapter.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from router.auth.errors import AuthenticationError
from router.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_LIFETIME_S",
    "MAX_TOKEN_CHARS",
    "JwtSettings",
    "RsaPublicKey",
    "parse_jwks",
    "rsa_sha256_verify",
    "verify_jwt",
]

MAX_TOKEN_CHARS = 8192
MIN_RSA_BITS = 2048
DEFAULT_MAX_LIFETIME_S = 24 * 3600.0
"""The furthest ``exp`` accepted, from now: a day, as identity providers issue access tokens
(Auth0's default; Google's, Entra's and Cognito's are an hour). A token whose ``exp`` lies
further out (``1e20``, ``1e300``, ``Infinity``) would in effect never expire, so it is refused."""
MAX_LIFETIME_S = 366 * 24 * 3600.0
_SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


@dataclass(frozen=True)
class RsaPublicKey:
    """One RS256 key of a JWKS: modulus, public exponent and its ``kid``."""

    n: int
    e: int
    kid: str | None = None

    def __post_init__(self) -> None:
        if self.n.bit_length() < MIN_RSA_BITS:
            raise ConfigError(f"JWKS key {self.kid!r}: RSA modulus under {MIN_RSA_BITS} bits")
        if self.e < 3 or self.e % 2 == 0:
            raise ConfigError(f"JWKS key {self.kid!r}: bad RSA exponent")


@dataclass(frozen=True)
class JwtSettings:
    """What a token must satisfy. ``exp`` is always required, finite and at most
    ``max_lifetime_s`` ahead (a token that never expires cannot be taken back); ``iat`` and
    ``nbf``, when present, must be finite and not in the future beyond ``leeway_s``. ``aud``
    and ``iss`` are checked when configured."""

    hs256_secret: bytes | None = None
    rsa_keys: tuple[RsaPublicKey, ...] = field(default_factory=tuple)
    tenant_claim: str = "tenant"
    audience: str | None = None
    issuer: str | None = None
    leeway_s: float = 30.0
    max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S

    def __post_init__(self) -> None:
        if self.hs256_secret is None and not self.rsa_keys:
            raise ConfigError("JWT settings need an HS256 secret or a JWKS")
        if self.hs256_secret is not None and len(self.hs256_secret) < 32:
            raise ConfigError("the HS256 secret must have at least 32 bytes")
        if not self.tenant_claim:
            raise ConfigError("the JWT tenant claim must be named")
        if not 0 <= self.leeway_s <= 300:
            raise ConfigError("JWT leeway must be within 0..300 s")
        if not 60 <= self.max_lifetime_s <= MAX_LIFETIME_S:
            raise ConfigError(f"JWT max lifetime must be within 60..{MAX_LIFETIME_S:.0f} s")


def parse_jwks(text: str) -> tuple[RsaPublicKey, ...]:
    """The RS256 keys of a JWKS document (``{"keys": [...]}``); other key types are skipped."""
    try:
        doc = json.loads(text)
        keys = [
            RsaPublicKey(_b64_int(k["n"]), _b64_int(k["e"]), k.get("kid"))
            for k in doc["keys"]
            if k.get("kty") == "RSA"
            and k.get("alg", "RS256") == "RS256"
            and k.get("use", "sig") == "sig"
        ]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"the JWKS is not valid: {exc}") from exc
    if not keys:
        raise ConfigError("the JWKS has no RS256 signing key")
    return tuple(keys)


def rsa_sha256_verify(key: RsaPublicKey, message: bytes, signature: bytes) -> bool:
    """RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2.2): does ``signature`` sign ``message``?"""
    size = (key.n.bit_length() + 7) // 8
    if len(signature) != size:
        return False
    s = int.from_bytes(signature, "big")
    if s >= key.n:
        return False
    encoded = pow(s, key.e, key.n).to_bytes(size, "big")
    digest = _SHA256_DIGEST_INFO + hashlib.sha256(message).digest()
    expected = b"\x00\x01" + b"\xff" * (size - len(digest) - 3) + b"\x00" + digest
    return hmac.compare_digest(encoded, expected)


def verify_jwt(token: str, settings: JwtSettings, now: float) -> dict[str, Any]:
    """The claims of a token signed with a configured key and valid at ``now``.

    Raises :class:`AuthenticationError` for anything else (bad shape, ``alg`` not configured —
    ``none`` never is —, bad signature, expired, not yet valid, wrong audience or issuer).
    """
    if len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
        raise AuthenticationError("malformed token")
    head_b64, body_b64, sig_b64 = token.split(".")
    header = _json_part(head_b64)
    signed = f"{head_b64}.{body_b64}".encode("ascii")
    if not _signature_ok(header, signed, _b64(sig_b64), settings):
        raise AuthenticationError("bad token signature")
    claims = _json_part(body_b64)
    _check_claims(claims, settings, now)
    return claims


def _signature_ok(header: dict[str, Any], signed: bytes, sig: bytes, s: JwtSettings) -> bool:
    alg = header.get("alg")
    if alg == "HS256" and s.hs256_secret is not None:
        mac = hmac.new(s.hs256_secret, signed, hashlib.sha256).digest()
        return hmac.compare_digest(mac, sig)
    if alg == "RS256" and s.rsa_keys:
        kid = header.get("kid")
        keys = [k for k in s.rsa_keys if kid is None or k.kid == kid]
        return any(rsa_sha256_verify(k, signed, sig) for k in keys)
    raise AuthenticationError(f"token algorithm {alg!r} is not accepted")


def _check_claims(claims: dict[str, Any], s: JwtSettings, now: float) -> None:
    exp = claims.get("exp")
    if not _is_number(exp):
        raise AuthenticationError("token has no exp")
    if not _is_finite(exp) or exp > now + s.max_lifetime_s + s.leeway_s:
        raise AuthenticationError("token exp is too far ahead (it would never expire)")
    if now - s.leeway_s > exp:  # (not exp + leeway: a 400-digit exp is no float)
        raise AuthenticationError("token expired")
    for name in ("nbf", "iat"):
        value = claims.get(name)
        if value is None:
            continue
        if not _is_number(value) or not _is_finite(value):
            raise AuthenticationError(f"token {name} is not a time")
        if value > now + s.leeway_s:
            raise AuthenticationError(f"token not yet valid ({name} in the future)")
    if s.issuer is not None and claims.get("iss") != s.issuer:
        raise AuthenticationError("token issuer is not accepted")
    if s.audience is not None:
        aud = claims.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if s.audience not in audiences:
            raise AuthenticationError("token audience is not accepted")


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_finite(value: int | float) -> bool:
    """Not ``Infinity`` or ``NaN`` (which JSON parsing accepts); any int is finite."""
    return isinstance(value, int) or math.isfinite(value)


def _b64(part: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError) as exc:
        raise AuthenticationError("malformed token") from exc


def _b64_int(part: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)), "big")


def _json_part(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64(part))
    except (ValueError, UnicodeDecodeError) as exc:
        raise AuthenticationError("malformed token") from exc
    if not isinstance(value, dict):
        raise AuthenticationError("malformed token")
    return value
