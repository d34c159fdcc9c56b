"""The adapter side of a merge: a PEFT LoRA folder as the (A, B, scale) triples the merge folds in, with
DoRA's magnitude vector where it has one.

The format itself is read by `hubkit.formats.peft`; this module adds what only a merge cares about: the
LoRA variants hubkit does not merge as PEFT does are refused, and so are adapters PEFT loads onto changed
base weights (PiSSA and the other inits of `base_changing_init`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from hubkit.errors import AdapterError, MergeError
from hubkit.formats.peft import (
    base_changing_init,
    full_weights,
    lora_pairs,
    read_adapter_config,
    read_adapter_weights,
    unsupported_variant,
    variant_refusal,
)
from hubkit.merge.lora import lora_scale


@dataclass(frozen=True)
class LoraModule:
    """One adapted Linear: where it sits in the base model and what to add to its weight."""

    module: str  # base model module name, e.g. "model.layers.0.self_attn.q_proj"
    lora_a: torch.Tensor  # (r, in)
    lora_b: torch.Tensor  # (out, r)
    scale: float
    magnitude: torch.Tensor | None = None  # (out,): DoRA's trained norm of each merged row
    embedding: bool = False  # an Embedding: A and B are PEFT's lora_embedding_B.T and lora_embedding_A.T
    base_copy: torch.Tensor | None = None  # the frozen weight PEFT saved and loads in place of the base's

    @property
    def weight_name(self) -> str:
        return f"{self.module}.weight"


@dataclass(frozen=True)
class FullWeight:
    """A whole weight the adapter carries (`modules_to_save`, `save_embedding_layers`): PEFT loads it in
    place of the base's, and so the merge writes it, in the base weight's dtype."""

    module: str  # e.g. "model.embed_tokens"
    weight: torch.Tensor  # the base weight's shape (an embedding's rows those of a resized vocabulary)
    # False for a modules_to_save copy, which PEFT keeps beside the module (a tied partner keeps the base's);
    # True for what save_embedding_layers stores, loaded into the module's own weight (a tied one's too).
    in_place: bool = True

    @property
    def weight_name(self) -> str:
        return f"{self.module}.weight"


def load_lora_adapter(adapter_dir: Path) -> list[LoraModule | FullWeight]:
    """Load every LoRA module of a PEFT adapter folder (adapter_config.json, adapter_model.safetensors), with
    PEFT's per-module rank and scaling: one LoraModule per adapted module, sorted by module name, then one
    FullWeight per whole weight.

    Raises:
        AdapterError: a file is missing, truncated or unreadable, a key is not a PEFT LoRA key, or the
            adapter holds no LoRA weights (as `hubkit.formats.peft` reports them).
        MergeError: the adapter is not LoRA, uses a variant hubkit cannot merge (biases, ...), or was
            initialised from the base weights (PiSSA, OLoRA, ...).
    """
    label = f"adapter {adapter_dir.name}"
    config = read_adapter_config(adapter_dir, label)
    if config.get("peft_type") != "LORA":  # a config that does not say LoRA is not merged as one
        raise MergeError(
            f"the adapter is {config.get('peft_type')!r}, not LoRA; hubkit merges LoRA adapters only"
        )
    variant = unsupported_variant(config)
    if variant is not None:
        raise MergeError(variant_refusal(variant, label))
    _refuse_base_changing_init(config, label)
    tensors = read_adapter_weights(adapter_dir, label)
    pairs = lora_pairs(tensors, config, label)
    if not pairs:
        raise AdapterError(f"{label} holds no LoRA weights; it would merge as a no-op")
    modules: list[LoraModule | FullWeight] = []
    for pair in pairs.values():
        if not pair.alpha:
            raise AdapterError(
                f"{label}: module {pair.module} has lora_alpha {pair.alpha}; it would merge as a no-op"
            )
        scale = lora_scale(pair.alpha, pair.rank, bool(config.get("use_rslora")))
        # An Embedding's delta is (B @ A).T * scale (PEFT's Embedding.get_delta_weight), = A.T @ B.T * scale.
        a, b = (pair.lora_b.T, pair.lora_a.T) if pair.embedding else (pair.lora_a, pair.lora_b)
        modules.append(LoraModule(pair.module, a, b, scale, pair.magnitude, pair.embedding, pair.base_copy))
    copies = config.get("modules_to_save") or []
    return [
        *modules,
        *(
            FullWeight(module, weight, not any(module == n or module.endswith(f".{n}") for n in copies))
            for module, weight in full_weights(tensors, config).items()
        ),
    ]


def _refuse_base_changing_init(config: dict, label: str) -> None:
    """Refuse an adapter initialised from the base weights (`base_changing_init`): PEFT loads it onto
    changed base weights, which a merge into the saved base would not be."""
    init = base_changing_init(config)
    if init is None:
        return
    if init.lower() == "loftq":
        raise MergeError(
            f"{label}: init_lora_weights='loftq' applies the adapter to the base weights quantized, which hubkit "
            "does not reproduce; merge it with PEFT's merge_and_unload instead"
        )
    raise MergeError(
        f"{label}: init_lora_weights={init!r} trains on the base weights minus the initial LoRA (PEFT subtracts it "
        "again on load), so W + s*B@A would be another model; save it as a plain LoRA with "
        "model.save_pretrained(out, path_initial_model_for_weight_conversion=<the adapter saved before training>) "
        "and merge that"
    )
