"""The checks every adapter passes before it is published, whichever way it was read.

A saved adapter is checked from its config and safetensors header (`hubkit.adapters.prepare`) and its
tensor data in one read (`hubkit.adapters.weights_read`); one rebuilt from verl's FSDP shards is checked in
memory (`checked_tensors`). Both refuse with the same messages.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, NoReturn

from hubkit.errors import AdapterError
from hubkit.formats.peft import ADAPTER_CONFIG, LoraPair, checked_alpha, lora_pairs
from hubkit.runs.manifest import LoraSettings

if TYPE_CHECKING:
    import torch


def refuse_empty(label: str) -> NoReturn:
    """Refuse an adapter that holds no tensors (an `AdapterError`)."""
    raise AdapterError(
        f"{label}: the adapter holds no tensors (verl 0.6.1 with PEFT >= 0.21 saves empty adapters); "
        "it would load as a no-op"
    )


def refuse_untrained(label: str) -> NoReturn:
    """Refuse an adapter whose every lora_B is zero (an `AdapterError`)."""
    raise AdapterError(f"{label}: every lora_B is zero: the adapter is untrained and would load as a no-op")


def refuse_non_finite(label: str, key: str) -> NoReturn:
    """Refuse an adapter with a NaN or Inf value in tensor `key` (an `AdapterError`)."""
    raise AdapterError(f"{label}: {key} contains NaN or Inf: training diverged at or before this step")


def _is_targeted(module: str, targets: object) -> bool:
    """Whether PEFT would put a LoRA layer on `module` for this ``target_modules`` (its matching rules)."""
    if isinstance(targets, str):
        return targets == "all-linear" or re.fullmatch(targets, module) is not None
    if isinstance(targets, list):
        return any(module == t or module.endswith(f".{t}") for t in targets)
    return False


def check_targets(pairs: dict[str, Any], config: dict[str, Any], label: str) -> None:
    """Refuse weights for modules the config does not target: PEFT would silently not load them.

    Raises:
        AdapterError: naming the first such module.
    """
    targets = config.get("target_modules")
    for module in pairs:
        if not _is_targeted(module, targets):
            raise AdapterError(
                f"{label}: module {module} has LoRA weights but target_modules {targets!r} does not include it "
                "(PEFT would skip them)"
            )


def check_alpha(config: dict[str, Any], lora: LoraSettings | None, label: str) -> int | float:
    """The config's ``lora_alpha``, refused when it is unusable or differs from the manifest's.

    Raises:
        AdapterError: alpha missing, zero or negative, or not the alpha hubkit.json records.
    """
    alpha = checked_alpha(config.get("lora_alpha"), label)
    if lora is not None and float(alpha) != float(lora.alpha):
        raise AdapterError(
            f"{label}: {ADAPTER_CONFIG} says lora_alpha={config.get('lora_alpha')} but hubkit.json says "
            f"{lora.alpha}: fix the manifest"
        )
    return alpha


def checked_tensors(
    tensors: dict[str, torch.Tensor], config: dict[str, Any], label: str
) -> dict[str, LoraPair]:
    """The LoRA pairs of tensors in memory (see `hubkit.formats.peft.lora_pairs`), refusing an empty
    adapter, NaN/Inf values and an untrained (all-zero lora_B) adapter.

    Raises:
        AdapterError: the first refusal.
    """
    import torch

    if not tensors:
        refuse_empty(label)
    for key, tensor in tensors.items():
        if not torch.isfinite(tensor).all():
            refuse_non_finite(label, key)
    pairs = lora_pairs(tensors, config, label)
    if all(not pair.lora_b.any() for pair in pairs.values()):
        refuse_untrained(label)
    return pairs
