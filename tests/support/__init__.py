"""What the tests share: stand-ins for the services the stack talks to (the RDS Data API, a streaming
replica, an OAuth issuer, SigV4 signing, database faults) and helpers that drive each door."""
