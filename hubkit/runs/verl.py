"""Reader for runs saved by verl (FSDP / FSDP2 checkpoints).

Layout (verl 0.6.1; research: verl.md §1.2)::

    <checkpoints_dir>/
      latest_checkpointed_iteration.txt      the newest finished save, e.g. "200"
      global_step_N/actor/
        model_world_size_W_rank_R.pt         FSDP shards of the PeftModel (base + LoRA)
        fsdp_config.json                     {"FSDP_version": 2, "world_size": W}
        huggingface/                         config + tokenizer files
        lora_adapter/                        PEFT adapter (v0.6/0.7 only; may be EMPTY with PEFT >= 0.21)
        lora_train_meta.json                 {"r", "lora_alpha", "task_type"} (verl >= 0.8)

A step is complete only when it is <= the number in ``latest_checkpointed_iteration.txt`` (verl writes it
after every rank has saved) and its shards are all there. Metrics come from verl's ``file`` logger JSONL,
``{"step": N, "data": {...}}`` per line (manifest ``metrics_file``), else from its ``tensorboard`` logger's
event files.
"""

from __future__ import annotations

import re
from pathlib import Path

from hubkit.errors import FileFormatError, ManifestError
from hubkit.formats.fsdp import model_shard_paths, world_size
from hubkit.formats.json_file import decode_text, parse_json, read_bounded
from hubkit.formats.peft import read_saved_adapter_config
from hubkit.runs.files import numbered_dirs, read_json_object
from hubkit.runs.manifest import LoraSettings, Manifest, is_hub_id
from hubkit.runs.model import (
    Checkpoint,
    FrameworkReader,
    InferredSettings,
    Metrics,
    RunContents,
    is_number,
)
from hubkit.runs.tensorboard import EVENT_FILES, TENSORBOARD, event_files, read_event_metrics
from hubkit.runs.trl import lora_from_adapter_config

_STEP_RE = re.compile(r"^global_step_([0-9]{1,9})$")
# A metrics file of 64 MB is some 100,000 steps of verl's ~600 bytes a line (the seed's has 200).
MAX_METRICS_BYTES = 64_000_000
MAX_STEP = 999_999_999
LATEST_FILE = "latest_checkpointed_iteration.txt"
LORA_META = "lora_train_meta.json"
DEFAULT_METRICS_FILE = "metrics.jsonl"


def looks_like(root: Path) -> bool:
    """True when `root` holds verl ``global_step_N/actor/`` directories."""
    return bool(numbered_dirs(root, _STEP_RE, holding="actor"))


def latest_saved_step(root: Path) -> int | None:
    """The step in ``latest_checkpointed_iteration.txt`` (a number: more than 64 bytes is none), or None when
    verl has not finished a save yet."""
    try:
        return int(read_bounded(root / LATEST_FILE, 64).strip())
    except (FileFormatError, ValueError):
        return None


def _checkpoint(step: int, path: Path, latest: int | None) -> Checkpoint:
    actor = path / "actor"
    size = world_size(actor)
    if latest is None:
        incomplete = f"verl has not finished any save yet (no {LATEST_FILE})"
    elif step > latest:
        incomplete = (
            f"it is beyond {LATEST_FILE} ({latest}): verl is still saving it, or the save was interrupted"
        )
    elif size is None or not all(p.is_file() for p in model_shard_paths(actor, size)):
        incomplete = "its actor/ model shards are missing"
    else:
        incomplete = None
    hf_dir = actor / "huggingface"
    lora_dir = actor / "lora_adapter"
    return Checkpoint(
        step=step,
        path=path,
        incomplete_reason=incomplete,
        adapter_dir=lora_dir if lora_dir.is_dir() else None,
        tokenizer_dir=hf_dir if (hf_dir / "tokenizer_config.json").is_file() else None,
    )


def _metrics_path(run_dir: Path, manifest: Manifest) -> Path | None:
    if manifest.metrics_file:
        return run_dir / manifest.metrics_file
    default = run_dir / DEFAULT_METRICS_FILE
    return default if default.is_file() else None


