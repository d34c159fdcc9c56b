"""The kinds of file a push publishes, each with its size bound, and which files of a folder are of one.

Publishing is by content, never by name alone: a file is published only when its name says it is of a
known kind and its content is then read as that kind (`hubkit.safety.vet`). Anything else in a
checkpoint folder is left out, with a reason the dry run prints.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from hubkit.formats import gguf_types, model_config, tokenizer
from hubkit.safety.links import pseudo_file_system

MB = 1_000_000
GB = 1_000_000_000


@dataclass(frozen=True)
class Kind:
    """A kind of published file: what messages call it, and the largest such file accepted (unread)."""

    name: str
    max_bytes: int

    @property
    def called(self) -> str:
        """The name with its article, as messages say it: "an adapter config", "a tokenizer"."""
        return f"{'an' if self.name[0] in 'aeiou' else 'a'} {self.name}"


# A LoRA adapter of a 70B model at rank 256 is ~10 GB; only its header is read while vetting.
ADAPTER_WEIGHTS = Kind("adapter weights file", 64 * GB)
ADAPTER_CONFIG = Kind("adapter config", 1 * MB)
# The largest vocabularies (Gemma's 262k tokens) write a tokenizer.json of ~33 MB.
TOKENIZER = Kind("tokenizer", 50 * MB)
# Gemma's tokenizer_config.json lists its 6,000+ added tokens: ~1.2 MB.
TOKENIZER_CONFIG = Kind("tokenizer config", 5 * MB)
SPECIAL_TOKENS_MAP = Kind("special tokens map", 1 * MB)
ADDED_TOKENS = Kind("added tokens list", 5 * MB)
VOCAB = Kind("vocabulary", 20 * MB)
MERGES = Kind("merges file", 20 * MB)
CHAT_TEMPLATE = Kind("chat template", 1 * MB)
CHAT_TEMPLATE_JSON = Kind("JSON chat template", 1 * MB)
GENERATION_CONFIG = Kind("generation config", 1 * MB)
MODEL_CONFIG = Kind("model config", model_config.MAX_BYTES)
MODEL_WEIGHTS = Kind("model weights file", 64 * GB)
# A GGUF file hubkit wrote from a merged model (BF16 of an 8B model: 16 GB).
GGUF_WEIGHTS = Kind("GGUF file", 64 * GB)
WEIGHTS_INDEX = Kind("weights index", 10 * MB)
MANIFEST = Kind("run manifest", 1 * MB)
METRICS = Kind("metrics file", 64 * MB)
# Two thousand points of each of a hundred metrics take ~10 MB.
TRAINING_EVENTS = Kind("TensorBoard event file", 64 * MB)
EVAL_RESULTS = Kind("eval results file", 16 * MB)
# The Hub's record of a score on a registered benchmark (`.eval_results/<benchmark>.yaml`): a few entries.
BENCHMARK_RESULTS = Kind("benchmark results file", 1 * MB)
EVAL_SAMPLES = Kind("eval samples file", 256 * MB)
TRAIN_PROBLEM_HASHES = Kind("training-problem hashes file", 64 * MB)
CARD = Kind("model card", 1 * MB)
# A base model's licence text, carried into its merged repo (Apache-2.0's is 11 KB).
LICENSE = Kind("licence text", 1 * MB)
IMAGE = Kind("card image", 10 * MB)
SPACE_MODULE = Kind("Space module", 1 * MB)
SPACE_CONFIG = Kind("Space config", 16 * MB)
REQUIREMENTS = Kind("requirements file", 64_000)
# A release's samples dataset (`<repo>-samples`): every evaluated answer, the training completions kept.
SAMPLES_TABLE = Kind("samples table", 256 * MB)

TOKENIZER_KINDS: dict[str, Kind] = {
    tokenizer.TOKENIZER_JSON: TOKENIZER,
    tokenizer.TOKENIZER_CONFIG: TOKENIZER_CONFIG,
    tokenizer.SPECIAL_TOKENS_MAP: SPECIAL_TOKENS_MAP,
    tokenizer.ADDED_TOKENS: ADDED_TOKENS,
    tokenizer.VOCAB_JSON: VOCAB,
    tokenizer.MERGES_TXT: MERGES,
    tokenizer.CHAT_TEMPLATE_JINJA: CHAT_TEMPLATE,
    tokenizer.CHAT_TEMPLATE_JSON: CHAT_TEMPLATE_JSON,
}
# What a checkpoint folder (TRL's checkpoint-N/, verl's lora_adapter/ and huggingface/) may publish.
CHECKPOINT_KINDS: dict[str, Kind] = {
    "adapter_model.safetensors": ADAPTER_WEIGHTS,
    "adapter_config.json": ADAPTER_CONFIG,
    **TOKENIZER_KINDS,
    tokenizer.GENERATION_CONFIG: GENERATION_CONFIG,
}
_MODEL_REPO_KINDS: dict[str, Kind] = {
    **CHECKPOINT_KINDS,
    model_config.CONFIG: MODEL_CONFIG,
    "model.safetensors": MODEL_WEIGHTS,
    "model.safetensors.index.json": WEIGHTS_INDEX,
    "hubkit.json": MANIFEST,
    "metrics.jsonl": METRICS,
    "runs/events.out.tfevents.hubkit": TRAINING_EVENTS,
    "README.md": CARD,
    "train_problems.sha256": TRAIN_PROBLEM_HASHES,
    "eval/results.json": EVAL_RESULTS,
    "eval/samples.jsonl": EVAL_SAMPLES,
}
_SPACE_REPO_KINDS: dict[str, Kind] = {
    "README.md": CARD,
    "requirements.txt": REQUIREMENTS,
    "space_config.json": SPACE_CONFIG,
}
_SAMPLES_TABLE_RE = re.compile(r"^(eval|rollouts)/[A-Za-z0-9_.-]+\.parquet$")
_SHARD_RE = re.compile(r"^model-[0-9]{5}-of-[0-9]{5}\.safetensors$")
_IMAGE_RE = re.compile(r"^assets/[A-Za-z0-9_.-]+\.png$")
_LICENSE_RE = re.compile(r"^LICENSE(\.[A-Za-z]+)?$")
_BENCHMARK_RESULTS_RE = re.compile(r"^\.eval_results/[A-Za-z0-9_.-]+\.yaml$")
_SPACE_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.py$")
_CHECKPOINT_PREFIX_RE = re.compile(r"^checkpoints/global_step_[0-9]{1,9}/")


def max_bytes_of(path_in_repo: str) -> int | None:
    """The largest a file at this place of a model repo may be, or None when no known kind goes there."""
    kind = kind_of(path_in_repo)
    return kind.max_bytes if kind is not None else None


def kind_of(path_in_repo: str, repo_type: str = "model") -> Kind | None:
    """The kind of a file by its place in a repo, or None when no known kind goes there.

    Args:
        path_in_repo: e.g. ``checkpoints/global_step_20/adapter_config.json``, ``assets/kl.png``.
        repo_type: "model" (adapter and merged repos), "dataset" (the samples, a sweep's comparison) or
            "space".
    """
    if repo_type == "dataset":
        if path_in_repo == "README.md":
            return CARD
        if _IMAGE_RE.match(path_in_repo):  # a sweep's comparison chart
            return IMAGE
        return SAMPLES_TABLE if _SAMPLES_TABLE_RE.match(path_in_repo) else None
    if repo_type == "space":
        if path_in_repo in _SPACE_REPO_KINDS:
            return _SPACE_REPO_KINDS[path_in_repo]
        return SPACE_MODULE if _SPACE_MODULE_RE.match(path_in_repo) else None
    if _CHECKPOINT_PREFIX_RE.match(path_in_repo):
        return CHECKPOINT_KINDS.get(PurePosixPath(path_in_repo).name)
    if path_in_repo in _MODEL_REPO_KINDS:
        return _MODEL_REPO_KINDS[path_in_repo]
    if _SHARD_RE.match(path_in_repo):
        return MODEL_WEIGHTS
    if gguf_types.FILE_NAME_RE.match(path_in_repo):
        return GGUF_WEIGHTS
    if _LICENSE_RE.match(path_in_repo):
        return LICENSE
    if _BENCHMARK_RESULTS_RE.match(path_in_repo):
        return BENCHMARK_RESULTS
    return IMAGE if _IMAGE_RE.match(path_in_repo) else None


# Why known files of a checkpoint folder are left out; matched on the lower-cased name, first match wins.
_LEFT_OUT: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (r"^optimizer.*\.(pt|bin|pth)$|^optim_world_size_", "optimizer state"),
        (r"^scheduler.*\.(pt|bin|pth)$", "learning-rate scheduler state"),
        (r"^rng_state.*\.pth$", "random number generator state"),
        (r"^training_args\.bin$", "training arguments (a pickle)"),
        (r"^trainer_state\.json$", "trainer state (its metrics are published as metrics.jsonl)"),
        (
            r"^model_world_size_\d+_rank_\d+\.pt$",
            "FSDP model shards (pickles; the adapter is rebuilt from them)",
        ),
        (r"^extra_state_world_size_", "FSDP training state"),
        (
            r"^(fsdp_config\.json|lora_train_meta\.json|entropy_ctrl_state\.json|latest_checkpointed_iteration\.txt)$",
            "training state",
        ),
        (r"^readme\.md$", "PEFT's generic card (the repo gets hubkit's card)"),
        (r"^config\.json$", "the base model's config (a merged repo publishes the base's own)"),
        (
            r"^tokenizer\.model$",
            "a SentencePiece model hubkit cannot check (tokenizer.json is the same tokenizer)",
        ),
        (r"\.(pt|pth|bin|pkl|pickle|ckpt|joblib|npy|npz)$", "a pickle or array file (never published)"),
        (r"\.safetensors$", "weights other than the adapter's"),
    )
)


@dataclass(frozen=True)
class LeftOut:
    """A file of a folder that is not published, and why (as the dry run prints it)."""

    name: str
    reason: str


@dataclass(frozen=True)
class Classified:
    """A folder's files: those of a known kind (name, path, kind) and those left out."""

    published: tuple[tuple[str, Path, Kind], ...]
    left_out: tuple[LeftOut, ...]


def _points_to_regular_file(path: Path) -> bool | None:
    """For a symlink: whether it ends at a regular file outside the pseudo file systems; None when dangling."""
    try:
        target = path.resolve(strict=True)
        info = target.stat()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return None
    return stat.S_ISREG(info.st_mode) and pseudo_file_system(target) is None


def left_out_reason(name: str) -> str:
    """Why a file named `name` in a checkpoint folder is not published ("unknown kind" by default)."""
    lowered = name.lower()
    if name.startswith("."):
        return "a hidden file"
    return next((reason for pattern, reason in _LEFT_OUT if pattern.search(lowered)), "unknown kind")


def classify_folder(folder: Path) -> Classified:
    """Sort a checkpoint folder's entries into files of a known kind and files left out.

    A symlink of a known name stays published (its target is checked when it is vetted: a link to
    anything but a regular file is refused there); any other symlink to something other than a regular
    file is left out as such. Sub-folders are left out: a checkpoint publishes its own files only. Each
    part is sorted by name.
    """
    published: list[tuple[str, Path, Kind]] = []
    left_out: list[LeftOut] = []
    with os.scandir(folder) as scanned:
        entries = sorted(scanned, key=lambda e: e.name)
    for entry in entries:
        path = Path(entry.path)
        kind = CHECKPOINT_KINDS.get(entry.name)
        folder = entry.is_dir(follow_symlinks=False)  # False for a symlink, even to a folder
        if kind is not None and not folder:
            published.append((entry.name, path, kind))  # a symlink's target is checked when it is vetted
            continue
        regular = _points_to_regular_file(path) if entry.is_symlink() else True
        if regular is None:
            reason = "a dangling symlink"
        elif not regular:
            reason = "symlink to a non-regular file"
        else:
            reason = "a folder" if folder else left_out_reason(entry.name)
        left_out.append(LeftOut(entry.name, reason))
    return Classified(published=tuple(published), left_out=tuple(left_out))
