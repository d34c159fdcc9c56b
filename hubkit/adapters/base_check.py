"""The check of an adapter against its base model: every adapted module exists there, with its shapes.

A base model's Linear layers by module name, as (in_features, out_features), are what an adapter's LoRA
pairs are checked against. For the decoder layouts that transformers builds the same way (Llama,
Mistral, Qwen2, Qwen3: q/k/v/o attention projections, gate/up/down MLP, lm_head) they are read off
``config.json`` itself, without importing torch or transformers (seconds at the start of a `hubkit push`).
Any other model type, or a config that leaves a size to its config class's defaults, is built by
transformers on the meta device. A test holds the two ways equal for each layout read off the config.

Only the base's ``config.json`` is downloaded (`BaseConfig.download`), once per push; the run directory
remembers the shapes (``.hubkit/base-shapes/``) and each adapter file that passed
(``.hubkit/base-checks/``), so a push of one new checkpoint builds no model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

from hubkit.errors import BaseModelMismatchError
from hubkit.formats.json_fields import is_count
from hubkit.formats.model_config import CONFIG, ModelConfig, read_model_config
from hubkit.formats.peft import (
    ADAPTER_WEIGHTS,
    EMBEDDING_LAYER_NAMES,
    full_weights,
    lora_pairs,
    read_adapter_config,
    read_weights_header,
)
from hubkit.formats.safetensors import TensorInfo
from hubkit.hub.download import cached_repo_file, download_repo_file
from hubkit.hub.hashing import FileVersion
from hubkit.runs.state import BASE_CHECKS_DIR, BASE_SHAPES_DIR, keep

# model_type (what AutoModelForCausalLM builds from) → whether its attention takes hidden_size //
# num_attention_heads as the head size when the config names none (Qwen3's config class defaults to 128).
_HEAD_DIM_FROM_HIDDEN = {"llama": True, "mistral": True, "qwen2": True, "qwen3": False}
_REQUIRED = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "num_hidden_layers",
    "vocab_size",
)


def linear_shapes(base: BaseConfig) -> dict[str, tuple[int, int]]:
    """(in_features, out_features) of every Linear in the base whose config is `base`."""
    return read_off_config(base.config.values) or built_on_meta(base.path)


def read_off_config(config: dict) -> dict[str, tuple[int, int]] | None:
    """The shapes of a known decoder layout from its config's own numbers; None when it is not one, or
    when a number it needs is left to the config class's default."""
    model_type = config.get("model_type")
    if model_type not in _HEAD_DIM_FROM_HIDDEN or not all(is_count(config.get(key)) for key in _REQUIRED):
        return None
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim")
    if head_dim is None:
        if not _HEAD_DIM_FROM_HIDDEN[model_type]:
            return None
        head_dim = hidden // heads
    elif not is_count(head_dim):
        return None
    attention, kv, mlp = (
        heads * head_dim,
        config["num_key_value_heads"] * head_dim,
        config["intermediate_size"],
    )
    per_layer = {
        "self_attn.q_proj": (hidden, attention),
        "self_attn.k_proj": (hidden, kv),
        "self_attn.v_proj": (hidden, kv),
        "self_attn.o_proj": (attention, hidden),
        "mlp.gate_proj": (hidden, mlp),
        "mlp.up_proj": (hidden, mlp),
        "mlp.down_proj": (mlp, hidden),
    }
    shapes = {
        f"model.layers.{layer}.{name}": shape
        for layer in range(config["num_hidden_layers"])
        for name, shape in per_layer.items()
    }
    shapes["lm_head"] = (hidden, config["vocab_size"])
    return shapes


