"""A model's config.json is read by one reader: every command that reads one refuses a bad one in the same
line, naming the file and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hubkit.adapters.base_check import BaseConfig
from hubkit.errors import FileFormatError, FileTooLargeError
from hubkit.export import plan_gguf_export
from hubkit.formats.gguf import GGUFMetadata
from hubkit.formats.model_config import read_model_config
from hubkit.merge.base_files import copy_carried_files
from hubkit.merge.plan import plan_merge
from hubkit.release.base_files import check_base_files

QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "vocab_size": 128,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": True,
}
BAD = {
    "cut short": (b'{"model_type": "qwen3", "vocab_size": 1', "not JSON"),
    "a list": (b"[]", "not a JSON object"),
    "a vocabulary of 2^31": (json.dumps({**QWEN3, "vocab_size": 2**31}).encode(), "vocab_size is 2147483648"),
    "layers in text_config": (
        json.dumps({**QWEN3, "text_config": {"num_hidden_layers": "36"}}).encode(),
        "text_config.num_hidden_layers is 36, not an integer",
    ),
    "2 MB": (b" " * 2_000_000 + b"{}", "2.0 MB, more than the 1.0 MB allowed"),
}


def _readers(folder: Path, tmp_path: Path):
    """Every path that reads a model's config.json: the push's check against the base, a release's base
    checked, the merge's plan and carried files, the GGUF export."""
    return {
        "the check against the base": lambda: BaseConfig.of("me/base", folder / "config.json"),
        "a release's base": lambda: check_base_files(folder, "me/base"),
        "the merge": lambda: plan_merge(folder, []),
        "the merged config": lambda: copy_carried_files([folder / "config.json"], tmp_path, "bfloat16"),
        "the GGUF export": lambda: plan_gguf_export(
            folder, tmp_path / "out", ["bf16"], GGUFMetadata(name="x")
        ),
    }


@pytest.mark.parametrize("case", BAD)
def test_a_bad_config_is_refused_in_one_line_by_every_reader(case: str, tmp_path: Path) -> None:
    body, says = BAD[case]
    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "config.json").write_bytes(body)
    for name, read in _readers(folder, tmp_path).items():
        with pytest.raises(FileFormatError) as refused:
            read()
        message = str(refused.value)
        assert says in message and "config.json" in message, name
        assert message.endswith("re-download the model, or save its config again with transformers"), name
        assert "\n" not in message, name
    if case == "2 MB":  # refused from its size, unread
        assert isinstance(refused.value, FileTooLargeError)


def test_a_missing_config_is_refused_the_same_way(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match=r"^base/config.json: no such file: re-download the model"):
        read_model_config(tmp_path / "base" / "config.json")


def test_the_typed_fields_are_read_off_the_top_or_text_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3))
    config = read_model_config(tmp_path / "config.json")
    assert (config.vocab_size, config.num_hidden_layers, config.dtype) == (128, 2, "bfloat16")
    assert config.tied and not config.quantized
    nested = {"model_type": "gemma3", "text_config": {"vocab_size": 262_144, "num_hidden_layers": 34}}
    (tmp_path / "config.json").write_text(json.dumps({**nested, "quantization_config": {"bits": 4}}))
    config = read_model_config(tmp_path / "config.json")
    assert (config.vocab_size, config.num_hidden_layers, config.dtype) == (262_144, 34, "float32")
    assert config.quantized and not config.tied
