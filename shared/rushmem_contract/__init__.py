"""The wire contract of rushmem: what the service and its clients exchange.

The operations' request and response models (:mod:`.models`, :mod:`.schemas`), their limits, the
typed errors (:mod:`.errors`) and the one table from error types to HTTP statuses (:mod:`.kinds`).
Pydantic and the standard library only: the client and the Lambda layer both ship it.
"""
