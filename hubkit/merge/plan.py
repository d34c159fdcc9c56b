"""Check a base model and an adapter against each other and decide what the merge will do.

Everything that can be wrong with the input is found here, before a single output byte is written.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from hubkit.errors import BaseModelMismatchError, MergeError
from hubkit.formats.model_config import CONFIG, read_model_config
from hubkit.formats.peft import EMBEDDING_LAYER_NAMES
from hubkit.formats.safetensors import SafetensorsHeader, TensorInfo
from hubkit.merge.base_files import SHARD_INDEX, SINGLE_SHARD, carried_files
from hubkit.merge.lora_adapter import FullWeight, LoraModule
from hubkit.merge.shards import TORCH_DTYPES, read_shard_header
from hubkit.merge.vocabulary import TokenizerFiles, Vocabulary, resized_vocabulary
from hubkit.safety.kinds import TOKENIZER_KINDS

# The output head of the Qwen2/Qwen3/Llama family; with tied embeddings it has no weight of its own.
LM_HEAD = "lm_head"


@dataclass(frozen=True)
class MergePlan:
    """What to merge where: the base shards in order, and the LoRA module for each targeted weight."""

    base_dir: Path
    shards: tuple[SafetensorsHeader, ...]
    index: dict | None  # the parsed model.safetensors.index.json, None for a single-file model
    targets: dict[str, LoraModule | FullWeight]  # base weight name -> what is merged into it (or replaces it)
    carried: tuple[Path, ...]  # config, generation config, tokenizer, chat template, license
    vocabulary: Vocabulary | None = None  # the adapter's, when it resized the base's (then its tokenizer)

    def written(self, info: TensorInfo) -> TensorInfo:
        """A base tensor as the merged shard holds it: an embedding or head of a resized vocabulary (whole, or
        the saved copy a LoRA on it merges into) has the adapter's rows."""
        saved = saved_weight(self.targets.get(info.name))
        if saved is None or tuple(saved.shape) == tuple(info.shape):
            return info
        shape = tuple(saved.shape)
        return replace(info, shape=shape, nbytes=math.prod(shape) * TORCH_DTYPES[info.dtype].itemsize)

    def reads_base(self, name: str) -> bool:
        """Whether the merge of the base weight `name` starts from the base's bytes: a LoRA merged into it,
        not a weight the adapter saved whole or as the copy PEFT loads in place of the base's."""
        module = self.targets.get(name)
        return module is not None and saved_weight(module) is None

    @property
    def total_bytes(self) -> int:
        return sum(self.written(t).nbytes for shard in self.shards for t in shard.tensors)

    @property
    def dtype(self) -> str:
        """The merged weights' torch dtype name ("bfloat16"); the most common one if they mix."""
        counts = Counter(t.dtype for shard in self.shards for t in shard.tensors if t.name in self.targets)
        return str(TORCH_DTYPES[counts.most_common(1)[0][0]]).removeprefix("torch.")


def saved_weight(module: LoraModule | FullWeight | None) -> torch.Tensor | None:
    """The weight the adapter saved for a module, which PEFT loads in place of the base's: a whole one, or the
    frozen copy under a LoRA on an embedding or head (``<module>.base_layer.weight``); None for a plain LoRA."""
    if isinstance(module, FullWeight):
        return module.weight
    return None if module is None else module.base_copy


