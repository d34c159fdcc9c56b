"""What a TRL run's own files say about how it was trained, for a run whose manifest records none: the
hyperparameters (from the newest checkpoint's ``training_args.bin``, else its ``trainer_state.json``) and
the trackers it reported to (``report_to``).

Only settings that describe the training are kept, by name; paths, tokens, hub and logging options never
are (``output_dir``, ``hub_token``, ``logging_dir``, a ``run_name`` that is a path ...). What was read is
kept in ``.hubkit/training-args/`` by file version, so a re-push (or a watch's every look) neither imports
torch nor reads the file again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hubkit.formats.training_args import TRAINING_ARGS, is_torch_archive, read_training_args
from hubkit.hub.hashing import FileVersion
from hubkit.hub.repo_types import repo_url
from hubkit.runs.files import read_json_object
from hubkit.runs.manifest import JSONScalar, is_hub_id
from hubkit.runs.model import TrackerRun, TrainerSettings
from hubkit.runs.state import TRAINING_ARGS_DIR, keep
from hubkit.runs.tensorboard import TENSORBOARD

TRAINER_STATE = "trainer_state.json"
# TrainingArguments / GRPOConfig / SFTConfig / DPOConfig fields a card shows, in the order it shows them.
HYPERPARAMETERS = (
    "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio", "optim", "weight_decay",
    "adam_beta1", "adam_beta2", "max_grad_norm",
    "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps", "num_train_epochs",
    "save_steps", "logging_steps", "seed", "bf16", "fp16", "gradient_checkpointing",
    "num_generations", "generation_batch_size", "steps_per_generation", "max_prompt_length",
    "max_completion_length", "temperature", "top_p", "top_k", "repetition_penalty",
    "beta", "epsilon", "epsilon_high", "num_iterations", "loss_type", "scale_rewards",
    "importance_sampling_level", "multi_objective_aggregation", "mask_truncated_completions",
    "reward_weights", "use_vllm", "vllm_mode",
    "max_length", "max_seq_length", "packing", "padding_free", "completion_only_loss", "assistant_only_loss",
    "dataset_text_field", "rpo_alpha", "label_smoothing",
    "report_to", "run_name",
)  # fmt: skip
# Where the cache of what was read keeps the arguments' class (no TrainingArguments field has that name).
CONFIG_CLASS = "config_class"
# trainer_state.json's own names for the few settings it keeps.
STATE_SETTINGS = ("train_batch_size", "max_steps", "num_train_epochs", "save_steps", "logging_steps")
# A string setting is kept only when it is a plain word: never a path, a URL or anything with spaces.
_PLAIN_WORD_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
# Hugging Face tokens (hf_...) are plain words too.
_TOKEN_LIKE_RE = re.compile(r"^hf_[A-Za-z0-9]{20,}$")


def _kept_value(value: Any) -> JSONScalar | list[JSONScalar] | None:
    """A setting's value as the card may show it, or None to leave the setting out."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if _PLAIN_WORD_RE.match(value) and not _TOKEN_LIKE_RE.match(value) else None
    if isinstance(value, list) and value:
        kept = [_kept_value(v) for v in value]
        return kept if all(v is not None for v in kept) else None  # type: ignore[return-value]
    return None


def hyperparameters(fields: dict[str, Any], names: tuple[str, ...] = HYPERPARAMETERS) -> dict[str, Any]:
    """The settings a card shows, from a saved TrainingArguments' (or trainer state's) fields.

    ``num_train_epochs`` is left out when ``max_steps`` set the length (the Trainer ignores it then).
    """
    kept = {name: value for name in names if (value := _kept_value(fields.get(name))) is not None}
    max_steps = kept.get("max_steps")
    if isinstance(max_steps, int) and max_steps > 0:
        kept.pop("num_train_epochs", None)
    return kept


