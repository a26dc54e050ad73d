-- Served queries, counted per hour, for cache warming (src/router/ops/warming.py, scheduled handler).
-- One schema for Cloudflare D1 and the local SQLite default. ``request`` holds only the request
-- fields that shape the cached answer (JSON), so replaying it fills the same cache entry.

CREATE TABLE IF NOT EXISTS query_log (
    request_key TEXT    NOT NULL,   -- hash of the request with its query text normalised
    hour        INTEGER NOT NULL,   -- unix time // 3600
    request     TEXT    NOT NULL,   -- JSON of the replayable QueryRequest fields
    hits        INTEGER NOT NULL DEFAULT 0,
    last_seen   REAL    NOT NULL,   -- unix time of the latest use in this hour
    PRIMARY KEY (request_key, hour)
);
CREATE INDEX IF NOT EXISTS query_log_hour ON query_log (hour);
