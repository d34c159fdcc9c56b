"""Reader for runs saved by TRL (transformers `Trainer` checkpoints).

Layout (TRL 1.16, PEFT LoRA, ``save_steps=N``)::

    <checkpoints_dir>/
      checkpoint-N/   adapter_config.json, adapter_model.safetensors, tokenizer files,
                      trainer_state.json (with log_history), training_args.bin, optimizer.pt, ...
      runs/<time_host>/events.out.tfevents.*   with report_to="tensorboard"

A checkpoint is complete once its ``trainer_state.json`` exists and records ``global_step == N``: the
Trainer writes it after the adapter and optimizer state. Metrics come from the newest ``log_history``
(from TensorBoard event files when it has none). A run whose manifest records no hyperparameters gets
the trainer's own (`hubkit.runs.trl_settings`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hubkit.formats.peft import rank_and_alpha, read_saved_adapter_config
from hubkit.runs.files import numbered_dirs, read_json_object
from hubkit.runs.manifest import LoraSettings, Manifest, is_hub_id
from hubkit.runs.model import (
    Checkpoint,
    FrameworkReader,
    InferredSettings,
    Metrics,
    RunContents,
)
from hubkit.runs.tensorboard import EVENT_FILES, TENSORBOARD, event_files, read_event_metrics
from hubkit.runs.trl_settings import TRAINER_STATE, read_trainer_settings

_CHECKPOINT_RE = re.compile(r"^checkpoint-([0-9]{1,9})$")
TOKENIZER_CONFIG = "tokenizer_config.json"


def looks_like(root: Path) -> bool:
    """True when `root` holds TRL ``checkpoint-N/`` directories."""
    return bool(numbered_dirs(root, _CHECKPOINT_RE))


def _checkpoint(root: Path, step: int, path: Path, state: dict[str, Any] | None) -> Checkpoint:
    """A ``checkpoint-N/`` folder, complete once its trainer state (`state`, as read) records step N."""
    if state is None:
        incomplete: str | None = (
            f"it has no readable {TRAINER_STATE} (the Trainer writes it last when saving)"
        )
    elif state.get("global_step") != step:
        incomplete = f"its {TRAINER_STATE} records global_step {state.get('global_step')}, not {step}"
    else:
        incomplete = None
    # The checkpoint's own, else the output dir's: Trainer.save_model() at the end writes the tokenizer there.
    tokenizer_dir = next((d for d in (path, root) if (d / TOKENIZER_CONFIG).is_file()), None)
    return Checkpoint(step, path, incomplete, adapter_dir=path, tokenizer_dir=tokenizer_dir)


def _newest_state(
    checkpoints: list[Checkpoint], states: dict[int, dict[str, Any] | None], final: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The trainer state with the highest global_step: the newest complete checkpoint's or the output dir's
    (`final`, written by trainer.save_state())."""
    candidates = [states[c.step] for c in checkpoints if c.complete] + [final]
    known = [s for s in candidates if s is not None and isinstance(s.get("global_step"), int)]
    return max(known, key=lambda s: s["global_step"]) if known else None


def _metrics(state: dict[str, Any] | None) -> Metrics:
    entries: list[tuple[int, dict[str, float]]] = []
    for record in (state or {}).get("log_history") or []:
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            continue
        values = {
            name: float(value)
            for name, value in record.items()
            if name != "step" and isinstance(value, int | float) and not isinstance(value, bool)
        }
        if values:
            entries.append((record["step"], values))
    return Metrics.from_entries(entries)


def _contents(
    run_dir: Path, manifest: Manifest, checkpoints: list[Checkpoint], state: dict[str, Any] | None
) -> RunContents:
    """What one training run's checkpoints and newest trainer state say."""
    max_steps = (state or {}).get("max_steps")
    ended = bool(state and isinstance(max_steps, int) and max_steps > 0 and state["global_step"] >= max_steps)
    metrics, source = _metrics(state), None
    if not metrics.rows:
        files = event_files(run_dir)
        if files:
            metrics, source = read_event_metrics(files), EVENT_FILES
    settings, trackers = None, ()
    if not manifest.hyperparameters:
        newest = next((c.path for c in reversed(checkpoints) if c.complete), None)
        settings, trackers = read_trainer_settings(run_dir, newest, state)
    if source and not any(t.name == "tensorboard" for t in trackers):
        trackers = (*trackers, TENSORBOARD)
    return RunContents(
        checkpoints=tuple(checkpoints),
        metrics=metrics,
        training_ended=ended,
        trainer_settings=settings,
        trackers=trackers,
        metrics_source=source,
    )


