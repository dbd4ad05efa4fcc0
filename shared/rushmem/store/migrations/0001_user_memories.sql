-- The memory table. {dimension} is the configured embedder's output size, substituted
-- (as a validated integer) when this migration is first applied; agent_memory_meta
-- records which embedder filled the column so a different one is refused later.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS agent_memory_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE IF NOT EXISTS user_memories (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id       text        NOT NULL CHECK (user_id <> ''),
    project_id    text        CHECK (project_id <> ''),
    content       text        NOT NULL CHECK (content <> ''),
    content_hash  bytea       NOT NULL,
    category      text        NOT NULL DEFAULT 'fact'
                  CHECK (category IN ('identity', 'preference', 'project', 'decision', 'fact', 'other')),
    source        text,
    is_evergreen  boolean     NOT NULL DEFAULT false,
    embedding     vector({dimension}) NOT NULL,
    -- 'english' is spelled out because generated columns need an immutable expression.
    content_tsv   tsvector    GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    superseded_by uuid,
    superseded_at timestamptz,
    metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- One row per fact and scope; NULLS NOT DISTINCT (PostgreSQL 15+) so a user-wide fact
    -- (project_id NULL) is unique too.
    CONSTRAINT user_memories_fact_key UNIQUE NULLS NOT DISTINCT (user_id, project_id, content_hash)
);

-- Scope: the unique constraint's index already leads with (user_id, project_id) and
-- serves every per-user filter; this one serves listing pages newest first.
CREATE INDEX IF NOT EXISTS user_memories_user_recent_idx
    ON user_memories (user_id, created_at DESC, id DESC);

CREATE INDEX IF NOT EXISTS user_memories_tsv_idx
    ON user_memories USING gin (content_tsv);

-- No table-wide index on the embedding (see 0005): any dimension pgvector stores migrates.
