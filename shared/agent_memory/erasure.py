"""Erasure receipts: proof that a user's data was deleted, holding no personal data. The subject
is HMAC-SHA256(key, user id) under a random per-deployment key (``erasure_key`` in
``agent_memory_meta``, from migration 0009): only someone who can read the database can match a
receipt to an id. Why keyed, and what a receipt holds: docs/tenant-data.md (Erasure receipts).
"""

from __future__ import annotations

import hashlib
import hmac

# agent_memory_meta's entry holding the key (hex), written once by migration 0009.
ERASURE_KEY = "erasure_key"


def subject_hash(key: str, user_id: str) -> bytes:
    """The receipt's subject: HMAC-SHA256 of the user id under the deployment's key (hex)."""
    return hmac.new(bytes.fromhex(key), user_id.encode("utf-8"), hashlib.sha256).digest()
