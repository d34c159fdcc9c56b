"""A base's Linear shapes read off its config equal those of the model transformers builds from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hubkit.adapters.base_check import BaseConfig, built_on_meta, linear_shapes, read_off_config

SIZES = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 128,
}

READ_OFF = [
    ("llama", {}),  # head size from the hidden size
    ("llama", {"head_dim": 32, "tie_word_embeddings": True, "mlp_bias": True, "attention_bias": True}),
    ("mistral", {}),
    ("mistral", {"head_dim": 24, "num_key_value_heads": 4}),
    ("qwen2", {}),
    ("qwen2", {"head_dim": 32, "tie_word_embeddings": True}),
    ("qwen3", {"head_dim": 32}),  # Qwen3-4B's kind: 4 heads of 32 on a 64-wide model
    ("qwen3", {"head_dim": 16, "num_key_value_heads": 4, "tie_word_embeddings": True}),
    (  # Qwen3-4B's own numbers
        "qwen3",
        {
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "num_hidden_layers": 36,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
        },
    ),
]
BUILT = [
    ("qwen3", {}),  # no head_dim: Qwen3's config class defaults to 128, not hidden_size / heads
    ("llama", {"num_key_value_heads": None}),  # left to the class
    ("gemma", {"head_dim": 16}),  # a layout hubkit does not read off
]


def _config(tmp_path: Path, model_type: str, changes: dict) -> Path:
    config = {"model_type": model_type, **SIZES, **changes}
    config = {key: value for key, value in config.items() if value is not None}
    path = tmp_path / model_type / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return path


@pytest.mark.parametrize(
    ("model_type", "changes"), READ_OFF, ids=[f"{m}-{i}" for i, (m, _) in enumerate(READ_OFF)]
)
def test_shapesread_off_config_the_config_are_those_transformers_builds(
    tmp_path: Path, model_type: str, changes: dict
) -> None:
    path = _config(tmp_path, model_type, changes)
    read_off = read_off_config(json.loads(path.read_text()))
    assert read_off is not None
    assert read_off == built_on_meta(path)


@pytest.mark.parametrize(("model_type", "changes"), BUILT, ids=[f"{m}-{i}" for i, (m, _) in enumerate(BUILT)])
def test_a_config_that_leaves_a_size_to_its_class_or_another_layout_is_built_by_transformers(
    tmp_path: Path, model_type: str, changes: dict
) -> None:
    path = _config(tmp_path, model_type, changes)
    assert read_off_config(json.loads(path.read_text())) is None
    shapes = linear_shapes(BaseConfig.of(model_type, path))
    assert shapes == built_on_meta(path) and "lm_head" in shapes
