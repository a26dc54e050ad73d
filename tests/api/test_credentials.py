"""Credentials decide the tenant: API keys, JWTs (HS256, RS256/JWKS), 401/403, ``kr keys``."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kr.cli import main
from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.auth import (
    AuthConfig,
    AuthenticationError,
    Authenticator,
    JwtSettings,
    auth_config_from,
    parse_jwks,
    verify_jwt,
)
from router.auth.api_keys import key_matches
from router.auth.jwt import rsa_sha256_verify
from router.errors import ConfigError
from router.service import KnowledgeService
from tests.common import ALFA, BETA

SECRET = b"s" * 32
NOW = 1_800_000_000.0
ISSUER = "https://idp.example"

# An RS256 token signed by `openssl dgst -sha256 -sign` with a 2048-bit key made by `openssl
# genrsa`, and that key's JWKS: an independent implementation checks our verifier.
OPENSSL_JWKS = (
    '{"keys": [{"kty": "RSA", "kid": "test-1", "alg": "RS256", "use": "sig", "n": '
    '"r7Dcj6TJyd5ORC-wLEO3oUmFArJJ1YFimSUOrLxjMqUqcqR6ncXrKI1u4TCosAf6_rcLi2gnRsnsrUv5DVb0APLu7ks'
    "5b7Ucwn_07qvm8pwQ3gOiNoeRnGjtNlqBjtv5LeZ7sz5xeDJGPGdZt2NUq9idapVwE8gT2OLbtbkCrGeRsLpCYD4RJF"
    "KFhupCOPBTgpfaVy_yBlfjgcFSqDSIX8AogW2RemZKcfm4IW0CkSeoAP1lcPPphH7lqjz-O0AW4gEBN-Ktz3W_cO_kGW"
    '2dIG12jHxKetvymQPtBRKUI-iD2cCOvzh0HKKt-ab4IG5Wid4-BTPA8QQjNGuYPNQhiw", "e": "AQAB"}]}'
)
OPENSSL_TOKEN = (
    "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6InRlc3QtMSJ9.eyJzdWIiOiJ1c2VyLTciLCJ0ZW5hbnQiOiJ"
    "jb25zdHJ1dG9yYS1hbGZhIiwiZXhwIjo0MTAyNDQ0ODAwLCJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIiwiYXVkIjo"
    "ia25vd2xlZGdlLXJvdXRlciJ9.GkWhv9gWBfP7TM4ZDdRbL4rZ5kW7UNWTxKVj4JNfzvfuZlBgnfhqDWyljm_N6F3-Vcc"
    "ET34Hm-5vxYpB5oICmDFQpa-LMOxYv8gJlzePl_kAksvX7DE8fW-qYTryGAihonA1w3uqP-Q_0GxVvI1_j7Z1YRe7pof4"
    "TdB-4hpx1t_1srM-wSDc00yuvB0gu4aTouI-xkB3Xgp8R2D5kARvKrFElz-QDa0S88d7q0Fh5uHPGiDcVxDqzCWBLdNeu"
    "Bo6Vb1oFVF0cAIPW79Q6m7ZbI9qK3feJzEP7PipvTT8sG7VfyF-Skw19Xt_LKC9SnzF4fkDUqKJc3vGrPa6IJGO5Q"
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hs256(claims: dict[str, Any], secret: bytes = SECRET, alg: str = "HS256") -> str:
    head = _b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def claims(**extra: Any) -> dict[str, Any]:
    return {"tenant": ALFA, "exp": NOW + 60, **extra}


# --- JWT ------------------------------------------------------------------------------------


def test_rs256_accepts_a_token_signed_by_openssl() -> None:
    settings = JwtSettings(
        rsa_keys=parse_jwks(OPENSSL_JWKS), audience="knowledge-router", issuer="https://idp.example"
    )
    an_hour_before_it_expires = 4102444800 - 3600  # its exp: 2100-01-01
    assert verify_jwt(OPENSSL_TOKEN, settings, an_hour_before_it_expires)["tenant"] == ALFA
    with pytest.raises(AuthenticationError, match="too far ahead"):
        verify_jwt(OPENSSL_TOKEN, settings, NOW)  # valid for 73 more years: never expires


def test_rs256_refuses_a_changed_signature_or_payload() -> None:
    settings = JwtSettings(rsa_keys=parse_jwks(OPENSSL_JWKS))
    head, body, sig = OPENSSL_TOKEN.split(".")
    flipped = bytearray(base64.urlsafe_b64decode(sig + "=="))
    flipped[-1] ^= 1
    with pytest.raises(AuthenticationError):
        verify_jwt(f"{head}.{body}.{_b64(bytes(flipped))}", settings, NOW)
    other = _b64(json.dumps(claims(tenant=BETA, exp=4102444800)).encode())
    with pytest.raises(AuthenticationError):
        verify_jwt(f"{head}.{other}.{sig}", settings, NOW)
    key = settings.rsa_keys[0]
    assert not rsa_sha256_verify(key, b"message", b"\x00" * 256)


def test_rs256_only_configured_refuses_hs256_signed_with_the_public_key() -> None:
    """The classic algorithm confusion: the JWKS modulus used as an HMAC secret."""
    settings = JwtSettings(rsa_keys=parse_jwks(OPENSSL_JWKS))
    modulus = settings.rsa_keys[0].n.to_bytes(256, "big")
    with pytest.raises(AuthenticationError, match="algorithm"):
        verify_jwt(hs256(claims(), secret=modulus), settings, NOW)


@pytest.mark.parametrize(
    ("token_claims", "problem"),
    [
        ({"tenant": ALFA, "iss": ISSUER, "aud": "kr"}, "no exp"),
        (claims(exp=NOW - 31, iss=ISSUER, aud="kr"), "expired"),
        (claims(nbf=NOW + 31, iss=ISSUER, aud="kr"), "not yet valid"),
        (claims(iss="https://evil.example", aud="kr"), "issuer"),
        (claims(iss=ISSUER, aud="someone-else"), "audience"),
    ],
)
def test_hs256_checks_exp_nbf_iss_aud(token_claims: dict[str, Any], problem: str) -> None:
    settings = JwtSettings(hs256_secret=SECRET, audience="kr", issuer=ISSUER)
    assert verify_jwt(hs256(claims(iss=ISSUER, aud="kr")), settings, NOW)["tenant"] == ALFA
    with pytest.raises(AuthenticationError, match=problem):
        verify_jwt(hs256(token_claims), settings, NOW)


def test_hs256_accepts_within_leeway_and_refuses_other_secrets_and_none() -> None:
    settings = JwtSettings(hs256_secret=SECRET, audience="kr")
    good = claims(exp=NOW - 29, aud=["x", "kr"])
    assert verify_jwt(hs256(good), settings, NOW)["tenant"] == ALFA
    with pytest.raises(AuthenticationError, match="signature"):
        verify_jwt(hs256(good, secret=b"t" * 32), settings, NOW)
    unsigned = hs256(good, alg="none").rsplit(".", 1)[0] + "."
    with pytest.raises(AuthenticationError):
        verify_jwt(unsigned, settings, NOW)
    for junk in ("", "a.b", "a.b.c", "x" * 9000):
        with pytest.raises(AuthenticationError):
            verify_jwt(junk, settings, NOW)


@pytest.mark.parametrize(
    ("token_claims", "problem"),
    [
        (claims(exp=1e20), "too far ahead"),
        (claims(exp=1e300), "too far ahead"),
        (claims(exp=float("inf")), "too far ahead"),  # JSON Infinity
        (claims(exp=float("nan")), "too far ahead"),  # JSON NaN
        (claims(exp=10**400), "too far ahead"),
        (claims(exp=NOW + 24 * 3600 + 31), "too far ahead"),
        (claims(exp=-(10**400)), "expired"),
        (claims(iat=NOW + 31), "iat in the future"),
        (claims(iat=float("inf")), "iat is not a time"),
        (claims(iat="yesterday"), "iat is not a time"),
        (claims(nbf=float("nan")), "nbf is not a time"),
        (claims(nbf=10**400), "nbf in the future"),
    ],
)
def test_a_token_that_never_expires_or_is_issued_in_the_future_is_refused(
    token_claims: dict[str, Any], problem: str
) -> None:
    settings = JwtSettings(hs256_secret=SECRET)
    with pytest.raises(AuthenticationError, match=problem):
        verify_jwt(hs256(token_claims), settings, NOW)


def test_a_token_within_its_max_lifetime_and_leeway_is_accepted() -> None:
    settings = JwtSettings(hs256_secret=SECRET)
    day = 24 * 3600
    for fine in (claims(exp=NOW + day + 29, iat=NOW + 29, nbf=NOW + 29), claims(iat=NOW - day)):
        assert verify_jwt(hs256(fine), settings, NOW)["tenant"] == ALFA
    longer = JwtSettings(hs256_secret=SECRET, max_lifetime_s=7 * day)
    assert verify_jwt(hs256(claims(exp=NOW + 6 * day)), longer, NOW)["tenant"] == ALFA
    config = auth_config_from(
        {"KR_JWT_HS256_SECRET": "s" * 32, "KR_JWT_MAX_LIFETIME_S": "3600"}.get, True
    )
    assert config.jwt is not None and config.jwt.max_lifetime_s == 3600
    for bad in ("0", "nan", "1e20", "soon"):
        env = {"KR_JWT_HS256_SECRET": "s" * 32, "KR_JWT_MAX_LIFETIME_S": bad}
        with pytest.raises(ConfigError, match=r"KR_JWT_MAX_LIFETIME_S|max lifetime"):
            auth_config_from(env.get, True)


def test_jwt_settings_validate_themselves() -> None:
    with pytest.raises(ConfigError):
        JwtSettings()
    with pytest.raises(ConfigError):
        JwtSettings(hs256_secret=b"short")
    with pytest.raises(ConfigError):
        parse_jwks('{"keys": []}')
    with pytest.raises(ConfigError):
        auth_config_from({"KR_ALLOW_ANONYMOUS": "maybe"}.get, allow_anonymous=True)
    config = auth_config_from(
        {"KR_JWKS": OPENSSL_JWKS, "KR_JWT_TENANT_CLAIM": "org"}.get, allow_anonymous=False
    )
    assert config.jwt is not None and config.jwt.tenant_claim == "org"
    assert not config.allow_anonymous and config.key_cache_ttl_s == 30


# --- the API --------------------------------------------------------------------------------


@pytest.fixture
def keys(state: LocalState) -> SqliteKeyStore:
    return SqliteKeyStore(state.relational.path)


def client_for(
    service: KnowledgeService, keys: SqliteKeyStore, anonymous: bool = True, **config: Any
) -> TestClient:
    auth = Authenticator(AuthConfig(allow_anonymous=anonymous, **config), keys, clock=lambda: NOW)
    return TestClient(create_app(service, auth=auth))


def ask(client: TestClient, credential: str | None = None, **body: Any) -> Any:
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    return client.post("/v1/query", json={"query": "Cartão Verde andaime", **body}, headers=headers)


def tenants_of(reply: Any) -> set[str]:
    return {r["tenant"] for r in reply.json()["results"]}


def test_an_api_key_decides_the_tenant(service: KnowledgeService, keys: SqliteKeyStore) -> None:
    client = client_for(service, keys)
    alfa, _ = keys.create(ALFA)
    beta, _ = keys.create(BETA)
    mine = ask(client, alfa)
    assert mine.status_code == 200 and ALFA in tenants_of(mine)
    assert mine.json()["results"][0]["doc_id"] == "construtoraAlfa.scaffolding"
    same = ask(client, alfa, tenant=ALFA)
    assert same.status_code == 200 and ALFA in tenants_of(same)
    other = ask(client, beta)
    assert other.status_code == 200 and tenants_of(other) <= {"*", BETA}


def test_a_body_tenant_other_than_the_credentials_is_403(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    client = client_for(service, keys)
    beta, _ = keys.create(BETA)
    reply = ask(client, beta, tenant=ALFA)
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "tenant_mismatch"


def test_anonymous_gets_shared_knowledge_only(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    client = client_for(service, keys)
    reply = ask(client)
    assert reply.status_code == 200 and tenants_of(reply) <= {"*"}
    named = ask(client, tenant=ALFA)
    assert named.status_code == 401
    assert named.json()["error"]["code"] == "credentials_required"
    assert named.headers["www-authenticate"].startswith("Bearer")


def test_without_anonymous_access_no_credential_is_401(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    client = client_for(service, keys, anonymous=False)
    reply = ask(client)
    assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/v1/metrics").status_code == 401
    alfa, _ = keys.create(ALFA)
    assert ask(client, alfa).status_code == 200
    assert client.get("/v1/metrics", headers={"Authorization": f"Bearer {alfa}"}).status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        "Bearer kr_000000000000_" + "A" * 43,
        "Bearer kr_nonsense",
        "Bearer not-a-jwt",
        "Basic dXNlcjpwYXNz",
        "Bearer",
    ],
)
def test_bad_credentials_are_401_with_a_challenge(
    service: KnowledgeService, keys: SqliteKeyStore, header: str
) -> None:
    client = client_for(service, keys)
    reply = client.post("/v1/query", json={"query": "APR"}, headers={"Authorization": header})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith("Bearer")
    assert reply.json()["error"]["code"] == "unauthorized"


def test_a_key_with_a_wrong_secret_is_refused(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    client = client_for(service, keys)
    alfa, record = keys.create(ALFA)
    forged = alfa[:-1] + ("A" if alfa[-1] != "A" else "B")
    assert ask(client, forged).status_code == 401
    assert record.key_hash not in alfa and len(record.key_hash) == 64


def test_a_revoked_key_stops_at_once_without_a_cache(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    client = client_for(service, keys)
    alfa, record = keys.create(ALFA)
    assert ask(client, alfa).status_code == 200
    assert keys.revoke(record.key_id)
    assert ask(client, alfa).status_code == 401


def test_a_revoked_key_stops_once_the_isolate_cache_expires(keys: SqliteKeyStore) -> None:
    now = [NOW]
    auth = Authenticator(AuthConfig(key_cache_ttl_s=30), keys, clock=lambda: now[0])
    alfa, record = keys.create(ALFA)
    assert asyncio.run(auth.authenticate(f"Bearer {alfa}")).tenant == ALFA
    keys.revoke(record.key_id)
    assert asyncio.run(auth.authenticate(f"Bearer {alfa}")).tenant == ALFA  # within the bound
    now[0] += 31
    with pytest.raises(AuthenticationError):
        asyncio.run(auth.authenticate(f"Bearer {alfa}"))


def test_a_jwt_names_the_tenant(service: KnowledgeService, keys: SqliteKeyStore) -> None:
    client = client_for(
        service, keys, anonymous=False, jwt=JwtSettings(hs256_secret=SECRET, tenant_claim="org")
    )
    token = hs256({"org": ALFA, "exp": NOW + 60})
    reply = ask(client, token)
    assert reply.status_code == 200 and ALFA in tenants_of(reply)
    assert ask(client, hs256({"tenant": ALFA, "exp": NOW + 60})).status_code == 401
    assert ask(client, hs256({"org": ALFA, "exp": NOW - 60})).status_code == 401
    assert ask(client, token, tenant=BETA).status_code == 403


def test_kr_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = ["--state", str(tmp_path / "st")]
    assert main(["keys", "create", "--tenant", ALFA, *state]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("kr_")
    key = out.strip()
    key_id = key.split("_")[1]
    assert main(["keys", "list", *state]) == 0
    listed = capsys.readouterr().out
    assert key_id in listed and ALFA in listed and "active" in listed and key not in listed
    stored = (tmp_path / "st" / "d1.sqlite").read_bytes()
    assert (
        key.encode() not in stored and hashlib.sha256(key.encode()).hexdigest().encode() in stored
    )
    assert main(["keys", "revoke", key_id, *state]) == 0
    assert main(["keys", "list", *state]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["keys", "revoke", key_id, *state]) == 1
    assert main(["keys", "create", "--tenant", "../etc", *state]) == 1


def test_kr_keys_create_sql_is_the_row_the_worker_database_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sql FILE``: what ``wrangler d1 execute KNOWLEDGE_DB --remote --file FILE`` runs on
    the Worker's D1 (the same migrations), after which the key works there; never the key."""
    sql = tmp_path / "key.sql"
    assert (
        main(
            ["keys", "create", "--tenant", ALFA, "--state", str(tmp_path / "st"), "--sql", str(sql)]
        )
        == 0
    )
    key = capsys.readouterr().out.strip()
    statement = sql.read_text(encoding="utf-8")
    assert key not in statement
    remote = LocalState(tmp_path / "another-d1")  # a fresh database with migrations/d1 applied
    with sqlite3.connect(remote.relational.path) as db:
        db.executescript(statement)
    [row] = SqliteKeyStore(remote.relational.path).list()
    assert row.tenant == ALFA and key_matches(row, key)


