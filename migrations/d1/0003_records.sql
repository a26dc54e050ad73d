-- Document records (index format 3, docs/adr/0010): one row per document of each partition, the
-- same canonical JSON as the package's record chunks. The Worker reads the few dozen records a
-- response needs with one query instead of one R2 get per chunk (bench/records_read.py).
CREATE TABLE IF NOT EXISTS knowledge_records (
    version   TEXT    NOT NULL REFERENCES knowledge_versions(version) ON DELETE CASCADE,
    partition_key TEXT NOT NULL,  -- shared | t-<sha256[:16]>
    doc_index INTEGER NOT NULL,   -- partition-local document number
    record    TEXT    NOT NULL,
    PRIMARY KEY (version, partition_key, doc_index)
);
