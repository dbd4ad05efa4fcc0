-- Consolidation through review (RUSHMEM_REVIEW_WRITES): with review on, a consolidation run does not
-- merge or supersede; it proposes ("merge this duplicate into that memory", "retire this memory,
-- superseded by that one") and a person decides (GET /memories/pending, POST /memories/{id}/review).
-- A proposal names the two memories and holds no text of its own: the listing reads their current
-- texts, and a deleted or purged memory takes its proposals with it (ON DELETE CASCADE), so no text
-- outlives its memory here. The content hashes are the memories as proposed: an approval re-checks
-- them and is refused (409) when either memory changed or ended since.
-- The row stays once decided: a rejected pair is never proposed again; an approved one ended a memory.
CREATE TABLE IF NOT EXISTS consolidation_proposals (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      text        NOT NULL,
    project_id   text,
    action       text        NOT NULL CHECK (action IN ('merge', 'retire')),
    -- merge: the duplicate (merged into other_id); retire: the stale memory (superseded by other_id)
    memory_id    uuid        NOT NULL REFERENCES user_memories (id) ON DELETE CASCADE,
    other_id     uuid        NOT NULL REFERENCES user_memories (id) ON DELETE CASCADE,
    memory_hash  bytea       NOT NULL,
    other_hash   bytea       NOT NULL,
    write_id     uuid,                                   -- the consolidation run that proposed it
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    decision     text        CHECK (decision IN ('approved', 'rejected', 'withdrawn')),
    decided_at   timestamptz,
    decided_by   text,
    CHECK (memory_id <> other_id)
);

CREATE INDEX IF NOT EXISTS consolidation_proposals_user_idx ON consolidation_proposals (user_id, created_at, id);
-- What a memory's deletion cascades through (without them each deleted memory scans the table).
CREATE INDEX IF NOT EXISTS consolidation_proposals_memory_idx ON consolidation_proposals (memory_id);
CREATE INDEX IF NOT EXISTS consolidation_proposals_other_idx ON consolidation_proposals (other_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON consolidation_proposals TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE consolidation_proposals ENABLE ROW LEVEL SECURITY;
ALTER TABLE consolidation_proposals FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS consolidation_proposals_tenant ON consolidation_proposals;
CREATE POLICY consolidation_proposals_tenant ON consolidation_proposals
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS consolidation_proposals_maintenance ON consolidation_proposals;
CREATE POLICY consolidation_proposals_maintenance ON consolidation_proposals TO agent_memory_maintenance
    USING (true) WITH CHECK (true);
