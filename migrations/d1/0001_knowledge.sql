-- Knowledge metadata (PRD-003 §26). One schema for Cloudflare D1 and the local SQLite default.
-- Every row belongs to one knowledge version; a version's rows are written before it is activated.

CREATE TABLE IF NOT EXISTS knowledge_versions (
    version        TEXT PRIMARY KEY,
    format_version INTEGER NOT NULL,
    manifest       TEXT NOT NULL,
    published_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

CREATE TABLE IF NOT EXISTS knowledge_documents (
    version      TEXT NOT NULL REFERENCES knowledge_versions(version) ON DELETE CASCADE,
    doc_index    INTEGER NOT NULL,
    semantic_id  TEXT NOT NULL,
    tenant       TEXT NOT NULL DEFAULT '*',
    title        TEXT NOT NULL,
    path         TEXT NOT NULL,
    trust        TEXT NOT NULL,
    status       TEXT NOT NULL,
    doc_version  TEXT NOT NULL DEFAULT '',
    valid_from   TEXT,
    valid_until  TEXT,
    facts        TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (version, doc_index)
);
CREATE INDEX IF NOT EXISTS knowledge_documents_id ON knowledge_documents (version, semantic_id);

CREATE TABLE IF NOT EXISTS knowledge_sections (
    version       TEXT NOT NULL REFERENCES knowledge_versions(version) ON DELETE CASCADE,
    section_index INTEGER NOT NULL,
    doc_index     INTEGER NOT NULL,
    section_id    TEXT NOT NULL,
    heading       TEXT NOT NULL,
    level         INTEGER NOT NULL,
    flags         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (version, section_index)
);
CREATE INDEX IF NOT EXISTS knowledge_sections_id ON knowledge_sections (version, section_id);

CREATE TABLE IF NOT EXISTS knowledge_links (
    version       TEXT NOT NULL REFERENCES knowledge_versions(version) ON DELETE CASCADE,
    section_index INTEGER NOT NULL,
    target        TEXT NOT NULL,
    label         TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_links_target ON knowledge_links (version, target);

CREATE TABLE IF NOT EXISTS knowledge_keywords (
    version   TEXT NOT NULL REFERENCES knowledge_versions(version) ON DELETE CASCADE,
    doc_index INTEGER NOT NULL,
    keyword   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_keywords_kw ON knowledge_keywords (version, keyword);
