"""The Space's configuration: `space_config.json` beside `app.py`, written by `hubkit push`.

This module is the file's one schema: hubkit loads it to write the file (`hubkit.space`), so it imports
nothing but the standard library.

The app needs nothing else to run: which base model and adapter repo to load (and at which revision),
how to build the prompt, the generation defaults and the limits that keep a public Space answering.
Unknown keys are refused, so a config written by a newer hubkit fails loudly instead of half-working.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
CONFIG_NAME = "space_config.json"
# Where the run's chat template comes from: the tokenizer published at the adapter repo's root (the
# run's own), the base model's, or none (the prompt is sent as raw text).
CHAT_TEMPLATES = ("adapter", "base", "none")
# "auto" is the base model's own dtype (its config's; bfloat16 for Qwen3), except where the hardware
# cannot compute in it: float16 on a GPU older than Ampere. The others force one dtype everywhere.
DTYPES = ("auto", "bfloat16", "float16", "float32", "float64")


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
        adapter_repo: the adapter repo (final adapter at the root, `checkpoints/global_step_N/`).
        adapter_revision: the adapter repo's revision (None: main).
        merged_repo: the merged model's repo, linked from the page (never loaded), or None.
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
    adapter_repo: str
    base_revision: str | None = None
    adapter_revision: str | None = None
    merged_repo: str | None = None
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
        if self.schema_version > SCHEMA_VERSION:
            raise ValueError(
                f"{CONFIG_NAME} has schema {self.schema_version}; this app reads {SCHEMA_VERSION}"
            )
        if not self.base_model or not self.adapter_repo:
            raise ValueError(f"{CONFIG_NAME} must name base_model and adapter_repo")
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
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"{CONFIG_NAME} has unknown keys {unknown}")
        values = dict(data)
        values["examples"] = tuple(Example(**example) for example in values.get("examples") or ())
        try:
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
