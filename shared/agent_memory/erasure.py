"""Erasure receipts: proof that a user's data was deleted, holding no personal data.

Forgetting a user (``DELETE /memories?user_id=``, ``agent-memory forget --all``) deletes their
memories, history, ingest receipts and usage counts in one transaction and, in
the same transaction, stores a receipt: what was deleted (counts), when, at whose request, and
the subject as a keyed hash, never the user id itself.

The subject is HMAC-SHA256(key, user id), with a random key per deployment that migration 0009
generates in ``agent_memory_meta`` (``erasure_key``). The receipt alone does not tell whose data
it was, and the hash cannot be reversed without the key; someone who holds both the database and
a candidate id can confirm it (``agent-memory erasure --user U``), which is what lets an operator
answer "was this user erased, and when?". A plain hash would let anyone confirm a guessed id,
and ids are often guessable (e-mail addresses, sequential numbers); with the key in the database
they can only be confirmed by whoever can already read the database. Deleting the key makes every
receipt anonymous for good (the receipts stay valid, but can no longer be matched to anyone).
"""

from __future__ import annotations

import hashlib
import hmac

# agent_memory_meta's entry holding the key (hex), written once by migration 0009.
ERASURE_KEY = "erasure_key"


def subject_hash(key: str, user_id: str) -> bytes:
    """The receipt's subject: HMAC-SHA256 of the user id under the deployment's key (hex)."""
    return hmac.new(bytes.fromhex(key), user_id.encode("utf-8"), hashlib.sha256).digest()