def plan_merge(
    base_dir: Path,
    modules: list[LoraModule | FullWeight],
    tokenizer: Callable[[], TokenizerFiles] = tuple,
) -> MergePlan:
    """Read the base's headers and config and match every LoRA module to a base weight.

    Args:
        base_dir: the base model folder (config.json, safetensors shards, tokenizer files).
        modules: the adapter's LoRA modules.
        tokenizer: gives the tokenizer saved with the adapter, vetted (`hubkit.merge.vocabulary.checkpoint_tokenizer`):
            the merged model's when the adapter resized the vocabulary (called only then).

    Returns:
        The plan, covering every module of the adapter.

    Raises:
        MergeError: a shard is missing or corrupt, the base has no safetensors weights, or the adapter
            targets a tied lm_head, carries a modules_to_save copy of a tied embedding or head, has a LoRA
            on an embedding it resized without the resized weight, carries no resized head or embedding the
            vocabulary needs, resized the vocabulary without its tokenizer, or targets a
            non-floating-point weight.
        BaseModelMismatchError: the adapter names a module the base lacks, or its shapes differ (a
            vocabulary the adapter resized included).
    """
    config = read_model_config(base_dir / CONFIG, f"the base model's {CONFIG}")
    carried = carried_files(base_dir)
    index = _read_index(base_dir)
    shard_names = sorted(set(index["weight_map"].values())) if index else [SINGLE_SHARD]
    shards = tuple(read_shard_header(base_dir / name) for name in shard_names)
    weights = {t.name: t for shard in shards for t in shard.tensors}
    if index:
        _check_index(index, shards)

    tied = config.tied or f"{LM_HEAD}.weight" not in weights
    vocabulary = _vocabulary(weights, modules, tokenizer)
    whole = {m.module.split(".")[-1]: m for m in modules if isinstance(m, FullWeight)}
    targets = {}
    for module in modules:
        if isinstance(module, FullWeight) and tied and module.module.split(".")[-1] in EMBEDDING_LAYER_NAMES:
            if not module.in_place:
                raise MergeError(
                    f"the adapter carries a whole {module.module} but the base model ties lm_head to the "
                    "embeddings, which hubkit does not untie; merge it with PEFT's merge_and_unload"
                )
            if module.module == LM_HEAD:  # tied: PEFT loads it into the embedding's weight, the one written
                if "embed_tokens" not in whole or not torch.equal(
                    whole["embed_tokens"].weight, module.weight
                ):
                    raise MergeError(
                        "the adapter carries a whole lm_head other than its embed_tokens but the base model ties "
                        "them, which hubkit does not untie; merge it with PEFT's merge_and_unload"
                    )
                continue
        if (
            vocabulary is not None
            and isinstance(module, LoraModule)
            and _is_embedding_weight(module.weight_name)
            and module.base_copy is None
        ):
            raise MergeError(
                f"the adapter has a LoRA on {module.module}, whose vocabulary it resized, but not the resized "
                f"weight it was trained on: save the adapter with save_embedding_layers=True"
            )
        if isinstance(module, LoraModule) and module.embedding and tied:
            raise MergeError(
                f"the adapter has a LoRA on {module.module} but the base model ties lm_head to the embeddings: "
                "merged, it would change lm_head too, which the adapter does not; merge it with PEFT's "
                "merge_and_unload if that is meant"
            )
        if module.module == LM_HEAD and tied:
            raise MergeError(
                "the adapter has a LoRA on lm_head but the base model ties lm_head to the embeddings; "
                "its merge would be lost on load. Train without lm_head in target_modules (PEFT's "
                "all-linear leaves it out)"
            )
        info = weights.get(module.weight_name)
        if info is None:
            raise BaseModelMismatchError(
                f"the adapter targets {module.module}, which the base model does not have; "
                "is the adapter for another base model?"
            )
        _check_shapes(module, info, vocabulary)
        targets[module.weight_name] = module
    if vocabulary is not None:
        left = [name for name in weights if _is_embedding_weight(name) and name not in targets]
        if left:
            raise MergeError(
                f"the adapter resized the vocabulary to {vocabulary.rows} rows but carries no {left[0]} of them "
                "(PEFT saves only the embeddings a LoRA targets, when one does): save the adapter with "
                f"{left[0].removesuffix('.weight').split('.')[-1]} in target_modules or modules_to_save, or with "
                "save_embedding_layers=True if no embedding is a LoRA target"
            )
        carried = [path for path in carried if path.name not in TOKENIZER_KINDS]  # the checkpoint's instead
    return MergePlan(
        base_dir=base_dir,
        shards=shards,
        index=index,
        targets=targets,
        carried=tuple(carried),
        vocabulary=vocabulary,
    )


