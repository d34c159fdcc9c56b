"""The PEFT LoRA adapter format, read in one place: file names, key names, the config, A/B pairs.

A saved adapter is a folder with ``adapter_config.json`` and ``adapter_model.safetensors`` whose keys are
``base_model.model.<module>.lora_A.weight`` (r × in) and ``...lora_B.weight`` (out × r), with DoRA's
``...lora_magnitude_vector`` (out) and any whole weight (``base_model.model.<module>.weight``: modules_to_save,
save_embedding_layers) beside them. Publishing
(`hubkit.adapters`), merging (`hubkit.merge.lora_adapter`), the run readers and evaluation all read
adapters through this module, so the same defect gives the same error on every path. Nothing else in
hubkit parses ``adapter_config.json``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hubkit.errors import AdapterError, FileFormatError
from hubkit.formats.json_fields import is_count
from hubkit.formats.json_file import read_json
from hubkit.formats.safetensors import SafetensorsFormatError, SafetensorsHeader, TensorInfo, read_header

if TYPE_CHECKING:
    import torch

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_FILES = (ADAPTER_WEIGHTS, ADAPTER_CONFIG)
PICKLED_WEIGHTS = "adapter_model.bin"
# An adapter_config.json is a few hundred bytes; a larger one is refused unread (a PEFT config of a
# thousand rank_pattern entries is ~50 KB).
MAX_CONFIG_BYTES = 1_000_000
# The fields of peft 0.21's LoraConfig (a test holds this equal to `dataclasses.fields(peft.LoraConfig)`):
# PEFT drops any other key of adapter_config.json when it loads it, so hubkit does not publish them.
LORA_CONFIG_FIELDS = frozenset(
    {
        "task_type", "peft_type", "auto_mapping", "peft_version", "base_model_name_or_path", "revision",
        "inference_mode", "r", "target_modules", "exclude_modules", "lora_alpha", "lora_dropout",
        "fan_in_fan_out", "bias", "use_rslora", "modules_to_save", "init_lora_weights", "layers_to_transform",
        "layers_pattern", "rank_pattern", "alpha_pattern", "megatron_config", "megatron_core",
        "trainable_token_indices", "loftq_config", "eva_config", "corda_config", "lora_ga_config", "use_dora",
        "velora_config", "alora_invocation_tokens", "use_qalora", "qalora_group_size", "monteclora_config",
        "layer_replication", "runtime_config", "lora_bias", "target_parameters", "use_bdlora", "arrow_config",
        "kasa_config", "ensure_weight_tying",
    }
)  # fmt: skip
PEFT_PREFIX = "base_model.model."
# Bounds on what a config may say, checked before any tensor is built from it: a rank and an alpha a
# model can have (PEFT allocates r x features for each module as it loads the config).
MAX_RANK = 65_536
MAX_ALPHA = 1e6
# The config switches of LoRA variants hubkit's checks and merge do not implement (`unsupported_variant`).
UNSUPPORTED_VARIANTS = {
    "lora_bias": "LoRA biases",
    "fan_in_fan_out": "fan_in_fan_out (Conv1D) layers",
    "trainable_token_indices": "trainable tokens",
    "target_parameters": "target_parameters (parameter LoRA)",
    "layer_replication": "layer replication",
    "alora_invocation_tokens": "activated LoRA",
    "use_qalora": "QA-LoRA",
    "use_bdlora": "block-diagonal LoRA",
}
# The prefixes of the `init_lora_weights` that change the base weights (`base_changing_init`).
BASE_CHANGING_INITS = ("pissa", "corda", "olora", "lora_ga", "loftq")
# PEFT also saves a frozen copy of a LoRA-adapted embedding or lm_head (`save_embedding_layers`) under
# `<module>.base_layer.weight`.
FROZEN_COPY_SUFFIX = ".base_layer.weight"
# The layers whose full weight PEFT's `save_embedding_layers` stores (peft.utils.other.EMBEDDING_LAYER_NAMES);
# `modules_to_save` names others. Each such weight replaces the base's (`full_weights`).
EMBEDDING_LAYER_NAMES = ("embed_tokens", "lm_head")
# What `save_embedding_layers` adds of a `modules_to_save` module once the vocabulary was resized: PEFT's
# wrapper's trained copy (equal to `<module>.weight`) and its frozen original, under their own names.
_TRAINED_COPY = ".modules_to_save"
_FROZEN_ORIGINAL = ".original_module"
# base_model.model.<module path>.lora_{A,B}.weight: the keys of a plain LoRA adapter.
_LORA_KEY_RE = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<part>[AB])\.weight$")
# base_model.model.<module path>.lora_embedding_{A,B}: a LoRA on an embedding (no ".weight": a ParameterDict).
_EMBEDDING_LORA_KEY_RE = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_embedding_(?P<part>[AB])$")
# base_model.model.<module path>.lora_magnitude_vector: DoRA's magnitude of each output row (out,), as saved.
_MAGNITUDE_KEY_RE = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_magnitude_vector$")


def parse_lora_key(key: str) -> tuple[str, str] | None:
    """``(module, "A" | "B")`` for a PEFT LoRA key, None for any other key."""
    match = _LORA_KEY_RE.match(key)
    return (match["module"], match["part"]) if match else None


def normalize_key(key: str) -> str:
    """A LoRA key in PEFT's saved form: adapter name and FSDP wrapper names removed, PEFT prefix present.

    ``base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight`` →
    ``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`` (and DoRA's
    ``...q_proj.lora_magnitude_vector.default.weight`` → ``...q_proj.lora_magnitude_vector``).
    """
    key = key.replace("_fsdp_wrapped_module.", "")
    key = re.sub(r"\.(lora_[AB])\.[^.]+\.weight$", r".\1.weight", key)
    key = re.sub(r"\.lora_magnitude_vector\.[^.]+\.weight$", ".lora_magnitude_vector", key)
    key = re.sub(r"\.(lora_embedding_[AB])\.[^.]+$", r".\1", key)
    return key if key.startswith(PEFT_PREFIX) else PEFT_PREFIX + key


def read_adapter_config(adapter_dir: Path, label: str) -> dict[str, Any]:
    """The adapter's ``adapter_config.json`` as a dict.

    Raises:
        AdapterError: the file is missing, larger than `MAX_CONFIG_BYTES`, not JSON, or not a JSON object.
    """
    path = adapter_dir / ADAPTER_CONFIG
    if not path.exists():
        raise AdapterError(f"{label}: no {ADAPTER_CONFIG} in the adapter: it cannot be loaded")
    try:
        config = read_json(path, max_bytes=MAX_CONFIG_BYTES)
    except FileFormatError as e:
        raise AdapterError(f"{label}: {e}: re-save the adapter") from e
    if not isinstance(config, dict):
        raise AdapterError(f"{label}: {ADAPTER_CONFIG} must hold a JSON object: re-save the adapter")
    _check_lora_config(config, label)
    return config


def _check_lora_config(config: dict[str, Any], label: str) -> None:
    """Refuse, in one line, a config hubkit cannot load, merge or check: another PEFT method, a variant,
    a rank or alpha out of bounds, target modules that are not names."""
    where = f"{label}: {ADAPTER_CONFIG}"
    peft_type = config.get("peft_type", "LORA")
    if peft_type != "LORA":
        raise AdapterError(
            f"{label}: peft_type {str(peft_type)[:40]!r} is not LoRA: only LoRA adapters are supported"
        )
    ranks = [config.get("r"), *_pattern_values(config, "rank_pattern", where)]
    if not all(is_count(r, MAX_RANK) for r in ranks):
        raise AdapterError(f"{where}: every rank must be an integer from 1 to {MAX_RANK}")
    for alpha in (config.get("lora_alpha"), *_pattern_values(config, "alpha_pattern", where)):
        if is_valid_alpha(alpha) and alpha > MAX_ALPHA:
            raise AdapterError(f"{where}: lora_alpha {alpha!r} is beyond {MAX_ALPHA:g}")
    targets = config.get("target_modules")
    if not (
        targets is None
        or isinstance(targets, str)
        or (isinstance(targets, list) and all(isinstance(t, str) for t in targets))
    ):
        raise AdapterError(f"{where}: target_modules must be a module name, a pattern or a list of names")


def base_changing_init(config: dict[str, Any]) -> str | None:
    """The ``init_lora_weights`` whose adapter applies to other base weights than the saved base's, or None.

    PiSSA, CorDA, OLoRA and LoRA-GA train on W - s * B0 @ A0 (B0, A0: the initial LoRA) and LoftQ on W
    quantized; PEFT redoes PiSSA, CorDA, OLoRA and LoftQ on the base as it loads the adapter
    (`LoraLayer.update_layer`), and LoRA-GA is saved from such a residual. W + s * B @ A is another model.
    """
    init = config.get("init_lora_weights")
    if isinstance(init, str) and init.lower().startswith(BASE_CHANGING_INITS):
        return init
    return None


def unsupported_variant(config: dict[str, Any]) -> str | None:
    """The LoRA variant `config` switches on that hubkit does not implement (`UNSUPPORTED_VARIANTS`), or None."""
    return next((variant for key, variant in UNSUPPORTED_VARIANTS.items() if config.get(key)), None)


def variant_refusal(variant: str, label: str) -> str:
    """The one line refusing an adapter that uses `variant` (from `unsupported_variant`), with the way on."""
    return (
        f"{label}: the adapter uses {variant}, which hubkit does not vet or merge: train without it, or "
        "merge it with PEFT (PeftModel.from_pretrained(base, adapter).merge_and_unload())"
    )


def _pattern_values(config: dict[str, Any], key: str, where: str) -> list[object]:
    patterns = config.get(key) or {}
    if not isinstance(patterns, dict):
        raise AdapterError(f"{where}: {key} must be an object")
    return list(patterns.values())


def read_saved_adapter_config(adapter_dir: Path) -> dict[str, Any] | None:
    """``adapter_config.json`` when it is there and whole, else None (a save may be in progress).

    For readers that only look (which base, which rank); publishing reads with `read_adapter_config`.
    """
    try:
        config = read_json(adapter_dir / ADAPTER_CONFIG, max_bytes=MAX_CONFIG_BYTES)
    except (OSError, FileFormatError):
        return None
    return config if isinstance(config, dict) else None


def is_valid_alpha(alpha: object) -> bool:
    """Whether `alpha` is a ``lora_alpha`` PEFT can use: a positive finite number (0 makes a no-op adapter)."""
    return isinstance(alpha, int | float) and not isinstance(alpha, bool) and 0 < alpha < math.inf


def checked_alpha(alpha: object, label: str) -> int | float:
    """`alpha`, unchanged, when it is a usable ``lora_alpha``.

    Raises:
        AdapterError: it is missing, zero, negative or not a number.
    """
    if not is_valid_alpha(alpha):
        raise AdapterError(
            f"{label}: lora_alpha is {alpha!r}: the adapter would load as a no-op; set the real alpha"
        )
    return alpha  # type: ignore[return-value]


def rank_and_alpha(config: dict[str, Any]) -> tuple[int, int | float] | None:
    """The adapter's default ``r`` and ``lora_alpha`` (as saved), or None when either is missing or unusable."""
    r, alpha = config.get("r"), config.get("lora_alpha")
    if not is_count(r) or not is_valid_alpha(alpha):
        return None
    return r, alpha  # type: ignore[return-value]


