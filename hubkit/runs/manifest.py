"""The run manifest `hubkit.json`: the contract between training (recipes) and publishing.

A recipe writes it at the start of a run and updates it at the end; `hubkit.runs` reads it. It is
schema-versioned; fields are only ever added (old manifests keep loading), and a manifest from a newer
hubkit is refused with a message rather than half-read.

Example (abridged)::

    {
      "schema_version": 3,
      "run_id": "20260223_182638_deepscaler_gdpo_lambda0.5",
      "framework": "verl", "framework_version": "0.6.1",
      "base_model": "Qwen/Qwen3-4B", "base_model_revision": null,
      "dataset": {"id": "agentica-org/DeepScaleR-Preview-Dataset", "split": "train",
                  "filter": "solve rate >= 99%", "num_rows": 1840, "content_sha256": "..."},
      "reward": {"components": [{"name": "math_correctness", "weight": 1.0},
                                {"name": "length_penalty", "weight": 0.5,
                                 "params": {"max_completion_length": 15000}}],
                 "aggregation": "sum_then_normalize", ...},
      "lora": {"r": 16, "alpha": 16, "target_modules": ["q_proj", ...]},
      "hyperparameters": {"learning_rate": 5e-05, ...},
      "hardware": {"accelerator": "NVIDIA H100 80GB", "count": 4, "nodes": 1},
      "started_at": "2026-02-23T18:26:38Z", "finished_at": null,
      "trackers": [{"name": "wandb", "url": "https://wandb.ai/..."}],
      "system_prompt": "...",
      "checkpoints_dir": ".", "metrics_file": "metrics.jsonl",
      "push_to": "me/qwen3-4b-gdpo",
      "sweep": {"name": "deepscaler length penalty", "setting": "length_penalty_weight", "value": 0.5}
    }
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from hubkit.errors import FileFormatError, ManifestError
from hubkit.formats.json_fields import checked_fields, refuse_newer_schema
from hubkit.formats.json_file import read_json
from hubkit.rewards.spec import RewardSpec
from hubkit.runs.state import write_atomically

MANIFEST_NAME = "hubkit.json"
# 2 added push_to, 3 sweep. Fields are only ever added: older manifests still load.
SCHEMA_VERSION = 3
Framework = Literal["trl", "verl"]
FRAMEWORKS: tuple[str, ...] = get_args(Framework)
# Hub repo ids: "name" or "owner/name", letters, digits, "-", "_", "." (no "--" or ".." runs).
_HUB_ID_RE = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
JSONScalar = str | int | float | bool | None
# A manifest is a few KB; the push publishes it only up to this size, and a release's is read no larger.
MAX_MANIFEST_BYTES = 1_000_000
MAX_MANIFEST_DEPTH = 8
# What a model can have: a LoRA rank, an answer length in tokens, accelerators in one run.
MAX_LORA_RANK = 65_536
MAX_LORA_ALPHA = 1e6
MAX_SEQUENCE_TOKENS = 1_048_576
MAX_ACCELERATORS = 1_000_000
_LENGTH_HYPERPARAMETERS = ("max_completion_length", "max_response_length", "max_prompt_length")


def is_hub_id(value: str) -> bool:
    """True when `value` looks like a Hub repo id rather than a local path."""
    return (
        bool(_HUB_ID_RE.match(value))
        and ".." not in value
        and "--" not in value
        and not value.startswith((".", "/", "~"))
    )


@dataclass(frozen=True)
class DatasetInfo:
    """Where the training problems came from and how they were chosen."""

    id: str
    config: str | None = None
    split: str = "train"
    revision: str | None = None
    filter: str | None = None
    num_rows: int | None = None
    content_sha256: str | None = None

    @property
    def on_hub(self) -> bool:
        """True when `id` names a Hub dataset ("owner/name"), not a local problem file."""
        return "/" in self.id and is_hub_id(self.id)


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA the run trained; verl adapters are rebuilt from FSDP shards with these."""

    r: int
    alpha: float
    target_modules: tuple[str, ...] = ()
    dropout: float = 0.0
    use_rslora: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.r <= MAX_LORA_RANK:
            raise ManifestError(f"lora.r must be between 1 and {MAX_LORA_RANK}, got {self.r}")
        if not 0 < self.alpha <= MAX_LORA_ALPHA:
            raise ManifestError(
                f"lora.alpha must be positive and at most {MAX_LORA_ALPHA:g}, got {self.alpha} "
                "(alpha 0 makes a no-op adapter)"
            )
        if not 0 <= self.dropout < 1:
            raise ManifestError(f"lora.dropout must be in [0, 1), got {self.dropout}")


@dataclass(frozen=True)
class Hardware:
    accelerator: str = "cpu"
    count: int = 1
    nodes: int = 1

    def __post_init__(self) -> None:
        if not (0 < self.count <= MAX_ACCELERATORS and 0 < self.nodes <= self.count):
            raise ManifestError(f"hardware: {self.count} accelerators on {self.nodes} nodes is not a machine")


@dataclass(frozen=True)
class Tracker:
    name: str
    url: str


_SWEEP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.()-]{0,99}$")
_SETTING_RE = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")


@dataclass(frozen=True)
class SweepInfo:
    """The sweep a run is one point of: its name (the Hub Collection's title), the setting the sweep
    varies (a reward weight, the seed) and this run's value of it."""

    name: str
    setting: str
    value: float | str

    def __post_init__(self) -> None:
        if not _SWEEP_NAME_RE.match(self.name):
            raise ManifestError(
                f"sweep.name must be 1-100 letters, digits, spaces or '_.()-', got {self.name!r}"
            )
        if not _SETTING_RE.match(self.setting):
            raise ManifestError(
                f"sweep.setting must be a setting's name like 'length_penalty_weight', got {self.setting!r}"
            )
        if isinstance(self.value, str) and not 0 < len(self.value) <= 40:
            raise ManifestError("sweep.value must be a number or 1-40 characters")
        if isinstance(self.value, float) and not math.isfinite(self.value):
            raise ManifestError(f"sweep.value must be a finite number, got {self.value}")