# trainer_state.json's settings that one run keeps from its first save to its last (resumed or not).
_RUN_CONSTANTS = ("max_steps", "train_batch_size", "num_train_epochs", "save_steps", "logging_steps")


def _continues(state: dict[str, Any], newer: dict[str, Any]) -> bool:
    """Whether `newer` is a later state of the same training run as `state`: the same settings, and the
    log history of `state` is where `newer`'s starts (a resumed run reloads it and appends)."""
    if any(state.get(name) != newer.get(name) for name in _RUN_CONSTANTS):
        return False
    history, later = state.get("log_history") or [], newer.get("log_history") or []
    return isinstance(history, list) and isinstance(later, list) and later[: len(history)] == history


def _training_runs(
    checkpoints: list[Checkpoint], states: dict[int, dict[str, Any] | None]
) -> list[list[Checkpoint]]:
    """The complete checkpoints grouped by the training run that saved them, the run holding the newest
    step first: a script run twice into one output_dir without resuming leaves two runs' saves side by side
    (the second overwriting the first's early steps)."""
    runs: list[tuple[dict[str, Any], list[Checkpoint]]] = []
    for checkpoint in sorted((c for c in checkpoints if c.complete), key=lambda c: -c.step):
        state = states[checkpoint.step] or {}
        home = next((saved for head, saved in runs if _continues(state, head)), None)
        if home is None:
            runs.append((state, [checkpoint]))
        else:
            home.insert(0, checkpoint)
    return [saved for _, saved in runs]


def read(run_dir: Path, manifest: Manifest) -> RunContents:
    """Checkpoints (by step, complete or not), metrics and whether training ended, from a TRL run whose
    manifest's ``checkpoints_dir`` holds the ``checkpoint-N/`` folders. When the folder holds the saves of
    more than one training run, `RunContents.training_runs` has each one's contents.
    """
    root = run_dir / manifest.checkpoints_dir
    saved_dirs = numbered_dirs(root, _CHECKPOINT_RE)
    states = {step: read_json_object(path / TRAINER_STATE) for step, path in saved_dirs}  # each read once
    checkpoints = [_checkpoint(root, step, path, states[step]) for step, path in saved_dirs]
    final = read_json_object(root / TRAINER_STATE)  # trainer.save_state() of the run that ended
    runs = _training_runs(checkpoints, states)
    if len(runs) <= 1:
        return _contents(run_dir, manifest, checkpoints, _newest_state(checkpoints, states, final))
    pending = [c for c in checkpoints if not c.complete]
    each = []
    for saved in runs:
        newest = states[saved[-1].step] or {}
        state = final if final is not None and _continues(newest, final) else newest
        each.append(_contents(run_dir, manifest, sorted(saved + pending, key=lambda c: c.step), state))
    return RunContents(
        checkpoints=tuple(checkpoints), metrics=Metrics(), training_ended=False, training_runs=tuple(each)
    )


def infer(root: Path) -> InferredSettings:
    """Base model and LoRA settings from the newest ``adapter_config.json`` (runs without a manifest).

    The base model is only taken when it is a Hub id, never a local path.
    """
    saved = numbered_dirs(root, _CHECKPOINT_RE)
    for _, path in reversed(saved):
        config = read_saved_adapter_config(path)
        if config is None:
            continue
        base = config.get("base_model_name_or_path")
        base_model = base if isinstance(base, str) and is_hub_id(base) and not Path(base).exists() else None
        return InferredSettings(base_model=base_model, lora=lora_from_adapter_config(config))
    saving = any(
        not _checkpoint(root, step, path, read_json_object(path / TRAINER_STATE)).complete
        for step, path in saved
    )
    return InferredSettings(base_model=None, lora=None, save_in_progress=saving)


def lora_from_adapter_config(config: dict[str, Any]) -> LoraSettings | None:
    """LoRA settings from a PEFT ``adapter_config.json`` dict; None when r or alpha is missing or zero."""
    rank_alpha = rank_and_alpha(config)
    if rank_alpha is None:
        return None
    targets = config.get("target_modules") or ()
    return LoraSettings(
        r=rank_alpha[0],
        alpha=rank_alpha[1],
        target_modules=tuple(sorted(targets)) if isinstance(targets, list) else (str(targets),),
        dropout=float(config.get("lora_dropout") or 0.0),
        use_rslora=bool(config.get("use_rslora")),
    )


READER = FrameworkReader(name="trl", looks_like=looks_like, read=read, infer=infer)