def max_rank(config: dict[str, Any]) -> int | None:
    """The largest rank any module of the adapter has: ``r`` and every ``rank_pattern`` value."""
    ranks = [config.get("r"), *(config.get("rank_pattern") or {}).values()]
    ranks = [r for r in ranks if is_count(r)]
    return max(ranks, default=None)


def read_weights_header(adapter_dir: Path, label: str) -> SafetensorsHeader:
    """The header of ``adapter_model.safetensors``, checked to be complete (no tensor is read).

    Raises:
        AdapterError: the weights are missing, saved only as a pickle (never loaded), or truncated.
    """
    path = adapter_dir / ADAPTER_WEIGHTS
    if not path.is_file():
        if (adapter_dir / PICKLED_WEIGHTS).is_file():
            raise AdapterError(
                f"{label}: only {PICKLED_WEIGHTS} (a pickle, never loaded by hubkit) is saved: "
                "re-save the adapter with safe_serialization=True"
            )
        raise AdapterError(f"{label}: no {ADAPTER_WEIGHTS} in the adapter: the save is incomplete")
    try:
        return read_header(path)
    except SafetensorsFormatError as e:
        raise AdapterError(f"{label}: {e}: re-save the adapter") from e


def read_adapter_weights(adapter_dir: Path, label: str) -> dict[str, torch.Tensor]:
    """Every tensor of ``adapter_model.safetensors``, after checking its header.

    Raises:
        AdapterError: as `read_weights_header`.
    """
    from safetensors.torch import load_file

    read_weights_header(adapter_dir, label)
    return load_file(adapter_dir / ADAPTER_WEIGHTS)


