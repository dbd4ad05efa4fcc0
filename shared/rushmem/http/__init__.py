"""The HTTP edge: caller identity, body decoding and the error answers of the handlers."""
