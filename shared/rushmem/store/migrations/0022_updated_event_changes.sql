-- An 'updated' event stores its previous metadata as what changed (functions.sql,
-- agent_memory_previous_metadata): {"metadata_patch": {"set": {...}, "unset": [...]}} against the
-- previous metadata recorded by the memory's event before it, with a whole copy ({"metadata": ...})
-- as the memory's first, every 32nd and wherever a patch would not be smaller. Readers put the whole
-- object back (agent_memory_metadata_fold), so histories read as before. This converts the events
-- written before, which kept a whole copy each (16 KB an event for metadata at its limit): the same
-- rule, each patch computed against the whole copy its predecessor holds now. Both forms stay
-- readable, so an event left whole (a non-object, a patch no smaller) is read as it was. An
-- 'updated' event that left the content as it was no longer keeps the text (readers take it from
-- the memory's event before, which holds it): the events before drop theirs.
SET LOCAL ROLE agent_memory_maintenance;  -- FORCE row-level security: the owner sees every user's rows only so

WITH chain AS (
    SELECT id, detail -> 'previous' -> 'metadata' AS metadata, lag(detail -> 'previous') OVER w AS before,
           row_number() OVER w - 1 AS n
    FROM memory_events
    WHERE event = 'updated' AND detail -> 'previous' ?| ARRAY['metadata', 'metadata_patch']
    WINDOW w AS (PARTITION BY user_id, memory_id ORDER BY at, id)
), patched AS (
    SELECT id, metadata, jsonb_build_object(
        'set', coalesce((SELECT jsonb_object_agg(t.key, t.value) FROM jsonb_each(c.metadata) t
                         WHERE NOT (c.before -> 'metadata') ? t.key
                            OR (c.before -> 'metadata') -> t.key IS DISTINCT FROM t.value), '{}'::jsonb),
        'unset', coalesce((SELECT jsonb_agg(b.key) FROM jsonb_each(c.before -> 'metadata') b
                           WHERE NOT c.metadata ? b.key), '[]'::jsonb)) AS patch
    FROM chain c
    WHERE c.n % 32 <> 0 AND c.before ? 'metadata'
      AND jsonb_typeof(c.metadata) = 'object' AND jsonb_typeof(c.before -> 'metadata') = 'object'
)
UPDATE memory_events e
SET detail = jsonb_set(e.detail #- '{previous,metadata}', '{previous,metadata_patch}', p.patch)
FROM patched p
WHERE e.id = p.id AND octet_length(p.patch::text) < octet_length(p.metadata::text);

UPDATE memory_events SET content = NULL
WHERE event = 'updated' AND content IS NOT NULL AND NOT coalesce(detail -> 'previous' ? 'content', false);

RESET ROLE;
