"""Reading training runs: one reader per framework, a framework-neutral `Run` out.

    run = load_run(find_run_dir("my-run"))
    for checkpoint in run.checkpoints: ...

Runs made by plain TRL or verl without a ``hubkit.json`` also load: the framework is inferred from the
layout, and `base_model` supplies the Hub id when the framework did not record one. A run trained on a
quantized base (QLoRA, Unsloth's ``...-bnb-4bit``) loads against its full-precision base when one is
given or known (`Run.quantized_base` says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hubkit.errors import CheckpointError, ManifestError, RunNotStartedError
from hubkit.runs import trl, verl
from hubkit.runs.base_model import is_quantized_name, known_full_precision
from hubkit.runs.locate import find_run_dir
from hubkit.runs.manifest import MANIFEST_NAME, Manifest, is_hub_id
from hubkit.runs.model import (
    Checkpoint,
    FrameworkReader,
    InferredSettings,
    Metrics,
    MetricsRow,
    QuantizedBase,
    Run,
    RunContents,
)
from hubkit.runs.select import refuse_no_checkpoint, select_checkpoints

READERS: dict[str, FrameworkReader] = {reader.name: reader for reader in (trl.READER, verl.READER)}

__all__ = [
    "Checkpoint",
    "Metrics",
    "MetricsRow",
    "Run",
    "find_run_dir",
    "load_run",
    "refuse_no_checkpoint",
    "select_checkpoints",
]


# Where a run's base model id comes from (`Run.base_model_source`).
FROM_MANIFEST = MANIFEST_NAME
FROM_ADAPTERS = "adapter_config.json"
FROM_OPTION = "--base-model"
FROM_TABLE = "hubkit's table of quantized bases"


def _inferred_manifest(run_dir: Path, base_model: str | None) -> tuple[Manifest, QuantizedBase | None]:
    """A manifest for a run without ``hubkit.json``, from its layout and what the framework recorded."""
    matches = [reader for reader in READERS.values() if reader.looks_like(run_dir)]
    if not matches and (run_dir / FROM_ADAPTERS).is_file():
        # What `model.save_pretrained("lora_model")` writes (the last cell of Unsloth's notebooks): one
        # adapter, no step and no training history to publish as a run.
        raise ManifestError(
            f"{run_dir.name} is a single saved adapter ({FROM_ADAPTERS} at its top), not a run's output "
            "folder: pass --run-dir the trainer's output_dir, the folder holding checkpoint-N/ "
            "(TRL, Unsloth) or global_step_N/ (verl)"
        )
    if not matches:
        raise RunNotStartedError(
            f"{run_dir.name} has no {MANIFEST_NAME} and no checkpoint-N/ or global_step_N/actor/ yet: "
            "cannot tell which run it is (wait for the first save)"
        )
    if len(matches) > 1:
        raise ManifestError(
            f"{run_dir.name} has no {MANIFEST_NAME} and both TRL and verl checkpoints: cannot tell which run it is"
        )
    reader = matches[0]
    inferred: InferredSettings = reader.infer(run_dir)
    quantized = _quantized_base(inferred.base_model, base_model)
    base = (quantized.full_precision if quantized else None) or base_model or inferred.base_model
    if base is None and inferred.save_in_progress:
        raise RunNotStartedError(
            f"{run_dir.name} has no {MANIFEST_NAME} and no whole adapter_config.json yet: cannot tell its "
            "base model (wait for the first save to finish, or pass --base-model ORG/NAME)"
        )
    if base is None:
        raise ManifestError(
            f"{run_dir.name} has no {MANIFEST_NAME} and its adapters do not name a Hub base model: "
            "pass --base-model ORG/NAME"
        )
    if not is_hub_id(base):
        raise ManifestError(f"--base-model must be a Hub id like 'Qwen/Qwen3-4B', got {base!r}")
    manifest = Manifest(run_id=run_dir.name, framework=reader.name, base_model=base, lora=inferred.lora)  # type: ignore[arg-type]
    return manifest, quantized


def _base_model_source(
    manifest_recorded: bool, quantized: QuantizedBase | None, base_model: str | None, base: str
) -> str:
    if quantized is not None and quantized.full_precision is not None:
        return FROM_OPTION if quantized.how == "given" else FROM_TABLE
    if manifest_recorded:
        return FROM_MANIFEST
    return FROM_OPTION if base_model is not None and base_model == base else FROM_ADAPTERS


def _quantized_base(named: str | None, given: str | None) -> QuantizedBase | None:
    """When the adapters (or the manifest) name a quantized base: the full-precision base to publish
    against, `given` (``--base-model``) first, else the one hubkit knows, else none."""
    if named is None or not is_quantized_name(named):
        return None
    if given is not None and given != named:
        return QuantizedBase(trained_on=named, full_precision=given, how="given")
    known = known_full_precision(named)
    return QuantizedBase(trained_on=named, full_precision=known, how="known" if known else "given")


def _manifest(run_dir: Path, base_model: str | None) -> tuple[Manifest, QuantizedBase | None]:
    """The run's manifest (read, or inferred), with its base swapped for the full-precision one if it is
    quantized."""
    if not (run_dir / MANIFEST_NAME).is_file():
        return _inferred_manifest(run_dir, base_model)
    manifest = Manifest.load(run_dir)
    quantized = _quantized_base(manifest.base_model, base_model)
    if quantized is not None and quantized.full_precision is not None:
        return manifest.with_updates(base_model=quantized.full_precision), quantized
    if base_model is not None and base_model != manifest.base_model:
        raise ManifestError(
            f"--base-model {base_model} conflicts with {MANIFEST_NAME}'s base_model {manifest.base_model}: "
            "drop --base-model or fix the manifest"
        )
    return manifest, quantized


def _refuse_other_layout(checkpoints_root: Path, framework: str) -> None:
    """A manifest naming the wrong framework would silently show no checkpoints: say so instead."""
    for reader in READERS.values():
        if reader.name != framework and reader.looks_like(checkpoints_root):
            raise ManifestError(
                f"{MANIFEST_NAME} says framework {framework!r} but {checkpoints_root.name}/ holds "
                f"{reader.name} checkpoints: fix the manifest's framework"
            )


def _one_training_run(run_dir: Path, contents: RunContents, steps: Sequence[int] | None) -> RunContents:
    """The contents of the one training run a folder holds, or of the one that saved every step of
    `steps` when it holds several.

    Raises:
        CheckpointError: several runs, and `steps` does not name steps of one of them.
    """
    if not contents.training_runs:
        return contents
    runs = [tuple(c.step for c in each.checkpoints if c.complete) for each in contents.training_runs]
    for each, saved in zip(contents.training_runs, runs, strict=True):
        if steps and set(steps) <= set(saved):
            return each
    listed = "; ".join(f"steps {', '.join(map(str, saved))}" for saved in runs)
    raise CheckpointError(
        f"{run_dir.name} holds the saves of {len(runs)} training runs whose trainer_state.json histories "
        f"differ (a script run again without resuming?): {listed}; publish one of them with --steps "
        f"{','.join(map(str, runs[0]))}, or move the other's checkpoint folders out"
    )


def load_run(run_dir: Path, *, base_model: str | None = None, steps: Sequence[int] | None = None) -> Run:
    """Read a run directory into a `Run`.

    Args:
        run_dir: the run directory (see `find_run_dir`).
        base_model: the base model's Hub id, for runs without ``hubkit.json`` whose framework did not
            record a Hub id. With a manifest it must agree with the manifest's ``base_model``.
        steps: the steps asked for (``--steps``): they choose the training run to read when the folder
            holds the saves of several.

    Returns:
        The run: complete checkpoints in ``checkpoints``, incomplete ones in ``pending``, both by step.

    Raises:
        ManifestError: an invalid manifest, an unrecognized layout or one of another framework than the
            manifest says, or an unknown/conflicting base model.
        RunNotStartedError: a run without a manifest that has saved no checkpoint yet, or whose first
            save is still being written.
        TrainingArgsError: a training_args.bin that names a class outside transformers, TRL and accelerate.
        CheckpointError: the folder holds the saves of several training runs and `steps` does not choose
            steps of one of them.
    """
    run_dir = Path(run_dir)
    recorded = (run_dir / MANIFEST_NAME).is_file()
    manifest, quantized = _manifest(run_dir, base_model)
    contents = _one_training_run(run_dir, READERS[manifest.framework].read(run_dir, manifest), steps)
    if not contents.checkpoints:
        _refuse_other_layout(run_dir / manifest.checkpoints_dir, manifest.framework)
    return Run(
        run_dir=run_dir,
        manifest=manifest,
        checkpoints=tuple(c for c in contents.checkpoints if c.complete),
        pending=tuple(c for c in contents.checkpoints if not c.complete),
        metrics=contents.metrics,
        finished=manifest.finished_at is not None or contents.training_ended,
        trainer_settings=contents.trainer_settings,
        trackers=contents.trackers,
        quantized_base=quantized,
        metrics_source=contents.metrics_source,
        manifest_recorded=recorded,
        base_model_source=_base_model_source(recorded, quantized, base_model, manifest.base_model),
    )
