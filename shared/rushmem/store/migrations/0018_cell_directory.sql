-- Cells: which cell (an independent database, an Aurora cluster in AWS) holds each user, kept in the
-- home cell's database (agent_memory.store.accounts.cells). A row is written on a user's first write
-- (the cell chosen then) and changed by a move; `moving` holds the user's writes while their memories
-- are copied. Row-level security as everywhere: a transaction sees its own user's row.
CREATE TABLE IF NOT EXISTS cell_directory (
    user_id    text        PRIMARY KEY,
    cell       text        NOT NULL,
    moving     boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT, UPDATE, DELETE ON cell_directory TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE cell_directory ENABLE ROW LEVEL SECURITY;
ALTER TABLE cell_directory FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS cell_directory_tenant ON cell_directory;
CREATE POLICY cell_directory_tenant ON cell_directory
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS cell_directory_maintenance ON cell_directory;
CREATE POLICY cell_directory_maintenance ON cell_directory TO agent_memory_maintenance
    USING (true) WITH CHECK (true);