def read_metrics_jsonl(path: Path) -> Metrics:
    """Metrics from verl's file-logger JSONL (``{"step": N, "data": {...}}``) or hubkit's neutral form.

    A last line without its newline is a write in progress and is skipped. Read within bounds (a run's or
    a release's file alike): at most `MAX_METRICS_BYTES`, each line a JSON object nested at most a few
    levels, steps from 0 to `MAX_STEP`; values that are not finite numbers are left out.

    Raises:
        ManifestError: the file is too large, or a complete line is not a JSON object with an integer ``step``.
    """
    if not path.exists():
        return Metrics()
    try:
        text = decode_text(read_bounded(path, MAX_METRICS_BYTES), path.name)
    except FileFormatError as e:
        raise ManifestError(f"metrics file {e}") from e
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # the logger is still writing this line
    entries: list[tuple[int, dict[str, float]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = parse_json(line.encode(), f"metrics file {path.name} line {number}", max_depth=4)
        except FileFormatError as e:
            raise ManifestError(str(e)) from e
        step = record.get("step") if isinstance(record, dict) else None
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step <= MAX_STEP:
            raise ManifestError(
                f"metrics file {path.name} line {number} has no integer 'step' from 0 to {MAX_STEP}"
            )
        data = record["data"] if isinstance(record.get("data"), dict) else record
        values = {name: float(value) for name, value in data.items() if name != "step" and is_number(value)}
        entries.append((step, values))
    return Metrics.from_entries(entries)


def read(run_dir: Path, manifest: Manifest) -> RunContents:
    """Checkpoints, metrics and whether training ended, from a verl run.

    Training counts as ended once the manifest's ``hyperparameters.max_steps`` (verl's
    ``trainer.total_training_steps``; that name is read too) has been saved. Checkpoints come sorted by
    step, complete or not.
    """
    root = run_dir / manifest.checkpoints_dir
    latest = latest_saved_step(root)
    checkpoints = tuple(
        _checkpoint(step, path, latest) for step, path in numbered_dirs(root, _STEP_RE, holding="actor")
    )
    metrics_path = _metrics_path(run_dir, manifest)
    hyperparameters = manifest.hyperparameters
    total = hyperparameters.get("max_steps", hyperparameters.get("total_training_steps"))
    ended = isinstance(total, int) and latest is not None and latest >= total
    metrics = read_metrics_jsonl(metrics_path) if metrics_path else Metrics()
    # verl's `tensorboard` logger writes event files (tensorboard_log/<project>/<experiment>/) instead.
    files = event_files(run_dir) if not metrics.rows else []
    return RunContents(
        checkpoints=checkpoints,
        metrics=read_event_metrics(files) if files else metrics,
        training_ended=ended,
        trackers=(TENSORBOARD,) if files else (),
        metrics_source=EVENT_FILES if files else None,
    )


def lora_from_meta(actor_dir: Path) -> LoraSettings | None:
    """LoRA settings from ``lora_train_meta.json`` (verl >= 0.8), or None when absent or alpha is 0."""
    meta = read_json_object(actor_dir / LORA_META)
    if meta is None:
        return None
    return lora_from_adapter_config({"r": meta.get("r"), "lora_alpha": meta.get("lora_alpha")})


def infer(root: Path) -> InferredSettings:
    """Base model and LoRA settings recorded by verl itself, from the newest step that has them."""
    base_model: str | None = None
    lora: LoraSettings | None = None
    config_read = False
    saved = numbered_dirs(root, _STEP_RE, holding="actor")
    for _, path in reversed(saved):
        actor = path / "actor"
        config = read_saved_adapter_config(actor / "lora_adapter")
        config_read = config_read or config is not None
        if config is not None and base_model is None:
            base = config.get("base_model_name_or_path")
            if isinstance(base, str) and is_hub_id(base) and not Path(base).exists():
                base_model = base
        if lora is None:
            lora = lora_from_meta(actor) or (lora_from_adapter_config(config) if config else None)
        if base_model and lora:
            break
    latest = latest_saved_step(root)
    saving = not config_read and any(not _checkpoint(step, path, latest).complete for step, path in saved)
    return InferredSettings(base_model=base_model, lora=lora, save_in_progress=saving)


READER = FrameworkReader(name="verl", looks_like=looks_like, read=read, infer=infer)