def _tracker_fields(fields: dict[str, Any]) -> dict[str, str]:
    """Where trackio logged, if the arguments say: its project (a plain word) and Space (a Hub id)."""
    kept = {}
    project, space = fields.get("project"), fields.get("trackio_space_id")
    if isinstance(project, str) and _PLAIN_WORD_RE.match(project):
        kept["project"] = project
    if isinstance(space, str) and space.count("/") == 1 and is_hub_id(space):
        kept["trackio_space_id"] = space
    return kept


def _read_training_args(run_dir: Path, path: Path) -> dict[str, Any] | None:
    """The kept fields of `path` (the trackers' ones included), from the cache or read safely."""
    version = FileVersion.of(path)
    key = f"{version.device}-{version.inode}-{version.size}-{version.mtime_ns}"
    cache = run_dir / TRAINING_ARGS_DIR / f"{key}.json"
    cached = read_json_object(cache)
    if cached is not None:
        return cached
    if not is_torch_archive(path):
        return None  # not what torch.save writes: the trainer state is read instead
    label = path.relative_to(run_dir).as_posix() if path.is_relative_to(run_dir) else path.name
    args = read_training_args(path, label)
    kept = {**hyperparameters(args.fields), **_tracker_fields(args.fields), CONFIG_CLASS: args.config_class}
    keep(cache, json.dumps(kept, sort_keys=True), "a checkpoint's training arguments")
    return kept


def read_trainer_settings(
    run_dir: Path, checkpoint_dir: Path | None, state: dict[str, Any] | None
) -> tuple[TrainerSettings | None, tuple[TrackerRun, ...]]:
    """The hyperparameters (None when neither file has any) and the trackers ``report_to`` names, of a TRL
    run without recorded hyperparameters: from the ``training_args.bin`` of `checkpoint_dir` (the newest
    complete checkpoint; the run's ``.hubkit/`` keeps what was read), else from `state` (the newest trainer
    state).

    Raises:
        TrainingArgsError: the training_args.bin names a class outside transformers, TRL and accelerate.
    """
    fields = None
    if checkpoint_dir is not None and (checkpoint_dir / TRAINING_ARGS).is_file():
        fields = _read_training_args(run_dir, checkpoint_dir / TRAINING_ARGS)
    if fields is not None:
        trackers = trackers_from_args(fields, run_dir)
        values = {name: fields[name] for name in HYPERPARAMETERS if name in fields}
        config_class = fields.get(CONFIG_CLASS)
        settings = TrainerSettings(
            values, TRAINING_ARGS, config_class if isinstance(config_class, str) else None
        )
        return (settings if values else None), trackers
    values = hyperparameters(state or {}, STATE_SETTINGS)
    return (TrainerSettings(values, TRAINER_STATE) if values else None), ()


def _wandb_runs(run_dir: Path) -> list[str]:
    """The ids of the W&B runs whose folders (``wandb/run-<time>-<id>/``) are in the run directory."""
    folder = run_dir / "wandb"
    if not folder.is_dir():
        return []
    ids = []
    for child in sorted(folder.iterdir()):
        match = re.match(r"^(?:offline-)?run-\d{8}_\d{6}-([a-z0-9]{1,32})$", child.name)
        if match and child.is_dir():
            ids.append(match.group(1))
    return ids


def trackers_from_args(fields: dict[str, Any], run_dir: Path) -> tuple[TrackerRun, ...]:
    """The trackers ``report_to`` names, each with what the run's files say of where it is: trackio's
    Space (``trackio_space_id``) and project, the id of the W&B run whose folder is in the run directory
    (W&B keeps its entity and project outside it, so a W&B run is named, not linked)."""
    report_to = fields.get("report_to")
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    found = []
    for name in names:
        if name == "wandb":
            ids = _wandb_runs(run_dir)
            found.append(TrackerRun("wandb", detail=f"run {ids[-1]}" if ids else None))
        elif name == "trackio":
            space = fields.get("trackio_space_id")
            project = fields.get("project")
            url = repo_url(space, "space") if isinstance(space, str) else None
            detail = f"project {project}" if isinstance(project, str) else None
            found.append(TrackerRun("trackio", url=url, detail=detail))
        elif name == "tensorboard":
            found.append(TENSORBOARD)
    return tuple(found)