def built_on_meta(config_path: Path) -> dict[str, tuple[int, int]]:
    """The shapes of the model transformers builds from the config, on the meta device (no weights)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers < 5
        from transformers.modeling_utils import no_init_weights

    config = AutoConfig.from_pretrained(Path(config_path).parent)
    # Architecture only: no memory for weights, nothing downloaded, no time spent initializing them.
    with torch.device("meta"), no_init_weights():
        model = AutoModelForCausalLM.from_config(config)
    return {
        name: (module.in_features, module.out_features)
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    }


# --- checking against the base model --------------------------------------------------------------


@dataclass(frozen=True)
class BaseConfig:
    """A base model's ``config.json`` on this machine, and what a check against it depends on.

    Args:
        base_model: its Hub id.
        path: the downloaded file.
        config: the file as read (`hubkit.formats.model_config`).
        key: the config's sha256 and the transformers version (which builds the shapes it cannot read off).
    """

    base_model: str
    path: Path
    config: ModelConfig
    key: str

    @classmethod
    def download(
        cls, base_model: str, revision: str | None, *, endpoint: str | None, token: str | None
    ) -> BaseConfig:
        """The base's ``config.json``, downloaded into the client's cache.

        Raises:
            RepoNotFoundError: the base model or its revision is not on the Hub (other Hub failures as
                `hubkit.hub.failures` names them).
            BaseModelMismatchError: the base has no config.json.
            FileFormatError: the config is not one (`read_model_config`).
        """
        path = download_repo_file(base_model, CONFIG, revision=revision, endpoint=endpoint, token=token)
        if path is None:
            at = f" at revision {revision}" if revision else ""
            raise BaseModelMismatchError(
                f"base model {base_model}{at} has no config.json on the Hub: check the base model id"
            )
        return cls.of(base_model, path)

    @classmethod
    def cached(cls, base_model: str, revision: str | None) -> BaseConfig | None:
        """The base's ``config.json`` as the client's cache holds it from an earlier download, or None; opens
        no connection (a dry run)."""
        path = cached_repo_file(base_model, CONFIG, revision=revision)
        return cls.of(base_model, path) if path is not None else None

    @classmethod
    def of(cls, base_model: str, path: Path) -> BaseConfig:
        """A config already on disk (a local base model folder).

        Raises:
            FileFormatError: the config is not one (`read_model_config`).
        """
        config = read_model_config(Path(path), f"base model {base_model} {CONFIG}")
        key = f"{config.sha256}\n{installed_version('transformers')}"
        return cls(base_model=base_model, path=Path(path), config=config, key=key)


def _remembered_linear_shapes(run_dir: Path, base: BaseConfig) -> dict[str, tuple[int, int]]:
    """`linear_shapes`, kept in `run_dir` by the config's content and the transformers version."""
    path = run_dir / BASE_SHAPES_DIR / f"{hashlib.sha256(base.key.encode()).hexdigest()[:32]}.json"
    try:
        linears = json.loads(path.read_text())["linears"]
        return {str(name): (int(shape[0]), int(shape[1])) for name, shape in linears.items()}
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        pass  # not remembered yet, or unreadable: built again
    shapes = linear_shapes(base)
    keep(path, json.dumps({"linears": shapes}, indent=0) + "\n", "the base model's shapes")
    return shapes


def _base_check_record(run_dir: Path, weights: Path, base: BaseConfig) -> Path | None:
    """Where a passing check of this version of `weights` against this base config is remembered."""
    try:
        weights_version = FileVersion.of(weights)
    except OSError:
        return None  # the check says what is missing
    key = f"{weights_version}\n{base.key}"
    return run_dir / BASE_CHECKS_DIR / hashlib.sha256(key.encode()).hexdigest()[:32]


def check_against_base(
    adapter_dir: Path, base: BaseConfig, *, label: str | None = None, run_dir: Path | None = None
) -> None:
    """Check that every adapted module exists in the base model, with matching shapes, and that the adapter's
    config gives the ranks its weights have (from the files' headers: no tensor is built).

    Args:
        adapter_dir: a prepared adapter directory (see `hubkit.adapters.prepare.prepare_adapter`).
        label: how errors name the checkpoint; default the directory name.
        run_dir: the adapter's run directory: a passing check is remembered there (`.hubkit/base-checks/`,
            by weights file version and base config), and that file is not checked against that config again;
            so are the base's shapes (`.hubkit/base-shapes/`), which are then not built again.

    Raises:
        BaseModelMismatchError: a module is missing from the base or has other shapes.
        AdapterError: the adapter weights file is missing or truncated, or its config is out of bounds or
            does not describe its weights.
    """
    label = label or adapter_dir.name
    base_model = base.base_model
    record = _base_check_record(run_dir, Path(adapter_dir) / ADAPTER_WEIGHTS, base) if run_dir else None
    if record is not None and record.exists():
        return
    header = read_weights_header(Path(adapter_dir), label)
    # Every tensor belongs to a pair (DoRA's magnitude has its lora_B's rows) or is a whole weight (a frozen
    # copy is one too): checking A, B and the whole weights checks all.
    config = read_adapter_config(Path(adapter_dir), label)
    pairs = lora_pairs(header.by_name(), config, label)
    linears = _remembered_linear_shapes(run_dir, base) if run_dir else linear_shapes(base)
    whole = saved_whole(header.by_name(), config, label)
    linears = _check_full_weights(whole, linears, base_model, label)
    if "lm_head" in linears:  # an embedding, (vocab, dim), is lm_head's (dim -> vocab) turned around
        turned = tuple(reversed(linears["lm_head"]))
        linears = {**linears, **{m: turned for m, pair in pairs.items() if pair.embedding}}
    parts = [
        (module, part, tensor)
        for module, pair in pairs.items()
        for part, tensor in (("A", pair.lora_a), ("B", pair.lora_b))
    ]
    for module, part, tensor in parts:
        if module not in linears:
            raise BaseModelMismatchError(
                f"{label}: module {module} does not exist in {base_model}: was it trained on another base?"
            )
        in_features, out_features = linears[module]
        shape = tensor.shape
        expected_dim, actual_dim = (in_features, shape[1]) if part == "A" else (out_features, shape[0])
        if actual_dim != expected_dim:
            raise BaseModelMismatchError(
                f"{label}: {module}.lora_{part} has shape {shape} but {base_model}'s {module} "
                f"is {in_features}->{out_features}: was it trained on another base?"
            )
    if record is not None:
        keep(record, "", "a base model check")


