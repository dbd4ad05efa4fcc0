-- Extraction instructions per project (issue 35): what a user's project tells the extractor to
-- keep and ignore, and its own categories. A change inserts a new version; the versions are the
-- history. project_key is the project id, '' for the user's conversations without a project
-- (a primary key cannot hold NULL). Behind the same walls as user_memories (0003).
CREATE TABLE IF NOT EXISTS extraction_instructions (
    user_id      text        NOT NULL,
    project_key  text        NOT NULL,
    version      integer     NOT NULL CHECK (version > 0),
    instructions jsonb       NOT NULL,
    source       text,
    write_id     uuid,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (user_id, project_key, version)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON extraction_instructions TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE extraction_instructions ENABLE ROW LEVEL SECURITY;
ALTER TABLE extraction_instructions FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS extraction_instructions_tenant ON extraction_instructions;
CREATE POLICY extraction_instructions_tenant ON extraction_instructions
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS extraction_instructions_maintenance ON extraction_instructions;
CREATE POLICY extraction_instructions_maintenance ON extraction_instructions TO agent_memory_maintenance
    USING (true) WITH CHECK (true);
