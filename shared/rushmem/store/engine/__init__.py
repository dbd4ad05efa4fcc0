"""Reaching PostgreSQL and staying connected: the session protocol the store's SQL runs on and its two
engines (a psycopg connection, the RDS Data API), the embedded server, reader endpoints, and the
transactions every statement runs in."""
