"""Per-user bookkeeping: usage counts and erasures with their receipts."""
