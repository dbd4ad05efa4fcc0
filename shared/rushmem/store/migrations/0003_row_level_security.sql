-- Row-level security: a second wall behind the application's own WHERE user_id = ...
--
-- Every transaction of the application says whose memories it works on with
-- set_config('agent_memory.user_id', <user>, true) (transaction-local, so it is safe on pooled
-- connections and RDS Proxy). A query that forgets its user scope then sees nothing, and a
-- write for another user is refused.
--
-- Roles (NOLOGIN groups; the login role of the functions is made a member of agent_memory_app
-- by the migration path, AGENT_MEMORY_APP_DB_USER, or by a DBA, see SECURITY.md):
--   agent_memory_app          the functions: read/write, always scoped to one user
--   agent_memory_maintenance  purge and re-embedding: every user's rows, no DDL
-- FORCE makes the table owner obey the policies too; only superusers and roles with
-- BYPASSRLS skip them.
--
-- Roles a DBA made beforehand are used as they are, so an owner without CREATEROLE can migrate
-- (CREATE ROLE checks the privilege before it checks whether the role exists).
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_app') THEN
        CREATE ROLE agent_memory_app NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- roles are cluster-wide: another database (or a concurrent migration) made it
END
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_maintenance') THEN
        CREATE ROLE agent_memory_maintenance NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$;

DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO agent_memory_app, agent_memory_maintenance', current_schema());
    -- Whoever runs the migrations (the owner) may switch to the maintenance role for purges.
    -- PostgreSQL 16+ gives a role's creator ADMIN on it but not SET: check SET there, and grant
    -- without INHERIT, so the maintenance policies (USING true) apply to the owner only after an
    -- explicit SET ROLE: otherwise FORCE would not scope the owner's own queries at all.
    IF current_setting('server_version_num')::int >= 160000 THEN
        IF NOT pg_has_role('agent_memory_maintenance', 'SET') THEN
            EXECUTE format('GRANT agent_memory_maintenance TO %I WITH INHERIT FALSE', current_user);
        END IF;
    ELSIF NOT pg_has_role('agent_memory_maintenance', 'MEMBER') THEN
        EXECUTE format('GRANT agent_memory_maintenance TO %I', current_user);
    END IF;
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON user_memories, memory_events
    TO agent_memory_app, agent_memory_maintenance;
GRANT SELECT ON agent_memory_meta, agent_memory_migrations TO agent_memory_app, agent_memory_maintenance;
GRANT UPDATE ON agent_memory_meta TO agent_memory_maintenance;

ALTER TABLE user_memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE user_memories FORCE ROW LEVEL SECURITY;
ALTER TABLE memory_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_events FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS user_memories_tenant ON user_memories;
CREATE POLICY user_memories_tenant ON user_memories
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS user_memories_maintenance ON user_memories;
CREATE POLICY user_memories_maintenance ON user_memories TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

DROP POLICY IF EXISTS memory_events_tenant ON memory_events;
CREATE POLICY memory_events_tenant ON memory_events
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS memory_events_maintenance ON memory_events;
CREATE POLICY memory_events_maintenance ON memory_events TO agent_memory_maintenance
    USING (true) WITH CHECK (true);
