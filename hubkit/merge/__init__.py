"""Streaming LoRA merge: fold a PEFT LoRA adapter into a base model's safetensors shards.

The base is read one tensor at a time and each output shard is written as it is produced, so peak
memory is about one weight plus the adapter whatever the model size (an adapter's whole weights, from
modules_to_save, are in it). DoRA adapters merge as PEFT merges them, and whole weights replace the base's (a vocabulary
resized with them: the adapter's rows, `vocab_size` and tokenizer). Every problem with the input (a missing or corrupt shard, an adapter for another base, a LoRA on a
tied lm_head, an adapter initialised from the base weights such as PiSSA) is found before anything is
written.

    result = merge_adapter(fetch_base_snapshot("Qwen/Qwen3-4B"), Path("adapter"), Path("merged"))
"""

from __future__ import annotations

from pathlib import Path

from hubkit.merge.base_files import fetch_base_snapshot
from hubkit.merge.lora_adapter import load_lora_adapter
from hubkit.merge.plan import MergePlan, plan_merge
from hubkit.merge.stream import MergeResult, ProgressCallback, execute_plan
from hubkit.merge.vocabulary import checkpoint_tokenizer
from hubkit.safety import VetContext

__all__ = [
    "MergePlan",
    "MergeResult",
    "execute_plan",
    "fetch_base_snapshot",
    "load_lora_adapter",
    "merge_adapter",
    "plan_merge",
]


def merge_adapter(
    base_dir: Path, adapter_dir: Path, out_dir: Path, progress: ProgressCallback | None = None
) -> MergeResult:
    """Merge a LoRA adapter into a base model: W + scale * B @ A for every adapted Linear (DoRA: each row
    of that then rescaled to its magnitude).

    Args:
        base_dir: the base model folder (from `fetch_base_snapshot` or a local copy).
        adapter_dir: a PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors; the tokenizer
            saved with it, which the merged model takes when the adapter resized the vocabulary).
        out_dir: where the merged model goes; must not exist or be empty. It appears only complete.
        progress: called with (bytes done, total bytes) after each tensor.

    Raises:
        MergeError: missing or corrupt base shards, a tied lm_head LoRA, an unsupported LoRA variant, an
            init that changes the base weights (PiSSA, OLoRA, ...), a non-finite delta, or a non-empty
            `out_dir`.
        BaseModelMismatchError: the adapter was trained on another base (missing module, shape).
        AdapterError: the adapter folder is unreadable or holds no LoRA weights.
    """
    modules = load_lora_adapter(adapter_dir)
    context = VetContext.for_run(adapter_dir, base_dir.name, None)
    plan = plan_merge(base_dir, modules, lambda: checkpoint_tokenizer(adapter_dir, context))
    return execute_plan(plan, out_dir, progress)