@dataclass(frozen=True)
class LoraPair:
    """One adapted module's A and B, with PEFT's rank and alpha for it (after rank/alpha patterns).

    A and B (and DoRA's magnitude) are tensors, or their safetensors header entries where only shapes are
    checked.
    """

    module: str
    lora_a: torch.Tensor  # (r, in)
    lora_b: torch.Tensor  # (out, r)
    rank: int
    alpha: float
    magnitude: torch.Tensor | None = None  # (out,): DoRA's lora_magnitude_vector, None for plain LoRA
    # A LoRA on an embedding (PEFT's lora_embedding_A (r, vocab) and _B (dim, r)): its weight is (vocab, dim)
    # and its delta (B @ A).T.
    embedding: bool = False
    base_copy: torch.Tensor | None = None  # the frozen <module>.base_layer.weight PEFT saved, if any


def _why_unexpected(key: str) -> str:
    """What a tensor that is no LoRA (or DoRA) weight is, and what to do about it."""
    if ".modules_to_save." in key or ".original_module." in key:
        return "a copy of a module modules_to_save does not name: re-save the adapter with PEFT"
    if key.startswith(PEFT_PREFIX) and key.endswith(".weight"):
        return "a full weight of a module modules_to_save does not name: re-save the adapter with PEFT"
    return "not a LoRA or DoRA weight as PEFT saves them: re-save the adapter with PEFT"


