-- Provenance, tombstones and merges.
--
-- 1. Write ids. Every write (a POST /memories, an import, an ingested conversation, a PATCH, a
--    consolidation run) names itself for its transaction with
--    set_config('agent_memory.write_id', '<uuid>', true). user_memories.write_id is the last
--    write that created or touched the row; memory_events.write_id the write that caused the
--    event. A restored (exported) memory keeps the write id it was exported with.
-- 2. Deleting one memory removes its content everywhere: every history event of that memory
--    loses its content (and the previous content and metadata an 'updated' event keeps), the
--    change events still waiting in the outbox lose theirs, and the 'deleted' event itself is a
--    tombstone without content (the id, the time, the source that asked, the write id). Expiry
--    and the retention purge keep the history as before; forgetting a user removes it all (0009).
-- 3. 'merged': consolidation marks a duplicate as replaced by the memory it duplicates
--    (change_reason 'merged'), which the history tells apart from a correction ('superseded').

ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS write_id uuid;
ALTER TABLE memory_events ADD COLUMN IF NOT EXISTS write_id uuid;
ALTER TABLE memory_events ALTER COLUMN content DROP NOT NULL;

-- NOT VALID: every existing row already meets the wider check; no scan of the history.
ALTER TABLE memory_events DROP CONSTRAINT IF EXISTS memory_events_event_check;
ALTER TABLE memory_events ADD CONSTRAINT memory_events_event_check
    CHECK (event IN ('created', 'refreshed', 'superseded', 'merged', 'revived', 'expiry_changed', 'updated',
                     'deleted', 'expired', 'purged')) NOT VALID;

-- The triggers stamping the write id and writing the tombstones, and their functions:
-- functions.sql.

-- 4. Consolidation's checkpoint: the last user a run finished ('' : start from the first).
INSERT INTO agent_memory_meta (key, value) VALUES ('consolidate_after', '') ON CONFLICT (key) DO NOTHING;
