"""The schema and its administration: migrations, database roles, re-embedding."""
