"""The Space's configuration: `space_config.json` beside `app.py`, written by `hubkit push`.

This module is the file's one schema: hubkit loads it to write the file (`hubkit.space`), so it imports
nothing but the standard library.

The app needs nothing else to run: which base model to load and the runs whose adapters it compares
with it (one run, or every run of a sweep: each its adapter repo, revision and checkpoints), how to build
the prompt, the generation defaults and the limits that keep a public Space answering. Unknown keys are
refused, so a config written by a newer hubkit fails loudly instead of half-working.

The file is read from the Space's repo, which anyone with write access may edit: every repo id, revision
and checkpoint name is checked for its form before the app hands it to the Hub's client.

Schema 1 (one run: `adapter_repo`, `adapter_revision`, `merged_repo` at the top) is still read, as a
config of that one run: a Space pushed by an earlier hubkit keeps its meaning, nothing is guessed, and
its owner need not push again for the app to start.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
CONFIG_NAME = "space_config.json"
# A checkpoint is its subfolder in the adapter repo; FINAL ("") is the final adapter at the repo's root.
FINAL = ""
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_RE = re.compile(rf"^{CHECKPOINTS_DIR}/global_step_(\d{{1,12}})$")
# The Hub's repo ids (OWNER/NAME; a base model may have no owner) and git revisions, as this app accepts them.
_NAME = r"[A-Za-z0-9][\w.-]{0,95}"
_REPO_ID_RE = re.compile(rf"^{_NAME}/{_NAME}$")
_BASE_ID_RE = re.compile(rf"^(?:{_NAME}/)?{_NAME}$")
_REVISION_RE = re.compile(r"^[\w][\w./-]{0,199}$")
MAX_RUNS = 100  # a sweep's comparison page compares at most as many
MAX_CHECKPOINTS = 10_000
MAX_RUN_NAME_CHARS = 120
# Schema 1's keys for its one run, now each run's.
_SCHEMA_1_RUN_KEYS = ("adapter_repo", "adapter_revision", "merged_repo")
# Where the run's chat template comes from: the tokenizer published at the adapter repo's root (the
# run's own), the base model's, or none (the prompt is sent as raw text).
CHAT_TEMPLATES = ("adapter", "base", "none")
# "auto" is the base model's own dtype (its config's; bfloat16 for Qwen3), except where the hardware
# cannot compute in it: float16 on a GPU older than Ampere. The others force one dtype everywhere.
DTYPES = ("auto", "bfloat16", "float16", "float32", "float64")


def checkpoint_step(value: str) -> int | None:
    """The training step of a checkpoint value (`checkpoints/global_step_N`), None for the final adapter."""
    match = CHECKPOINT_RE.match(value)
    return int(match.group(1)) if match else None


def checkpoint_label(value: str) -> str:
    """A short label for a checkpoint value: "step 20", or "final adapter"."""
    step = checkpoint_step(value)
    return "final adapter" if step is None else f"step {step}"


def _check_repo_id(name: str, value: object, *, owner: bool = True) -> None:
    """`value` as the Hub's repo ids are; with `owner` False (the base model), also an absolute folder
    (a base loaded from this machine: the benchmarks')."""
    if not owner and isinstance(value, str) and value.startswith("/") and ".." not in value:
        return
    pattern = _REPO_ID_RE if owner else _BASE_ID_RE
    if not isinstance(value, str) or not pattern.match(value) or ".." in value or "--" in value:
        shown = repr(value)[:120]
        raise ValueError(
            f"{name} must be a Hub repo id ({'OWNER/' if owner else '[OWNER/]'}NAME), got {shown}"
        )


def _check_revision(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, str) or not _REVISION_RE.match(value) or ".." in value):
        raise ValueError(f"{name} must be a branch, tag or commit name, got {repr(value)[:120]}")