def _named(module: str, names: list[str] | tuple[str, ...]) -> bool:
    return any(module == n or module.endswith(f".{n}") for n in names)


def _full_weight_module(key: str, config: dict[str, Any]) -> str | None:
    """The module whose whole weight `key` is (a `modules_to_save` copy, or an embedding or head PEFT's
    `save_embedding_layers` stored), or None."""
    if not key.startswith(PEFT_PREFIX) or not key.endswith(".weight") or key.endswith(FROZEN_COPY_SUFFIX):
        return None
    module = key.removeprefix(PEFT_PREFIX).removesuffix(".weight")
    wrapped = module.removesuffix(_TRAINED_COPY)
    if wrapped != module:  # the wrapper's trained copy, which `save_embedding_layers` adds after a resize
        return wrapped if _named(wrapped, config.get("modules_to_save") or []) else None
    names = [*(config.get("modules_to_save") or []), *EMBEDDING_LAYER_NAMES]
    if parse_lora_key(key) or not _named(module, names):
        return None
    return module


def _is_frozen_original(key: str, config: dict[str, Any]) -> bool:
    """`key` is the frozen original of a `modules_to_save` module (PEFT keeps it to unmerge; a merge and the
    loaded model use the trained copy), which `save_embedding_layers` adds after a resize."""
    module = key.removeprefix(PEFT_PREFIX).removesuffix(".weight")
    wrapped = module.removesuffix(_FROZEN_ORIGINAL)
    return (
        key.startswith(PEFT_PREFIX)
        and wrapped != module
        and _named(wrapped, config.get("modules_to_save") or [])
    )


