"""The schema: numbered migrations (``store/migrations/``), the database roles, the deploy-time setup that
applies both, and moving the store to another embedding model."""
