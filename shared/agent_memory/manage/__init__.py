"""What users and operators do with stored memories: list (paged), history, forget, purge."""
