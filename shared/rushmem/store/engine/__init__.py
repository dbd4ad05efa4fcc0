"""Reaching PostgreSQL and staying connected: the connection (direct or through the RDS Data API), the
embedded server, reader endpoints, and the transactions every statement runs in."""
