"""Authentication: API keys and JWTs decide the tenant a request is served as (issue 12).

Why a package of its own: it is sans-I/O like the rest of the core (the key store is a port,
the JWKS is configuration), so ``kr serve`` and the Worker verify credentials with the same
code, and the Worker needs nothing beyond the standard library (Pyodide has no
``cryptography``).
"""

from router.auth.api_keys import ApiKey, KeyStore, hash_key, key_id_of, new_key
from router.auth.authenticator import Authenticator, Principal, tenant_for
from router.auth.config import AuthConfig, auth_config_from, parse_switch
from router.auth.errors import (
    AdminRequiredError,
    AuthenticationError,
    CredentialsRequiredError,
    KeyStoreUnavailableError,
    TenantMismatchError,
)
from router.auth.jwt import JwtSettings, RsaPublicKey, parse_jwks, verify_jwt

__all__ = [
    "AdminRequiredError",
    "ApiKey",
    "AuthConfig",
    "AuthenticationError",
    "Authenticator",
    "CredentialsRequiredError",
    "JwtSettings",
    "KeyStore",
    "KeyStoreUnavailableError",
    "Principal",
    "RsaPublicKey",
    "TenantMismatchError",
    "auth_config_from",
    "hash_key",
    "key_id_of",
    "new_key",
    "parse_jwks",
    "parse_switch",
    "tenant_for",
    "verify_jwt",
]