def _nested(cls: type[Any], data: Any, key: str) -> Any:
    """The manifest's object at `key` as `cls`, every field checked (`checked_fields`)."""
    return cls(**checked_fields(cls, data, f"{MANIFEST_NAME} {key}", strict=False))


# The manifest's objects, each built by `_nested`.
_PARTS = {"dataset": DatasetInfo, "lora": LoraSettings, "hardware": Hardware, "sweep": SweepInfo}


@dataclass(frozen=True)
class Manifest:
    """A training run as the recipe describes it. See the module docstring for the JSON form."""

    run_id: str
    framework: Framework
    base_model: str
    framework_version: str | None = None
    base_model_revision: str | None = None
    dataset: DatasetInfo | None = None
    reward: RewardSpec | None = None
    lora: LoraSettings | None = None
    hyperparameters: dict[str, JSONScalar | list[JSONScalar]] = field(default_factory=dict)
    hardware: Hardware | None = None
    started_at: str | None = None
    finished_at: str | None = None
    trackers: tuple[Tracker, ...] = ()
    system_prompt: str | None = None
    checkpoints_dir: str = "."
    metrics_file: str | None = None
    push_to: str | None = None  # the adapter repo ("owner/name") the recipe was told to publish to
    sweep: SweepInfo | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        refuse_newer_schema(self.schema_version, MANIFEST_NAME, SCHEMA_VERSION, ManifestError)
        if not self.run_id or "/" in self.run_id or self.run_id in (".", ".."):
            raise ManifestError(f"run_id must be a plain name, got {self.run_id!r}")
        if self.framework not in FRAMEWORKS:
            raise ManifestError(f"framework must be one of {FRAMEWORKS}, got {self.framework!r}")
        if not is_hub_id(self.base_model):
            raise ManifestError(
                f"base_model must be a Hub id like 'Qwen/Qwen3-4B', got {self.base_model!r}: "
                "local paths are never published"
            )
        if self.push_to is not None and (self.push_to.count("/") != 1 or not is_hub_id(self.push_to)):
            raise ManifestError(
                f"push_to must be a Hub repo id like 'me/qwen3-4b-grpo', got {self.push_to!r}"
            )
        for key in _LENGTH_HYPERPARAMETERS:
            length = self.hyperparameters.get(key)
            if isinstance(length, int) and not 0 < length <= MAX_SEQUENCE_TOKENS:
                raise ManifestError(
                    f"hyperparameters.{key} must be between 1 and {MAX_SEQUENCE_TOKENS}, got {length}"
                )
        for rel in (self.checkpoints_dir, self.metrics_file):
            if rel is not None and (os.path.isabs(rel) or ".." in Path(rel).parts):
                raise ManifestError(
                    f"paths in {MANIFEST_NAME} must be relative to the run directory, got {rel!r}"
                )

    # --- JSON ------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["reward"] = self.reward.to_dict() if self.reward else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        """The manifest `data` describes, every field of its declared type (nested objects included).

        Raises:
            ManifestError: not an object, an unknown field, a field of the wrong type or out of range.
        """
        if not isinstance(data, dict):
            raise ManifestError(f"{MANIFEST_NAME} must hold a JSON object")
        refuse_newer_schema(data.get("schema_version"), MANIFEST_NAME, SCHEMA_VERSION, ManifestError)
        try:
            values = checked_fields(cls, data, MANIFEST_NAME)
            if values.get("reward") is not None:
                values["reward"] = RewardSpec.from_dict(values["reward"])
            for key, part in _PARTS.items():
                if values.get(key) is not None:
                    values[key] = _nested(part, values[key], key)
            values["trackers"] = tuple(_nested(Tracker, t, "trackers") for t in values.get("trackers") or ())
            return cls(**values)
        except FileFormatError as e:
            raise ManifestError(str(e)) from e
        except TypeError as e:  # a required field missing
            raise ManifestError(f"invalid {MANIFEST_NAME}: {e}") from e

    def save(self, run_dir: str | os.PathLike[str]) -> Path:
        """Write `run_dir/hubkit.json` atomically (a reader never sees half a file)."""
        path = Path(run_dir) / MANIFEST_NAME
        write_atomically(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        return path

    @classmethod
    def from_file(cls, path: Path) -> Manifest:
        """Read a ``hubkit.json`` file: a run's own, or one downloaded from a published repo.

        Raises:
            ManifestError: the file is missing, larger than `MAX_MANIFEST_BYTES`, not JSON, nested deeper
                than `MAX_MANIFEST_DEPTH`, from a newer hubkit, or not a valid manifest.
        """
        path = Path(path)
        if not path.exists():
            raise ManifestError(f"no {MANIFEST_NAME} in {path.parent}")
        try:
            data = read_json(
                path, max_bytes=MAX_MANIFEST_BYTES, max_depth=MAX_MANIFEST_DEPTH, name=MANIFEST_NAME
            )
        except FileFormatError as e:
            raise ManifestError(str(e)) from e
        return cls.from_dict(data)

    @classmethod
    def load(cls, run_dir: str | os.PathLike[str]) -> Manifest:
        """The manifest of the run in `run_dir` (see `from_file`)."""
        return cls.from_file(Path(run_dir) / MANIFEST_NAME)

    def with_updates(self, **changes: Any) -> Manifest:
        return replace(self, **changes)
