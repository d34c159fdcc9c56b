"""Read a PEFT LoRA adapter folder into the (A, B, scale) triples that the merge folds in."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from hubkit.errors import AdapterError, MergeError
from hubkit.merge.lora import lora_scale

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# PEFT saves `base_model.model.<module>.lora_A.weight`; <module> is the base model's module name.
PEFT_PREFIX = "base_model.model."
# PEFT also saves a frozen copy of a LoRA-adapted embedding or lm_head (`save_embedding_layers`) under
# `<module>.base_layer.weight`; the merge takes that weight from the base shards instead.
_FROZEN_COPY = ".base_layer.weight"
_LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")

# LoraConfig options that change what a merge must compute; hubkit merges plain LoRA and rsLoRA only.
_UNSUPPORTED_OPTIONS = {
    "use_dora": "DoRA (its magnitude vector rescales each merged weight)",
    "lora_bias": "LoRA biases",
    "fan_in_fan_out": "fan_in_fan_out (Conv1D) layers",
    "modules_to_save": "fully trained modules (modules_to_save)",
    "trainable_token_indices": "trainable tokens",
    "target_parameters": "target_parameters (parameter LoRA)",
    "layer_replication": "layer replication",
    "alora_invocation_tokens": "activated LoRA",
    "use_qalora": "QA-LoRA",
    "use_bdlora": "block-diagonal LoRA",
}


@dataclass(frozen=True)
class LoraModule:
    """One adapted Linear: where it sits in the base model and what to add to its weight."""

    module: str  # base model module name, e.g. "model.layers.0.self_attn.q_proj"
    lora_a: torch.Tensor  # (r, in)
    lora_b: torch.Tensor  # (out, r)
    scale: float

    @property
    def weight_name(self) -> str:
        return f"{self.module}.weight"


def load_lora_adapter(adapter_dir: Path) -> list[LoraModule]:
    """Load every LoRA module of a PEFT adapter folder, with PEFT's per-module rank and scaling.

    Args:
        adapter_dir: a folder with adapter_config.json and adapter_model.safetensors.

    Returns:
        One LoraModule per adapted module, sorted by module name.

    Raises:
        AdapterError: a file is missing or unreadable, the adapter is not LoRA, or a key is not a
            PEFT LoRA key.
        MergeError: the adapter uses a LoRA variant hubkit cannot merge (DoRA, biases, ...).
    """
    config = _read_config(adapter_dir)
    for option, what in _UNSUPPORTED_OPTIONS.items():
        if config.get(option):
            raise MergeError(
                f"the adapter uses {what}, which hubkit cannot merge; merge it with PEFT instead"
            )
    try:
        tensors = load_file(adapter_dir / ADAPTER_WEIGHTS)
    except (FileNotFoundError, SafetensorError) as e:
        raise AdapterError(
            f"cannot read {ADAPTER_WEIGHTS} in the adapter folder ({e}); re-save the adapter"
        ) from e

    pairs: dict[str, dict[str, torch.Tensor]] = {}
    frozen_copies = []
    for key, tensor in tensors.items():
        match = _LORA_KEY.match(key.removeprefix(PEFT_PREFIX))
        if key.startswith(PEFT_PREFIX) and key.endswith(_FROZEN_COPY):
            frozen_copies.append(key.removeprefix(PEFT_PREFIX).removesuffix(_FROZEN_COPY))
        elif not key.startswith(PEFT_PREFIX) or match is None:
            if "lora_magnitude_vector" in key:
                raise MergeError("the adapter holds DoRA magnitude vectors, which hubkit cannot merge")
            raise AdapterError(
                f"adapter key {key} is not a PEFT LoRA Linear key; normalize the adapter first"
            )
        else:
            pairs.setdefault(match["module"], {})[match["part"]] = tensor
    for module in frozen_copies:
        if module not in pairs:
            raise AdapterError(
                f"the adapter stores a full {module} weight without LoRA; hubkit cannot merge it"
            )

    modules = []
    for module, pair in sorted(pairs.items()):
        if set(pair) != {"A", "B"}:
            raise AdapterError(
                f"adapter module {module} has lora_A or lora_B but not both; re-save the adapter"
            )
        modules.append(_lora_module(module, pair["A"], pair["B"], config))
    if not modules:
        raise AdapterError("the adapter holds no LoRA weights; it would merge as a no-op")
    return modules


def _read_config(adapter_dir: Path) -> dict:
    path = adapter_dir / ADAPTER_CONFIG
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise AdapterError(f"no {ADAPTER_CONFIG} in the adapter folder {adapter_dir.name}") from e
    except json.JSONDecodeError as e:
        raise AdapterError(f"{ADAPTER_CONFIG} is not valid JSON ({e}); re-save the adapter") from e
    if config.get("peft_type") != "LORA":
        raise MergeError(
            f"the adapter is {config.get('peft_type')!r}, not LoRA; hubkit merges LoRA adapters only"
        )
    return config


def _lora_module(module: str, lora_a: torch.Tensor, lora_b: torch.Tensor, config: dict) -> LoraModule:
    if lora_a.dim() != 2 or lora_b.dim() != 2 or lora_a.shape[0] != lora_b.shape[1]:
        raise AdapterError(
            f"adapter module {module} has lora_A {tuple(lora_a.shape)} and lora_B {tuple(lora_b.shape)}, "
            "which do not form a LoRA pair; re-save the adapter"
        )
    rank = config.get("rank_pattern", {}).get(
        _pattern_key(config.get("rank_pattern", {}), module), config["r"]
    )
    alpha = config.get("alpha_pattern", {}).get(
        _pattern_key(config.get("alpha_pattern", {}), module), config["lora_alpha"]
    )
    if rank != lora_a.shape[0]:
        raise AdapterError(f"adapter module {module} has rank {lora_a.shape[0]} but its config says r={rank}")
    if not alpha:
        raise AdapterError(f"adapter module {module} has lora_alpha {alpha}; it would merge as a no-op")
    scale = lora_scale(alpha, rank, bool(config.get("use_rslora")))
    return LoraModule(module=module, lora_a=lora_a, lora_b=lora_b, scale=scale)


def _pattern_key(patterns: dict[str, object], module: str) -> str:
    # PEFT's rule (peft.utils.other.get_pattern_key): a pattern matches a suffix of the module name.
    for key in patterns:
        if re.match(rf"(.*\.)?({key})$", module):
            return key
    return module
