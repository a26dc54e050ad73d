-- One row per served question, with how it went, for the content-gaps report (kr gaps, GET /v1/gaps;
-- src/router/ops/questions.py, docs/adr/0025). query_log (0002) is left as it was: it counts
-- requests per hour for cache warming, and its rows stay readable. One schema for D1 and the local
-- SQLite default. Questions are redacted before they are written (router/ops/redaction.py), or
-- only their terms are kept (KR_LOG_STORE=terms); rows older than KR_LOG_RETENTION_DAYS are deleted
-- by the Worker's scheduled handler and by kr gc.

CREATE TABLE IF NOT EXISTS question_log (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    at                REAL    NOT NULL,              -- unix time it was served
    tenant            TEXT,                          -- the credential's tenant; NULL: anonymous
    caller            TEXT,                          -- hash of caller + conversation (never a key)
    question          TEXT,                          -- redacted text; NULL: only terms are kept
    terms             TEXT    NOT NULL DEFAULT '',   -- analysed terms, space separated
    context           TEXT    NOT NULL DEFAULT '{}', -- JSON: page, tab, focus, date
    outcome           TEXT    NOT NULL,              -- answer | evidence | nothing
    level             TEXT    NOT NULL,              -- HIGH | MEDIUM | LOW | NONE
    reason            TEXT,                          -- why it declined, or was LOW
    nearest           TEXT    NOT NULL DEFAULT '[]', -- JSON [[doc_id, section_id, score], ...]
    knowledge_version TEXT
);
CREATE INDEX IF NOT EXISTS question_log_at ON question_log (at);
CREATE INDEX IF NOT EXISTS question_log_tenant_at ON question_log (tenant, at);
