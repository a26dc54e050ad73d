-- API keys (issue 12, docs/adr/0012): the tenant a request is served as comes from its key.
-- One schema for Cloudflare D1 and the local SQLite default. Only the sha256 of each key is kept;
-- key_id is the key's public part (kr_<key_id>_<secret>), shown by `kr keys list`.
CREATE TABLE IF NOT EXISTS api_keys (
    key_id     TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    key_hash   TEXT NOT NULL,
    created_at TEXT NOT NULL,   -- ISO 8601 UTC
    revoked_at TEXT             -- NULL while the key works
);
