"""The change outbox: change events waiting to be published."""
