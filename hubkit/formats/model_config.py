"""A model's ``config.json``: the one reader of it, bounded and typed.

    config = read_model_config(base_dir / CONFIG, "base model Qwen/Qwen3-4B config.json")
    config.vocab_size, config.num_hidden_layers, config.dtype, config.tied, config.quantized

Read within `MAX_BYTES` and the JSON depth bound, and refused in one line naming the file and what to do
when it is not a JSON object, or gives a size no model has (a ``vocab_size`` of 2^31 would be
allocated), at the top or in ``text_config``. `ModelConfig.values` is the whole parsed object, for the
readers of an architecture's own keys (the GGUF export, the Linear shapes read off a config).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hubkit.errors import FileFormatError
from hubkit.formats.json_fields import is_count
from hubkit.formats.json_file import parse_json_object, read_bounded

CONFIG = "config.json"
MAX_BYTES = 1_000_000
# Far above every released model (Gemma 3: 262,144 tokens, 5,376 hidden; Llama 3.1 405B: 126 layers).
MAX_SIZES = {
    "vocab_size": 1 << 21,
    "hidden_size": 1 << 16,
    "intermediate_size": 1 << 18,
    "num_hidden_layers": 1 << 10,
    "num_attention_heads": 1 << 10,
    "num_key_value_heads": 1 << 10,
    "head_dim": 1 << 12,
    "max_position_embeddings": 1 << 24,
}
_WHAT_TO_DO = "re-download the model, or save its config again with transformers"


@dataclass(frozen=True)
class ModelConfig:
    """A model's config.json as read: `values`, the parsed object, its sizes checked; `sha256`, the hex
    digest of the file's bytes."""

    label: str
    values: dict[str, Any] = field(repr=False)
    sha256: str

    @property
    def text(self) -> dict[str, Any]:
        """The language model's own part: ``text_config`` where the config nests one, else the config."""
        nested = self.values.get("text_config")
        return nested if isinstance(nested, dict) else self.values

    @property
    def vocab_size(self) -> int | None:
        """The vocabulary's size (the top level's, else ``text_config``'s), or None when neither names one."""
        vocab = self.values.get("vocab_size", self.text.get("vocab_size"))
        return vocab if is_count(vocab) else None

    @property
    def num_hidden_layers(self) -> int | None:
        """The decoder's layers, or None when the config names none."""
        layers = self.text.get("num_hidden_layers")
        return layers if is_count(layers) else None

    @property
    def dtype(self) -> str:
        """The weights' dtype (``dtype``, or the older ``torch_dtype``); ``float32`` when it names none
        (transformers' default)."""
        dtype = self.values.get("dtype") or self.values.get("torch_dtype")
        return dtype if isinstance(dtype, str) else "float32"

    @property
    def tied(self) -> bool:
        """Whether lm_head shares the input embedding's weight (``tie_word_embeddings``)."""
        return bool(self.values.get("tie_word_embeddings"))

    @property
    def quantized(self) -> bool:
        """Whether the weights are quantized (a ``quantization_config``: a 4-bit base)."""
        return isinstance(self.values.get("quantization_config"), dict)


def parse_model_config(data: bytes, label: str) -> ModelConfig:
    """A config.json's bytes, parsed and checked.

    Raises:
        FileFormatError: one line naming `label` and what to do: not a JSON object, or a size out of bounds.
    """
    try:
        values = parse_json_object(data, label)
    except FileFormatError as e:
        raise type(e)(f"{e}: {_WHAT_TO_DO}") from e
    nested = values.get("text_config")
    for where, part in (("", values), ("text_config.", nested if isinstance(nested, dict) else {})):
        for key, bound in MAX_SIZES.items():
            value = part.get(key)
            if value is not None and not is_count(value, bound):
                raise FileFormatError(
                    f"{label}: {where}{key} is {str(value)[:40]}, not an integer from 1 to {bound}: {_WHAT_TO_DO}"
                )
    return ModelConfig(label=label, values=values, sha256=hashlib.sha256(data).hexdigest())


def read_model_config(path: Path, label: str | None = None) -> ModelConfig:
    """`parse_model_config` of the file at `path` (a model folder's config.json), read bounded; `label`
    defaults to its folder and name (``Qwen3-4B/config.json``).

    Raises:
        FileFormatError: missing, over `MAX_BYTES`, or as `parse_model_config`.
    """
    path = Path(path)
    label = label or f"{path.parent.name}/{path.name}"
    try:
        data = read_bounded(path, MAX_BYTES, label)
    except FileFormatError as e:  # a FileTooLargeError stays one
        raise type(e)(f"{e}: {_WHAT_TO_DO}") from e
    return parse_model_config(data, label)
