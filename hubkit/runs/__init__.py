"""Reading training runs: one reader per framework, a framework-neutral `Run` out.

    run = load_run(find_run_dir("my-run"))
    for checkpoint in run.checkpoints: ...

Runs made by plain TRL or verl without a ``hubkit.json`` also load: the framework is inferred from the
layout, and `base_model` supplies the Hub id when the framework did not record one.
"""

from __future__ import annotations

from pathlib import Path

from hubkit.errors import ManifestError
from hubkit.runs import trl, verl
from hubkit.runs.locate import default_runs_dir, find_run_dir
from hubkit.runs.manifest import MANIFEST_NAME, Manifest, is_hub_id
from hubkit.runs.model import (
    Checkpoint,
    FrameworkReader,
    InferredSettings,
    Metrics,
    MetricsRow,
    Run,
    RunContents,
)
from hubkit.runs.select import select_checkpoints

READERS: dict[str, FrameworkReader] = {reader.name: reader for reader in (trl.READER, verl.READER)}

__all__ = [
    "READERS",
    "Checkpoint",
    "Metrics",
    "MetricsRow",
    "Run",
    "default_runs_dir",
    "find_run_dir",
    "load_run",
    "select_checkpoints",
]


def _inferred_manifest(run_dir: Path, base_model: str | None) -> Manifest:
    """A manifest for a run without ``hubkit.json``, from its layout and what the framework recorded."""
    matches = [reader for reader in READERS.values() if reader.looks_like(run_dir)]
    if len(matches) != 1:
        found = "both TRL and verl checkpoints" if matches else "no checkpoint-N/ or global_step_N/actor/"
        raise ManifestError(f"{run_dir.name} has no {MANIFEST_NAME} and {found}: cannot tell which run it is")
    reader = matches[0]
    inferred: InferredSettings = reader.infer(run_dir)
    base = base_model or inferred.base_model
    if base is None:
        raise ManifestError(
            f"{run_dir.name} has no {MANIFEST_NAME} and its adapters do not name a Hub base model: "
            "pass --base-model ORG/NAME"
        )
    if not is_hub_id(base):
        raise ManifestError(f"--base-model must be a Hub id like 'Qwen/Qwen3-4B', got {base!r}")
    return Manifest(run_id=run_dir.name, framework=reader.name, base_model=base, lora=inferred.lora)  # type: ignore[arg-type]


def _refuse_other_layout(checkpoints_root: Path, framework: str) -> None:
    """A manifest naming the wrong framework would silently show no checkpoints: say so instead."""
    for reader in READERS.values():
        if reader.name != framework and reader.looks_like(checkpoints_root):
            raise ManifestError(
                f"{MANIFEST_NAME} says framework {framework!r} but {checkpoints_root.name}/ holds "
                f"{reader.name} checkpoints: fix the manifest's framework"
            )


def load_run(run_dir: Path, *, base_model: str | None = None) -> Run:
    """Read a run directory into a `Run`.

    Args:
        run_dir: the run directory (see `find_run_dir`).
        base_model: the base model's Hub id, for runs without ``hubkit.json`` whose framework did not
            record a Hub id. With a manifest it must agree with the manifest's ``base_model``.

    Returns:
        The run: complete checkpoints in ``checkpoints``, incomplete ones in ``pending``, both by step.

    Raises:
        ManifestError: an invalid manifest, an unrecognized layout or one of another framework than the
            manifest says, or an unknown/conflicting base model.
    """
    run_dir = Path(run_dir)
    if (run_dir / MANIFEST_NAME).is_file():
        manifest = Manifest.load(run_dir)
        if base_model is not None and base_model != manifest.base_model:
            raise ManifestError(
                f"--base-model {base_model} conflicts with {MANIFEST_NAME}'s base_model {manifest.base_model}: "
                "drop --base-model or fix the manifest"
            )
    else:
        manifest = _inferred_manifest(run_dir, base_model)
    contents: RunContents = READERS[manifest.framework].read(run_dir, manifest)
    if not contents.checkpoints:
        _refuse_other_layout(run_dir / manifest.checkpoints_dir, manifest.framework)
    return Run(
        run_dir=run_dir,
        manifest=manifest,
        checkpoints=tuple(c for c in contents.checkpoints if c.complete),
        pending=tuple(c for c in contents.checkpoints if not c.complete),
        metrics=contents.metrics,
        finished=manifest.finished_at is not None or contents.training_ended,
    )
