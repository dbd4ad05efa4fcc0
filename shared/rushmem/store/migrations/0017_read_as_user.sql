-- One statement per read over the RDS Data API.
--
-- Through the Data API every statement is an HTTPS request (~100 ms p50 measured publicly), and a
-- read under row-level security needed four: BeginTransaction, the scope (set_config(..., true)),
-- the query, CommitTransaction. This function carries the scope into the statement: it sets the
-- given settings for the statement's own transaction (is_local), then runs the query and returns
-- its rows, each as one jsonb value. SECURITY INVOKER: it runs with the caller's rights, so the
-- policies bind it exactly as they bind the query sent alone; the caller could set these settings
-- and run this SQL itself, it just saves the round trips. The query reads its parameters from $1
-- (a jsonb object of text values) and is planned after the settings are in place, so the policies'
-- current_setting() sees the user. (statement_timeout cannot be set from inside a running
-- statement: the Data API login has its own, set on the role.)
CREATE OR REPLACE FUNCTION agent_memory_read_as(settings jsonb, query text, params jsonb)
RETURNS SETOF jsonb
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
DECLARE
    name text;
    value text;
BEGIN
    FOR name, value IN SELECT key, s.value FROM jsonb_each_text(settings) AS s LOOP
        PERFORM set_config(name, value, true);
    END LOOP;
    RETURN QUERY EXECUTE query USING params;
END
$$;

REVOKE ALL ON FUNCTION agent_memory_read_as(jsonb, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory_read_as(jsonb, text, jsonb) TO agent_memory_app, agent_memory_maintenance;
