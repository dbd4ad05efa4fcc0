"""What the store keeps about extraction itself: each project's extraction instructions (:mod:`.instructions`)."""
