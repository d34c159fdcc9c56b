"""The framework-neutral view of a training run: `Run`, its `Checkpoint`s and its `Metrics`.

Framework readers (`hubkit.runs.trl`, `hubkit.runs.verl`) build these from their own layouts; everything
downstream (adapters, cards, publishing) reads only these dataclasses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hubkit.runs.manifest import JSONScalar, LoraSettings, Manifest


def is_number(value: object) -> bool:
    """Whether a parsed JSON value is a number a chart or a table can show: not a bool, finite, within
    float range (a 400-digit integer is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


@dataclass(frozen=True)
class Checkpoint:
    """One saved training step.

    Args:
        path: the step's directory (TRL ``checkpoint-N/``, verl ``global_step_N/``).
        incomplete_reason: why the step is not complete yet, in words; None once the framework has marked
            the save as finished. Incomplete steps are still being written (or were interrupted) and must
            not be published.
        adapter_dir: where the framework saved a PEFT adapter for this step, if it did (verl's
            ``actor/lora_adapter/`` may be missing or empty; `hubkit.adapters` then rebuilds it).
        tokenizer_dir: where the tokenizer and chat template files of this step are, if anywhere.
    """

    step: int
    path: Path
    incomplete_reason: str | None = None
    adapter_dir: Path | None = None
    tokenizer_dir: Path | None = None

    @property
    def complete(self) -> bool:
        """Whether the framework has finished saving this step (only complete steps are published)."""
        return self.incomplete_reason is None

    @property
    def name(self) -> str:
        """How the Hub layout names this step (``global_step_N``), whatever the framework."""
        return f"global_step_{self.step}"

    @property
    def label(self) -> str:
        """The step as messages name it, by its folder on disk: ``checkpoint-20`` (TRL), ``checkpoint
        global_step_20`` (verl)."""
        folder = self.path.name
        return folder if folder.startswith("checkpoint") else f"checkpoint {folder}"


@dataclass(frozen=True)
class MetricsRow:
    """The metrics logged at one step, by name (framework names kept as they are)."""

    step: int
    values: dict[str, float]


@dataclass(frozen=True)
class Metrics:
    """A run's logged metrics, one row per step, sorted by step."""

    rows: tuple[MetricsRow, ...] = ()

    @classmethod
    def from_entries(cls, entries: list[tuple[int, dict[str, float]]]) -> Metrics:
        """Merge (step, values) entries logged at the same step (e.g. train and eval logs), later values
        winning on a name clash, and sort by step."""
        merged: dict[int, dict[str, float]] = {}
        for step, values in entries:
            merged.setdefault(step, {}).update(values)
        return cls(tuple(MetricsRow(step, merged[step]) for step in sorted(merged)))

    @property
    def names(self) -> tuple[str, ...]:
        """Every metric name that appears in any row, sorted."""
        return tuple(sorted({name for row in self.rows for name in row.values}))

    def series(self, name: str) -> list[tuple[int, float]]:
        """The (step, value) points of one metric, in step order; steps that did not log it are left out."""
        return [(row.step, row.values[name]) for row in self.rows if name in row.values]

    def to_jsonl(self) -> str:
        """Framework-neutral JSON lines, ``{"step": N, "<metric>": value, ...}`` per step, sorted by step.

        Non-finite values (a NaN loss) are written as ``null`` so that every line is valid JSON.
        """
        lines = []
        for row in self.rows:
            values = {name: v if math.isfinite(v) else None for name, v in sorted(row.values.items())}
            lines.append(json.dumps({"step": row.step, **values}, allow_nan=False) + "\n")
        return "".join(lines)


@dataclass(frozen=True)
class TrainerSettings:
    """Hyperparameters the trainer itself saved, for a run whose manifest records none.

    Args:
        values: setting name → value, as the trainer named them (``learning_rate``, ``num_generations``).
        source: the file they were read from (``training_args.bin`` or ``trainer_state.json``).
        config_class: the saved arguments' class, "module.Name" (``trl.trainer.sft_config.SFTConfig``),
            when the file names one.
    """

    values: dict[str, JSONScalar | list[JSONScalar]]
    source: str
    config_class: str | None = None


@dataclass(frozen=True)
class TrackerRun:
    """A tracker the run logged to, as the run's files tell.

    Args:
        name: ``wandb``, ``trackio`` or ``tensorboard``.
        url: its dashboard, when the files say where it is.
        detail: what the files say when there is no link (``run 3xk2a9 (offline)``, ``event files``).
    """

    name: str
    url: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class QuantizedBase:
    """The run trained LoRA on a quantized base (QLoRA, e.g. Unsloth's ``...-bnb-4bit``); its adapters are
    published against the full-precision base.

    Args:
        trained_on: the quantized base the adapters name.
        full_precision: the base published instead (the manifest's ``base_model``), or None when none is
            known (the release then names the quantized base).
        how: ``given`` (``--base-model``) or ``known`` (hubkit's table of quantized bases).
    """

    trained_on: str
    full_precision: str | None
    how: str = "given"

    @property
    def note(self) -> str:
        """One line for the push: what was swapped, or what is missing."""
        if self.full_precision is None:
            return (
                f"The adapters name {self.trained_on}, a quantized base: pass --base-model ORG/NAME for its "
                "full-precision base"
            )
        source = "--base-model" if self.how == "given" else "the known full-precision base"
        return (
            f"The adapters were trained on {self.trained_on} (4-bit, QLoRA): published against "
            f"{self.full_precision} ({source})"
        )


@dataclass(frozen=True)
class Run:
    """A training run read from its directory.

    Args:
        manifest: the run's manifest (read from ``hubkit.json``, or inferred for runs without one).
        checkpoints: the complete checkpoints, sorted by step.
        pending: checkpoints that exist but are not complete yet (a run still training), sorted by step.
        finished: True when the manifest records an end time or the framework says training ended: the
            one answer to "has training finished" (cards, the watcher and the push all read it).
        trainer_settings: hyperparameters the trainer saved, when the manifest records none.
        trackers: the trackers the run logged to (besides the manifest's ``trackers``).
        quantized_base: set when the adapters name a quantized base (QLoRA).
        metrics_source: the file the metrics were read from, when not the framework's usual one
            (``TensorBoard event files``).
        manifest_recorded: whether the run has its own ``hubkit.json`` (else `manifest` was inferred from
            the framework's files).
        base_model_source: where `manifest.base_model` comes from: ``hubkit.json``, ``adapter_config.json``
            (the adapters name it), ``--base-model``, or hubkit's table of quantized bases.
    """

    run_dir: Path
    manifest: Manifest
    checkpoints: tuple[Checkpoint, ...]
    pending: tuple[Checkpoint, ...]
    metrics: Metrics
    finished: bool
    trainer_settings: TrainerSettings | None = None
    trackers: tuple[TrackerRun, ...] = ()
    quantized_base: QuantizedBase | None = None
    metrics_source: str | None = None
    manifest_recorded: bool = True
    base_model_source: str = "hubkit.json"

    @property
    def framework(self) -> str:
        return self.manifest.framework

    @property
    def latest(self) -> Checkpoint | None:
        """The newest complete checkpoint (the one published at the repo root), if any."""
        return self.checkpoints[-1] if self.checkpoints else None

    def checkpoint(self, step: int) -> Checkpoint:
        """The complete checkpoint saved at `step`.

        Raises:
            KeyError: no complete checkpoint at that step.
        """
        for checkpoint in self.checkpoints:
            if checkpoint.step == step:
                return checkpoint
        raise KeyError(step)

    def tokenizer_dir(self, checkpoint: Checkpoint | None = None) -> Path | None:
        """The folder holding ``tokenizer_config.json`` and the chat template for `checkpoint` (default: the
        latest), or None when the run saved no tokenizer."""
        checkpoint = checkpoint or self.latest
        return checkpoint.tokenizer_dir if checkpoint else None


@dataclass(frozen=True)
class RunContents:
    """What a framework reader finds in a run directory (the manifest is read separately)."""

    checkpoints: tuple[Checkpoint, ...]
    metrics: Metrics
    training_ended: bool
    trainer_settings: TrainerSettings | None = None
    trackers: tuple[TrackerRun, ...] = ()
    metrics_source: str | None = None
    # A folder holding the saves of several training runs (a script run twice without resuming): each
    # one's contents, the run with the newest step first; the fields above are then not one run's.
    training_runs: tuple[RunContents, ...] = ()


@dataclass(frozen=True)
class InferredSettings:
    """What a reader can tell about a run that has no ``hubkit.json``.

    ``save_in_progress``: no checkpoint holds a whole ``adapter_config.json`` yet and one is still being
    saved (a trainer writes the adapter's weights before its config), so the base may be told once it ends.
    """

    base_model: str | None
    lora: LoraSettings | None
    save_in_progress: bool = False


@dataclass(frozen=True)
class FrameworkReader:
    """One framework's layout, as functions with the same signatures for every framework.

    Args:
        name: the manifest's ``framework`` value.
        looks_like: whether a checkpoints directory is in this framework's layout.
        read: the checkpoints, metrics and end-of-training flag of a run.
        infer: base model and LoRA settings recorded by the framework itself (for runs without a manifest).
    """

    name: str
    looks_like: Callable[[Path], bool]
    read: Callable[[Path, Manifest], RunContents]
    infer: Callable[[Path], InferredSettings]
