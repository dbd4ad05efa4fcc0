"""BERT's encoder forward pass in numpy: what a sentence-transformers BERT model computes at inference.

all-MiniLM-L6-v2 is 6 BERT layers of 384 dimensions. Running them in numpy from the model's
``model.safetensors`` gives the vectors sentence-transformers gives (tested against it) without
importing torch, transformers and scikit-learn, which took ~4 s of every CLI command.
The arithmetic follows ``transformers``' ``BertModel`` in float32, op for op: embeddings (word +
position + token type) and LayerNorm, then per layer self-attention with the padding masked out,
a residual LayerNorm, the GELU feed-forward and another residual LayerNorm.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rushmem_contract.errors import ConfigurationError

Array = npt.NDArray[np.float32]
IntArray = npt.NDArray[np.int64]

# Abramowitz & Stegun 7.1.26: erf to 1.5e-7 absolute, about float32's resolution of GELU's output.
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_GELU_ROWS = 256  # rows per pass: a block of (256, 1536) float32 stays in the CPU's cache
_HALF = np.float32(0.5)


def _gelu_block(x: Array) -> Array:
    """x * Φ(x) with Φ(x) = 0.5 * (1 + erf(x / √2)), in place on temporaries (a third of the naive time)."""
    a1, a2, a3, a4, a5 = _ERF_A
    z = np.abs(x)
    z *= np.float32(1 / np.sqrt(2.0))
    t = z * _ERF_P
    t += 1
    np.reciprocal(t, out=t)
    y = t * a5
    for coefficient in (a4, a3, a2, a1):
        y += coefficient
        y *= t
    z *= z
    np.negative(z, out=z)
    np.exp(z, out=z)
    y *= z  # y = 1 - erf(|x| / √2)
    # Φ(x) = 1 - y/2 for x >= 0 and y/2 below: 0.5 + copysign(0.5 - y/2, x).
    y *= _HALF
    np.subtract(_HALF, y, out=y)
    np.copysign(y, x, out=y)
    y += _HALF
    y *= x
    return y


def gelu(x: Array) -> Array:
    """BERT's exact ("erf") GELU, elementwise on a 2-D array (numpy has no erf; scipy is a 40 MB import)."""
    out = np.empty_like(x)
    for start in range(0, x.shape[0], _GELU_ROWS):
        out[start : start + _GELU_ROWS] = _gelu_block(x[start : start + _GELU_ROWS])
    return out


def layer_norm(x: Array, weight: Array, bias: Array, eps: float) -> Array:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = np.mean(centred * centred, axis=-1, keepdims=True)
    out: Array = centred / np.sqrt(variance + np.float32(eps)) * weight + bias
    return out


_SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None, "F64": "<f8", "I64": "<i8", "I32": "<i4"}


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a ``.safetensors`` file as read-only arrays mapped from the file.

    The format is an 8-byte little-endian header size, a JSON header naming each tensor's dtype,
    shape and byte range, then the raw little-endian data. Mapped rather than read: loading takes
    ~1 ms instead of ~150 ms for copying 90 MB, and the pages come from the OS's file cache as
    the forward pass touches them (of the 30,522 word embeddings, only the rows of the tokens used).
    """
    if not path.is_file():
        raise ConfigurationError(f"{path.parent} has no {path.name}")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        size = int.from_bytes(data[:8].tobytes(), "little")
        header: dict[str, Any] = json.loads(data[8 : 8 + size].tobytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path} is not a safetensors file: {exc}") from exc
    start = 8 + size
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info["dtype"])
        if dtype is None:
            raise ConfigurationError(f"{path}: tensor {name} has dtype {info['dtype']}, which numpy cannot read")
        begin, end = info["data_offsets"]
        tensors[name] = data[start + begin : start + end].view(dtype).reshape(info["shape"])
    return tensors


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    layer_norm_eps: float
    max_position_embeddings: int

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise ConfigurationError(
                f"{path}: model_type {config.get('model_type')!r} with {config.get('hidden_act')!r} is not a BERT "
                "model with GELU"
            )
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigurationError(f"{path}: only absolute position embeddings are supported")
        return cls(
            hidden_size=int(config["hidden_size"]),
            num_attention_heads=int(config["num_attention_heads"]),
            num_hidden_layers=int(config["num_hidden_layers"]),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            max_position_embeddings=int(config.get("max_position_embeddings", 512)),
        )


@dataclass(frozen=True)
class _Layer:
    qkv_weight: Array  # (hidden, 3 * hidden): query, key and value in one matrix product
    qkv_bias: Array
    attention_out_weight: Array
    attention_out_bias: Array
    attention_norm: tuple[Array, Array]
    intermediate_weight: Array
    intermediate_bias: Array
    output_weight: Array
    output_bias: Array
    output_norm: tuple[Array, Array]


class BertEncoder:
    """The last hidden state of a BERT model for a padded batch of token ids."""

    def __init__(self, config: BertConfig, weights: Mapping[str, Array]) -> None:
        self.config = config

        def get(name: str) -> Array:
            # Checkpoints saved from BertForX carry a "bert." prefix.
            for key in (name, f"bert.{name}"):
                if key in weights:
                    return np.asarray(weights[key], dtype=np.float32)
            raise ConfigurationError(f"the model's weights have no {name}")

        def linear(prefix: str) -> tuple[Array, Array]:
            # Stored (out, in) as torch's Linear: the transposed view multiplies without a copy (BLAS reads it as is).
            return get(f"{prefix}.weight").T, get(f"{prefix}.bias")

        def norm(prefix: str) -> tuple[Array, Array]:
            return get(f"{prefix}.weight"), get(f"{prefix}.bias")

        self.word_embeddings = get("embeddings.word_embeddings.weight")
        self.position_embeddings = get("embeddings.position_embeddings.weight")
        self.token_type_embeddings = get("embeddings.token_type_embeddings.weight")
        self.embedding_norm = norm("embeddings.LayerNorm")
        self.layers: list[_Layer] = []
        for i in range(config.num_hidden_layers):
            p = f"encoder.layer.{i}"
            q, k, v = (linear(f"{p}.attention.self.{name}") for name in ("query", "key", "value"))
            attention_out = linear(f"{p}.attention.output.dense")
            intermediate = linear(f"{p}.intermediate.dense")
            output = linear(f"{p}.output.dense")
            self.layers.append(
                _Layer(
                    qkv_weight=np.ascontiguousarray(np.concatenate([q[0], k[0], v[0]], axis=1)),
                    qkv_bias=np.concatenate([q[1], k[1], v[1]]),
                    attention_out_weight=attention_out[0],
                    attention_out_bias=attention_out[1],
                    attention_norm=norm(f"{p}.attention.output.LayerNorm"),
                    intermediate_weight=intermediate[0],
                    intermediate_bias=intermediate[1],
                    output_weight=output[0],
                    output_bias=output[1],
                    output_norm=norm(f"{p}.output.LayerNorm"),
                )
            )

    @classmethod
    def from_directory(cls, model_dir: Path) -> BertEncoder:
        """``config.json`` and ``model.safetensors`` of a Hugging Face BERT checkpoint."""
        return cls(BertConfig.from_file(model_dir / "config.json"), read_safetensors(model_dir / "model.safetensors"))

    def __call__(self, input_ids: IntArray, attention_mask: IntArray) -> Array:
        """(batch, tokens, hidden) for right-padded ids; token type 0 throughout (single sentences)."""
        cfg = self.config
        batch, length = input_ids.shape
        if length > cfg.max_position_embeddings:
            raise ValueError(f"{length} tokens, more than the model's {cfg.max_position_embeddings} positions")
        heads = cfg.num_attention_heads
        head_size = cfg.hidden_size // heads
        eps = cfg.layer_norm_eps

        x = self.word_embeddings[input_ids] + self.token_type_embeddings[0] + self.position_embeddings[:length]
        x = layer_norm(x, *self.embedding_norm, eps).reshape(batch * length, cfg.hidden_size)
        # Padded keys get the dtype's minimum added before the softmax, as transformers does: weight 0.
        mask_bias = ((1.0 - attention_mask.astype(np.float32)) * np.finfo(np.float32).min)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head_size))

        for layer in self.layers:
            qkv = x @ layer.qkv_weight + layer.qkv_bias
            # (3, batch, heads, tokens, head_size)
            q, k, v = qkv.reshape(batch, length, 3, heads, head_size).transpose(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + mask_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, cfg.hidden_size)
            attended = context @ layer.attention_out_weight + layer.attention_out_bias
            x = layer_norm(attended + x, *layer.attention_norm, eps)
            hidden = gelu(x @ layer.intermediate_weight + layer.intermediate_bias)
            x = layer_norm(hidden @ layer.output_weight + layer.output_bias + x, *layer.output_norm, eps)
        out: Array = x.reshape(batch, length, cfg.hidden_size)
        return out