def full_weights(tensors: Mapping[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The whole weights an adapter carries, by module: PEFT loads each in place of the base's weight (a
    `modules_to_save` module's trained copy when the file holds it twice, under its name and the wrapper's),
    from its tensors (or header entries) by key in PEFT's saved form.
    """
    modules = {key: _full_weight_module(key, config) for key in tensors}
    ordered = sorted(modules.items(), key=lambda item: _TRAINED_COPY in item[0])  # the wrapper's copy last
    return {module: tensors[key] for key, module in ordered if module is not None}


def _pattern_key(patterns: dict[str, object], module: str) -> str:
    # PEFT's rule (peft.utils.other.get_pattern_key): a pattern matches a suffix of the module name.
    for key in patterns:
        if re.match(rf"(.*\.)?({key})$", module):
            return key
    return module


def module_rank_alpha(config: dict[str, Any], module: str) -> tuple[object, object]:
    """The rank and alpha PEFT gives `module`: ``rank_pattern``/``alpha_pattern`` over ``r``/``lora_alpha``."""
    rank_pattern = config.get("rank_pattern") or {}
    alpha_pattern = config.get("alpha_pattern") or {}
    rank = rank_pattern.get(_pattern_key(rank_pattern, module), config.get("r"))
    alpha = alpha_pattern.get(_pattern_key(alpha_pattern, module), config.get("lora_alpha"))
    return rank, alpha


def lora_pairs(
    tensors: Mapping[str, torch.Tensor | TensorInfo], config: dict[str, Any], label: str
) -> dict[str, LoraPair]:
    """Pair every module's lora_A and lora_B and check them against the config.

    Args:
        tensors: the adapter's tensors by key (PEFT's saved form: see `normalize_key`), or their header
            entries when only shapes are checked (the pairs then hold those entries).

    Returns:
        The pairs by module name, sorted; with ``use_dora``, each with its magnitude vector; a LoRA on an
        embedding (``lora_embedding_A/B``) marked, and the frozen copy PEFT saves of an adapted embedding
        or head (``<module>.base_layer.weight``) on its pair.

    Raises:
        AdapterError: a key that is not a LoRA weight (or a DoRA magnitude with ``use_dora``), a lora_A
            without its lora_B (or the reverse), shapes that do not form a pair, a rank other than the
            config's, a config rank larger than every weight's, a DoRA module without its magnitude, or
            DoRA on an embedding.
    """
    halves: dict[str, dict[str, Any]] = {}
    magnitudes: dict[str, Any] = {}
    copies: dict[str, Any] = {}
    embeddings = set()
    dora = bool(config.get("use_dora"))
    for key, tensor in tensors.items():
        parsed = parse_lora_key(key)
        dora_key = _MAGNITUDE_KEY_RE.match(key) if dora else None
        embedding = _EMBEDDING_LORA_KEY_RE.match(key)
        if dora_key is not None:
            magnitudes[dora_key["module"]] = tensor
        elif embedding is not None:
            embeddings.add(embedding["module"])
            halves.setdefault(embedding["module"], {})[embedding["part"]] = tensor
        elif parsed is None and (_full_weight_module(key, config) or _is_frozen_original(key, config)):
            continue  # a whole weight, not a pair: `full_weights`
        elif parsed is None and key.startswith(PEFT_PREFIX) and key.endswith(FROZEN_COPY_SUFFIX):
            copies[key.removeprefix(PEFT_PREFIX).removesuffix(FROZEN_COPY_SUFFIX)] = tensor
        elif parsed is None:
            raise AdapterError(f"{label}: unexpected tensor {key!r}: {_why_unexpected(key)}")
        else:
            halves.setdefault(parsed[0], {})[parsed[1]] = tensor
    for module in copies:
        if module not in halves:
            raise AdapterError(f"{label}: the adapter stores a full {module} weight without LoRA")
    for module in magnitudes:
        if module not in halves:
            raise AdapterError(f"{label}: the adapter stores a DoRA magnitude for {module} without its LoRA")
    if dora and embeddings:
        raise AdapterError(
            f"{label}: DoRA on the embedding {min(embeddings)}, which hubkit does not merge: leave it out of "
            "target_modules, or merge the adapter with PEFT's merge_and_unload"
        )
    pairs = {}
    for module, parts in sorted(halves.items()):
        if set(parts) != {"A", "B"}:
            raise AdapterError(f"{label}: module {module} has lora_{next(iter(parts))} but not its pair")
        a, b = parts["A"], parts["B"]
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != b.shape[1]:
            raise AdapterError(
                f"{label}: module {module} has mismatched LoRA shapes A{tuple(a.shape)} B{tuple(b.shape)}"
            )
        rank, alpha = module_rank_alpha(config, module)
        if rank != a.shape[0]:
            raise AdapterError(f"{label}: module {module} has rank {a.shape[0]} but the config says r={rank}")
        magnitude = magnitudes.get(module)
        if dora and (magnitude is None or tuple(magnitude.shape) != (b.shape[0],)):
            raise AdapterError(
                f"{label}: use_dora is set but module {module} has no lora_magnitude_vector of its "
                f"{b.shape[0]} output rows: re-save the adapter"
            )
        pairs[module] = LoraPair(
            module, a, b, int(rank), alpha, magnitude, module in embeddings, copies.get(module)
        )  # type: ignore[arg-type]
    # PEFT allocates every target module at the rank the config gives it as it loads the config: a rank no
    # weight has (a target module the file leaves out) would be memory spent before any weight is read.
    named, largest = max_rank(config), max((pair.rank for pair in pairs.values()), default=0)
    if pairs and named is not None and named > largest:
        raise AdapterError(
            f"{label}: {ADAPTER_CONFIG} names rank {named}, more than any LoRA weight has ({largest}): "
            "re-save the adapter"
        )
    return pairs