def _is_embedding_weight(name: str) -> bool:
    return name.removesuffix(".weight").split(".")[-1] in EMBEDDING_LAYER_NAMES and name.endswith(".weight")


def _vocabulary(
    weights: dict[str, TensorInfo],
    modules: list[LoraModule | FullWeight],
    tokenizer: Callable[[], TokenizerFiles],
) -> Vocabulary | None:
    """The vocabulary the adapter's whole embeddings resized the base's to (`resized_vocabulary`), or None."""
    embedding = next((t for name, t in weights.items() if name.endswith("embed_tokens.weight")), None)
    if embedding is None or len(embedding.shape) != 2:
        return None
    whole = {m.module: m.weight for m in modules if isinstance(m, FullWeight)}
    whole |= {m.module: m.base_copy for m in modules if isinstance(m, LoraModule) and m.base_copy is not None}
    return resized_vocabulary(whole, tokenizer, embedding.shape[0], embedding.shape[1])


def _read_index(base_dir: Path) -> dict | None:
    path = base_dir / SHARD_INDEX
    if not path.is_file():
        if not (base_dir / SINGLE_SHARD).is_file():
            raise MergeError(
                f"the base model folder {base_dir.name} has no {SINGLE_SHARD} or {SHARD_INDEX}; "
                "hubkit merges safetensors weights only"
            )
        return None
    try:
        index = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise MergeError(f"{SHARD_INDEX} is not valid JSON ({e}); re-download the base model") from e
    if (
        not isinstance(index, dict)
        or not isinstance(index.get("weight_map"), dict)
        or not index["weight_map"]
    ):
        raise MergeError(f"{SHARD_INDEX} has no weight_map; re-download the base model")
    return index


def _check_index(index: dict, shards: tuple[SafetensorsHeader, ...]) -> None:
    located = {t.name: shard.path.name for shard in shards for t in shard.tensors}
    for name, shard_name in index["weight_map"].items():
        if located.get(name) != shard_name:
            raise MergeError(
                f"{SHARD_INDEX} puts {name} in {shard_name}, which does not hold it; re-download it"
            )


def _check_shapes(module: LoraModule | FullWeight, info: TensorInfo, vocabulary: Vocabulary | None) -> None:
    if info.dtype not in TORCH_DTYPES:
        raise MergeError(
            f"base weight {info.name} is {info.dtype}; hubkit merges into F32, F16 or BF16 weights only "
            "(use the unquantized base model)"
        )
    if isinstance(module, FullWeight):
        expected = tuple(info.shape)
        if vocabulary is not None and _is_embedding_weight(info.name):
            expected = (vocabulary.rows, *expected[1:])
        if tuple(module.weight.shape) != expected:
            raise BaseModelMismatchError(
                f"the adapter's whole {module.module} has shape {tuple(module.weight.shape)} but the base "
                f"weight is {info.shape}; the adapter was trained on another base model"
            )
        if not bool(module.weight.isfinite().all()):
            raise MergeError(
                f"the adapter's whole {module.module} holds NaN or infinity; it cannot be merged"
            )
        return
    rows = vocabulary.rows if vocabulary is not None and _is_embedding_weight(info.name) else info.shape[0]
    if module.base_copy is not None and tuple(module.base_copy.shape) != (rows, *info.shape[1:]):
        raise BaseModelMismatchError(
            f"the adapter's copy of {module.module} has shape {tuple(module.base_copy.shape)} but the base weight "
            f"is {info.shape}; the adapter was trained on another base model"
        )
    expected = (module.lora_b.shape[0], module.lora_a.shape[1])
    if len(info.shape) != 2 or (rows, info.shape[1]) != expected:
        raise BaseModelMismatchError(
            f"the adapter's {module.module} has shape {expected} but the base weight is {info.shape}; "
            "the adapter was trained on another base model"
        )
