-- Functions and the triggers calling them live in functions.sql from now on, run again by the
-- migrate step whenever it changed or a migration was applied (rushmem.store.schema.migrate): a
-- change to a function is an edit there, not a new migration copying it. Their row here, version 0
-- ('functions'), keeps the SHA-256 of the text last run. A store migrated before this runs
-- functions.sql once right after it, which replaces each function and trigger with the same
-- definition.
ALTER TABLE agent_memory_migrations ADD COLUMN IF NOT EXISTS checksum text;
