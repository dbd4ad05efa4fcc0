-- Valid time: when a memory's fact became true (valid_from: the statement's time, or the time its
-- writer gives) and when it stopped being true (valid_until: set when a correction supersedes it,
-- to the time the correction became true). created_at/superseded_at stay the record's own times
-- (when the store learnt of it, when it was replaced); recall, list and export `as_of` read the
-- valid ones: what was true then, superseded versions included while they held. An expiry
-- (expires_at) ends validity too and is read from its own column.
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS valid_from timestamptz;
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS valid_until timestamptz;

-- Existing memories: true since they were stated, until they were superseded.
UPDATE user_memories SET valid_from = created_at, valid_until = superseded_at WHERE valid_from IS NULL;

-- A writer that names no time states a fact true from now.
ALTER TABLE user_memories ALTER COLUMN valid_from SET DEFAULT now();
ALTER TABLE user_memories ALTER COLUMN valid_from SET NOT NULL;