def test_kr_serve_without_anonymous_access_takes_keys_from_kr_keys(
    state: LocalState,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import uvicorn

    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: apps.append(app))
    monkeypatch.delenv("KR_ALLOW_ANONYMOUS", raising=False)
    where = ["--state", str(state.root)]
    assert main(["serve", *where, "--no-anonymous", "--cors-origin", "https://app.example"]) == 0
    assert main(["keys", "create", "--tenant", ALFA, *where]) == 0
    key = capsys.readouterr().out.strip()
    client = TestClient(apps[0])
    assert ask(client).status_code == 401
    reply = ask(client, key, tenant=ALFA)
    assert reply.status_code == 200 and ALFA in tenants_of(reply)
    origin = client.post(
        "/v1/query", json={"query": "APR"}, headers={"Origin": "https://app.example"}
    )
    assert origin.headers["access-control-allow-origin"] == "https://app.example"


@pytest.mark.parametrize("tenant", ["a b/../c", "Acme", f"{ALFA}\n", "acme.corp", "", "-x"])
def test_a_tenant_id_outside_the_builds_grammar_names_no_partition(
    service: KnowledgeService, keys: SqliteKeyStore, tenant: str
) -> None:
    """Keys and tokens take the build's tenant grammar (``router.knowledge.tenants``): a key
    for ``a b/../c`` would name a partition no build can make, a token claiming ``Acme`` or
    ``alfa\\n`` one that is not the tenant it looks like."""
    with pytest.raises(ConfigError):
        keys.create(tenant)
    client = client_for(service, keys, jwt=JwtSettings(hs256_secret=SECRET))
    refused = ask(client, hs256(claims(tenant=tenant)))
    assert refused.status_code == 401 and "tenant" in refused.json()["error"]["message"]
