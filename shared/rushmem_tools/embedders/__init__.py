"""Embedding providers that never run in Lambda, found by the runtime's ``create_embedder`` through the
entry point group ``rushmem.embedders`` (the root pyproject.toml): ``local``, the offline model
(:meth:`.local.LocalEmbedder.from_settings`). Each entry point is a factory ``(Settings) -> Embedder``
and stays cheap: the model loads on first use."""