@dataclass(frozen=True)
class RunConfig:
    """One run the Space compares with the base model.

    Args:
        name: shown in the run picker ("length_penalty_weight=0.5" in a sweep, the run id alone).
        adapter_repo: the adapter repo (final adapter at the root, `checkpoints/global_step_N/`).
        adapter_revision: the adapter repo's revision (None: main).
        merged_repo: the run's merged model, linked from the page (never loaded), or None.
        checkpoints: the checkpoint values the push published, by step, FINAL last; empty: the app lists
            the repo's as it starts (a run's own Space, which follows later pushes). The repo is listed again
            whenever a visitor refreshes or asks for one not listed.
    """

    name: str
    adapter_repo: str
    adapter_revision: str | None = None
    merged_repo: str | None = None
    checkpoints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > MAX_RUN_NAME_CHARS:
            raise ValueError(
                f"a run's name must be 1 to {MAX_RUN_NAME_CHARS} characters, got {self.name!r:.130}"
            )
        if any(ord(c) < 32 for c in self.name):
            raise ValueError(f"a run's name may hold no control characters, got {self.name!r:.130}")
        _check_repo_id("adapter_repo", self.adapter_repo)
        _check_revision("adapter_revision", self.adapter_revision)
        if self.merged_repo is not None:
            _check_repo_id("merged_repo", self.merged_repo)
        if len(self.checkpoints) > MAX_CHECKPOINTS:
            raise ValueError(f"{self.name}: more than {MAX_CHECKPOINTS} checkpoints")
        for value in self.checkpoints:
            if not isinstance(value, str) or (value != FINAL and not CHECKPOINT_RE.match(value)):
                raise ValueError(
                    f'{self.name}: checkpoint {repr(value)[:80]} is not checkpoints/global_step_N or "" (final)'
                )

    @classmethod
    def from_dict(cls, data: object) -> RunConfig:
        if not isinstance(data, dict):
            raise ValueError(f"each of {CONFIG_NAME}'s runs must be a JSON object")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"a run in {CONFIG_NAME} has unknown keys {unknown}")
        checkpoints = data.get("checkpoints") or ()
        if not isinstance(checkpoints, list | tuple):
            raise ValueError(f"a run's checkpoints must be a list, got {type(checkpoints).__name__}")
        try:
            return cls(**{**data, "checkpoints": tuple(checkpoints)})
        except TypeError as e:
            raise ValueError(f"invalid run in {CONFIG_NAME}: {e}") from e


@dataclass(frozen=True)
class Example:
    """An example problem, with its reference answer when known."""

    prompt: str
    answer: str | None = None


