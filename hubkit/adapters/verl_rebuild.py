"""A verl checkpoint's adapter rebuilt from its FSDP shards, for when verl saved none (or an empty one).

verl 0.6.1 with PEFT >= 0.21 saves an empty ``lora_adapter/`` and newer verl saves none, but the actor's
FSDP shards hold every LoRA tensor. The config is written from the LoRA settings verl trained with
(``lora_train_meta.json``, else the manifest's ``lora``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hubkit.adapters.checks import checked_tensors
from hubkit.errors import CheckpointError
from hubkit.formats.fsdp import load_lora_tensors
from hubkit.formats.peft import normalize_key, parse_lora_key
from hubkit.runs.manifest import LoraSettings
from hubkit.runs.model import Checkpoint, Run
from hubkit.runs.verl import lora_from_meta

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class RebuiltAdapter:
    """An adapter's tensors (PEFT's key names), its config and how many modules it adapts; checked."""

    tensors: dict[str, torch.Tensor]
    config: dict[str, Any]
    num_modules: int


def _rebuilt_config(modules: set[str], lora: LoraSettings, run: Run) -> dict[str, Any]:
    """A LoRA config for tensors rebuilt from verl's shards (verl builds LoRA with these fixed settings)."""
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": run.manifest.base_model,
        "revision": run.manifest.base_model_revision,
        "r": lora.r,
        "lora_alpha": lora.alpha,
        "lora_dropout": lora.dropout,
        "use_rslora": lora.use_rslora,
        "bias": "none",
        "target_modules": sorted({module.rsplit(".", 1)[-1] for module in modules}),
        "inference_mode": True,
        "fan_in_fan_out": False,
        "use_dora": False,
        "init_lora_weights": True,
        "modules_to_save": None,
    }


def rebuild_adapter(checkpoint: Checkpoint, run: Run, label: str) -> RebuiltAdapter:
    """The checkpoint's adapter, from its actor's FSDP shards.

    Raises:
        CheckpointError: LoRA r/alpha unknown, or shards missing, truncated or not a plain DTensor checkpoint.
        AdapterError: the rebuilt adapter is empty, holds NaN/Inf, or is untrained.
    """
    actor_dir = checkpoint.path / "actor"
    lora = lora_from_meta(actor_dir) or run.manifest.lora
    if lora is None:
        raise CheckpointError(
            f"{label}: its adapter must be rebuilt from the FSDP shards but LoRA r/alpha are unknown "
            "(no lora_train_meta.json): add lora to hubkit.json"
        )
    tensors = {normalize_key(k): v for k, v in load_lora_tensors(actor_dir, label).items()}
    modules = {parsed[0] for parsed in map(parse_lora_key, tensors) if parsed}
    config = _rebuilt_config(modules, lora, run)
    pairs = checked_tensors(tensors, config, label)
    return RebuiltAdapter(tensors=tensors, config=config, num_modules=len(pairs))
