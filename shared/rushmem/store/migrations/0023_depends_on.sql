-- Facts that follow from other facts (issue 45): depends_on names the memories a fact follows from
-- ("my gym is in Kreuzberg" from "I live in Berlin"). When one of them is superseded or deleted,
-- the dependent is marked stale (stale_at, and which memory and why: stale_because,
-- stale_reason) by a trigger (functions.sql), in the same transaction as the supersession or the
-- deletion, whichever path did it. Recall leaves a stale memory out of the block; the same fact
-- written again (the write path's same-fact fold) clears the mark. An array rather than a link
-- table: a fact names few others, every read of a memory returns them with it, and the dense users'
-- copy (0013) needs nothing (recall reads the mark from user_memories). Adding columns with a
-- constant default rewrites nothing.
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS depends_on uuid[] NOT NULL DEFAULT '{}';
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS stale_at timestamptz;
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS stale_because uuid;
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS stale_reason text;
ALTER TABLE user_memories DROP CONSTRAINT IF EXISTS user_memories_stale_reason_check;
ALTER TABLE user_memories ADD CONSTRAINT user_memories_stale_reason_check
    CHECK (stale_reason IN ('superseded', 'deleted'));

-- The dependents of a memory, found by the trigger: only rows that name any (most name none).
CREATE INDEX IF NOT EXISTS user_memories_depends_on_idx
    ON user_memories USING gin (depends_on) WHERE depends_on <> '{}';