@dataclass(frozen=True)
class AppConfig:
    """Everything the app reads from `space_config.json` (see `hubkit.space.SpaceConfig`, which writes it).

    Args:
        title: shown at the top of the page.
        base_model: the base model's repo id; base_revision: its revision (None: main).
        runs: the runs compared with the base (`RunConfig`), at least one, their names unique; the first is
            the one the page opens with, and with chat_template "adapter" the one whose tokenizer is used.
        system_prompt: the run's system prompt, or None.
        chat_template: one of `CHAT_TEMPLATES`.
        dtype: the weights' dtype, one of `DTYPES` ("auto": the base model's own, where the hardware can).
        max_new_tokens: the default answer length on a GPU (the run's completion length).
        cpu_max_new_tokens: the default answer length on a CPU (at most max_new_tokens): there a 4B
            model took 12-22 s for a side-by-side answer of 8 tokens on 2 cores (bench/space.py --memory).
        temperature, top_p: generation defaults (temperature 0 is greedy).
        max_new_tokens_limit: the largest max_new_tokens a request may ask for.
        max_prompt_chars, max_prompt_tokens: the largest prompt, as typed and after the chat template.
        max_loaded_adapters: adapters kept beside the base model on a GPU (least recently used ones
            are unloaded).
        cpu_max_loaded_adapters: the same on a CPU, where memory is short (a free CPU Space has 16 GB
            and a 4B base takes 8 of them): 1 loads one adapter at a time.
        queue_size: requests waiting in the queue before new ones are refused.
        gpu_overhead_seconds, gpu_seconds_per_token, gpu_max_seconds: the ZeroGPU time asked for one
            call: overhead + max_new_tokens × rows × seconds per token, at most gpu_max_seconds.
        examples: example problems.
    """

    title: str
    base_model: str
    runs: tuple[RunConfig, ...]
    base_revision: str | None = None
    system_prompt: str | None = None
    chat_template: str = "adapter"
    dtype: str = "auto"
    max_new_tokens: int = 1024
    cpu_max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens_limit: int = 4096
    max_prompt_chars: int = 4000
    max_prompt_tokens: int = 1024
    max_loaded_adapters: int = 12
    cpu_max_loaded_adapters: int = 1
    queue_size: int = 32
    gpu_overhead_seconds: float = 10.0
    gpu_seconds_per_token: float = 0.02
    gpu_max_seconds: int = 120
    examples: tuple[Example, ...] = ()
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.schema_version != SCHEMA_VERSION:  # schema 1 was read as this one (`from_dict`)
            raise ValueError(
                f"{CONFIG_NAME} has schema {self.schema_version!r}; this app reads 1 and {SCHEMA_VERSION}"
            )
        _check_repo_id("base_model", self.base_model, owner=False)
        _check_revision("base_revision", self.base_revision)
        if not 1 <= len(self.runs) <= MAX_RUNS:
            raise ValueError(f"{CONFIG_NAME} must name 1 to {MAX_RUNS} runs, got {len(self.runs)}")
        if len({run.name for run in self.runs}) != len(self.runs):
            raise ValueError(f"{CONFIG_NAME} names two runs alike: each run's name must be its own")
        if self.chat_template not in CHAT_TEMPLATES:
            raise ValueError(f"chat_template must be one of {CHAT_TEMPLATES}, got {self.chat_template!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        for name in (
            "max_new_tokens_limit",
            "cpu_max_new_tokens",
            "max_prompt_chars",
            "max_prompt_tokens",
            "max_loaded_adapters",
            "cpu_max_loaded_adapters",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.queue_size < 1:
            raise ValueError(f"queue_size must be at least 1, got {self.queue_size}")
        if not 1 <= self.max_new_tokens <= self.max_new_tokens_limit:
            raise ValueError(
                f"max_new_tokens must be between 1 and max_new_tokens_limit ({self.max_new_tokens_limit}), "
                f"got {self.max_new_tokens}"
            )
        if self.gpu_seconds_per_token <= 0.0 or not 0.0 <= self.gpu_overhead_seconds < self.gpu_max_seconds:
            raise ValueError(
                "need gpu_seconds_per_token > 0 and 0 <= gpu_overhead_seconds < gpu_max_seconds, got "
                f"{self.gpu_seconds_per_token}, {self.gpu_overhead_seconds}, {self.gpu_max_seconds}"
            )
        if not 0.0 <= self.temperature <= 2.0 or not 0.0 < self.top_p <= 1.0:
            raise ValueError(
                f"need 0 <= temperature <= 2 and 0 < top_p <= 1, got {self.temperature}, {self.top_p}"
            )

    def run(self, name: str | None) -> RunConfig | None:
        """The run named `name` ("" or None: the first), None when there is no such run."""
        if not name:
            return self.runs[0]
        return next((run for run in self.runs if run.name == name), None)

    def gpu_seconds(self, rows: int, max_new_tokens: int) -> int:
        """The ZeroGPU time to ask for one `generate` of `rows` rows: overhead + max_new_tokens × rows ×
        seconds per token, in whole seconds, at most `gpu_max_seconds` (what a visitor may ask for)."""
        seconds = self.gpu_overhead_seconds + self.gpu_seconds_per_token * max_new_tokens * rows
        return min(self.gpu_max_seconds, math.ceil(seconds))

    def rows_per_gpu_call(self, max_new_tokens: int) -> int:
        """The most rows one `generate` can answer within `gpu_max_seconds` (at least 1)."""
        budget = self.gpu_max_seconds - self.gpu_overhead_seconds
        return max(1, math.floor(budget / (self.gpu_seconds_per_token * max_new_tokens)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AppConfig:
        """Parse the JSON object of `space_config.json`.

        Raises:
            ValueError: unknown keys, missing keys or values out of range.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{CONFIG_NAME} must hold a JSON object")
        values = dict(data)
        known = {f.name for f in fields(cls)}
        if values.get("schema_version") == 1:  # one run, its repo at the top (module docstring)
            known = (known - {"runs"}) | set(_SCHEMA_1_RUN_KEYS)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{CONFIG_NAME} has unknown keys {unknown}")
        if values.get("schema_version") == 1:
            run = {key: values.pop(key) for key in _SCHEMA_1_RUN_KEYS if key in values}
            values["runs"] = [{"name": values.get("title") or "run", **run}]
            values["schema_version"] = SCHEMA_VERSION
        runs = values.get("runs")
        if not isinstance(runs, list | tuple):
            raise ValueError(f"{CONFIG_NAME} must list its runs, each with its adapter_repo")
        examples = values.get("examples") or ()
        if not isinstance(examples, list | tuple) or not all(isinstance(e, dict) for e in examples):
            raise ValueError(f"{CONFIG_NAME}'s examples must be a list of objects")
        try:
            values["runs"] = tuple(RunConfig.from_dict(run) for run in runs[: MAX_RUNS + 1])
            values["examples"] = tuple(Example(**example) for example in examples)
            return cls(**values)
        except TypeError as e:
            raise ValueError(f"invalid {CONFIG_NAME}: {e}") from e

    def to_json(self) -> str:
        """The text of `space_config.json`."""
        return json.dumps(asdict(self), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def load(cls, path: Path) -> AppConfig:
        """Read `space_config.json`.

        Raises:
            ValueError: the file is not valid JSON or not a valid config.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
        return cls.from_dict(data)
