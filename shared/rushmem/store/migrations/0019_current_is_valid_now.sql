-- Current means valid now. A version replaced by one that becomes true later (valid_from in the
-- future) stays current until then, and that replacement is not current before it: recall, list
-- and every door without as_of answer what as_of = now answers. The scope of a current read
-- (agent_memory.store.memories.scope) asks for valid_from and valid_until, so dense users' copies
-- (0013) carry them too, kept in step by the copy trigger, and the dense text leg (0014) applies
-- the same rule. A dense row copied before this migration has neither: it counts as valid from its
-- start and, once superseded, as ended (what it was before), until `agent-memory dense-users`
-- refills the partition or the row is written again. Adding two nullable columns rewrites nothing.
ALTER TABLE dense_memories ADD COLUMN IF NOT EXISTS valid_from timestamptz;
ALTER TABLE dense_memories ADD COLUMN IF NOT EXISTS valid_until timestamptz;

-- The copy trigger's function and the dense text leg with the same rule: functions.sql.