def saved_whole(tensors: Mapping[str, Any], config: dict[str, Any], label: str) -> dict[str, Any]:
    """The weights an adapter saved whole, by module, which PEFT loads in place of the base's: those of
    `hubkit.formats.peft.full_weights`, and the frozen copy of an embedding or head a LoRA adapts
    (``<module>.base_layer.weight``, which `save_embedding_layers` stores: a resized vocabulary's rows)."""
    pairs = lora_pairs(tensors, config, label)
    whole = full_weights(tensors, config)
    return whole | {module: pair.base_copy for module, pair in pairs.items() if pair.base_copy is not None}


def resized_vocabulary(weights: dict[str, TensorInfo], hidden: int, vocab: int) -> int | None:
    """The rows of the whole embeddings an adapter carries when tokens were added and the embeddings resized
    (``resize_token_embeddings`` before ``get_peft_model``: every embedding and head it saves has the same
    other number of rows of `hidden` columns), else None."""
    rows = {
        tensor.shape[0]
        for module, tensor in weights.items()
        if module.split(".")[-1] in EMBEDDING_LAYER_NAMES
        and len(tensor.shape) == 2
        and tensor.shape[1] == hidden
    }
    return rows.pop() if len(rows) == 1 and vocab not in rows else None


def _check_full_weights(
    weights: dict[str, TensorInfo], linears: dict[str, tuple[int, int]], base_model: str, label: str
) -> dict[str, tuple[int, int]]:
    """The whole weights an adapter carries (`hubkit.formats.peft.full_weights`) have the base's shapes: an
    embedding has lm_head's rows (the vocabulary, or the one it was resized to), a Linear its (out, in).

    Returns:
        `linears`, with lm_head's rows the resized vocabulary's when the adapter resized it.
    """
    if "lm_head" in linears:
        hidden, vocab = linears["lm_head"]
        resized = resized_vocabulary(weights, hidden, vocab)
        if resized is not None:
            linears = {**linears, "lm_head": (hidden, resized)}
    for module, tensor in weights.items():
        if module.split(".")[-1] in EMBEDDING_LAYER_NAMES and "lm_head" in linears:
            expected = tuple(reversed(linears["lm_head"]))
        elif module in linears:
            expected = tuple(reversed(linears[module]))
        else:
            raise BaseModelMismatchError(
                f"{label}: the adapter carries a full {module}, which {base_model} has no Linear or embedding of"
            )
        if tuple(tensor.shape) != expected:
            raise BaseModelMismatchError(
                f"{label}: the adapter's full {module} has shape {tuple(tensor.shape)} but {base_model}'s is "
                f"{expected}: was it trained on another base?"
            )
    return linears


def resized_rows(adapter_dir: Path, base: BaseConfig) -> int | None:
    """The rows of the vocabulary an adapter resized its base's to (`resized_vocabulary`), read off the weights'
    header and the base's config; None when it keeps the base's (or the config gives no lm_head)."""
    header = read_weights_header(Path(adapter_dir), Path(adapter_dir).name)
    config = read_adapter_config(Path(adapter_dir), Path(adapter_dir).name)
    head = read_off_config(base.config.values)
    if head is None or "lm_head" not in head:
        return None
    return resized_vocabulary(saved_whole(header.by_name(), config, Path(adapter_dir).name), *head["lm_head"])
