"""What an evaluation stores: ``eval/results.json`` (the summary) and ``eval/samples.jsonl`` (every answer).

The files are the contract between `hubkit eval` and what reads its results (the push, the cards, the
Space's example prompts). ``results.json``::

    {"schema_version": 1, "run_id": "...", "created_at": "2026-03-01T12:00:00Z",
     "metric": {"name": "gsm8k_correctness", "description": "..."},
     "problems": {"source": "openai/gsm8k", "split": "test", "revision": "...", "n": 200, "sha256": "...",
                  "contamination": {"checked": true, "overlap": 0, "train_problems": 7473},
                  "config": "main", "whole": false},
     "generation": {"backend": "transformers", "max_new_tokens": 768, "temperature": 0.0, "top_p": 1.0,
                    "do_sample": false, "seed": 0, "batch_size": 16, "chat_template": "...",
                    "system_prompt": "...", "dtype": "bfloat16", "chat_template_from": "run"},
     "models": [{"name": "base", "step": null, "n": 200, "correct": 141, "accuracy": 0.705,
                 "ci95": [0.638, 0.764], "tokens_mean": 283.1, "tokens_median": 270.0, "tokens_max": 768,
                 "truncated_share": 0.02}, {"name": "global_step_20", "step": 20, ...}]}

``samples.jsonl`` holds one line per (model, problem)::

    {"model": "global_step_20", "step": 20, "problem_index": 0, "problem": "...", "reference": "72",
     "answer": "...", "correct": true, "tokens": 215, "truncated": false}

`save_eval` writes the samples first and the summary last (each atomically), so a ``results.json`` on disk
always belongs to a complete ``samples.jsonl``. This module needs only the standard library.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from hubkit.errors import EvalError, FileFormatError
from hubkit.formats.json_fields import checked_fields, refuse_newer_schema
from hubkit.formats.json_file import decode_text, parse_json, read_bounded
from hubkit.runs.state import write_atomically

# 2 added generation.dtype and generation.chat_template_from, 3 problems.config and problems.whole. Fields
# are only ever added: older files still load (the new fields read as not recorded: None, False).
SCHEMA_VERSION = 3
EVAL_DIR = "eval"
RESULTS_NAME = "results.json"
SAMPLES_NAME = "samples.jsonl"
BASE_NAME = "base"
MetricName = Literal["gsm8k_correctness", "math_correctness"]
Backend = Literal["transformers", "vllm"]
METRICS: tuple[str, ...] = get_args(MetricName)
BACKENDS: tuple[str, ...] = get_args(Backend)
# The 97.5th percentile of the standard normal distribution (a two-sided 95 % interval).
_Z95 = 1.959963984540054


def model_name(step: int | None) -> str:
    """How results name a model: ``base`` for the base model, ``global_step_N`` for a checkpoint."""
    return BASE_NAME if step is None else f"global_step_{step}"


def wilson_interval(correct: int, n: int) -> tuple[float, float]:
    """The Wilson score 95 % interval, (low, high), of a proportion `correct` / `n`.

    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or `n` correct.

    Raises:
        ValueError: `n` < 1 or `correct` outside [0, n].
    """
    if n < 1 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n and n >= 1, got correct={correct}, n={n}")
    p = correct / n
    z2 = _Z95 * _Z95
    denominator = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denominator
    half = _Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, center - half), min(1.0, center + half)


@dataclass(frozen=True)
class Sample:
    """One model's answer to one problem, with its verdict."""

    model: str
    step: int | None
    problem_index: int
    problem: str
    reference: str
    answer: str
    correct: bool
    tokens: int
    truncated: bool


@dataclass(frozen=True)
class MetricInfo:
    """The metric: a reward component of the run's own spec, used as a 0/1 verdict."""

    name: MetricName
    description: str

    def __post_init__(self) -> None:
        if self.name not in METRICS:
            raise EvalError(f"metric must be one of {METRICS}, got {self.name!r}")


@dataclass(frozen=True)
class Contamination:
    """Whether the problems were checked against the run's training problems, and how many overlap.

    Attributes:
        checked: False when the run records no training-problem hashes.
        overlap: evaluation problems whose normalized text is a training problem's (0 when not checked).
        train_problems: how many training problems the run records, or None when not checked.
    """

    checked: bool
    overlap: int
    train_problems: int | None


@dataclass(frozen=True)
class ProblemsInfo:
    """The problem set: where it came from (a Hub dataset id or a file name, never a local path), and
    whether it is the whole of it (`ProblemSet.whole`: not recorded before schema 3, then taken as not)."""

    source: str
    split: str | None
    revision: str | None
    n: int
    sha256: str
    contamination: Contamination
    config: str | None = None
    whole: bool = False


@dataclass(frozen=True)
class GenerationInfo:
    """How the answers were generated.

    Attributes:
        system_prompt: the run's system prompt, or None when the run records none (then there was none).
        dtype: the dtype the base model was loaded in (None: not recorded, schema 1).
        chat_template_from: ``run`` when the run saved its tokenizer and chat template, ``base`` when the
            base model's were used (None: not recorded, schema 1).
    """

    backend: Backend
    max_new_tokens: int
    temperature: float
    top_p: float
    do_sample: bool
    seed: int
    batch_size: int
    chat_template: str
    system_prompt: str | None
    dtype: str | None = None
    chat_template_from: Literal["run", "base"] | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise EvalError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.chat_template_from not in (None, "run", "base"):
            raise EvalError(f"chat_template_from must be run or base, got {self.chat_template_from!r}")

    def prompt_description(self) -> str:
        """How the prompts were built, as a card or a message says it: whose chat template, which system
        prompt (never "the run's system prompt" for a run that had none)."""
        template = f"the {'base model' if self.chat_template_from == 'base' else 'run'}'s chat template"
        if self.system_prompt:
            return f"{template} and system prompt"
        return f"{template}, no system prompt (the run records none)"


@dataclass(frozen=True)
class ModelResult:
    """One model's scores: accuracy with its Wilson 95 % interval, and its answers' lengths in tokens."""

    name: str
    step: int | None
    n: int
    correct: int
    accuracy: float
    ci95: tuple[float, float]
    tokens_mean: float
    tokens_median: float
    tokens_max: int
    truncated_share: float

    @classmethod
    def from_samples(cls, step: int | None, samples: Sequence[Sample]) -> ModelResult:
        """Summarize one model's samples (`step`: the checkpoint's, None for the base model).

        Raises:
            ValueError: no samples, or a sample of another model.
        """
        name = model_name(step)
        if not samples:
            raise ValueError(f"no samples for {name}")
        if any(s.model != name or s.step != step for s in samples):
            raise ValueError(f"samples of other models than {name} given")
        n = len(samples)
        correct = sum(s.correct for s in samples)
        tokens = [s.tokens for s in samples]
        return cls(
            name=name,
            step=step,
            n=n,
            correct=correct,
            accuracy=correct / n,
            ci95=wilson_interval(correct, n),
            tokens_mean=statistics.fmean(tokens),
            tokens_median=float(statistics.median(tokens)),
            tokens_max=max(tokens),
            truncated_share=sum(s.truncated for s in samples) / n,
        )


@dataclass(frozen=True)
class EvalSummary:
    """The content of ``results.json``."""

    run_id: str
    created_at: str
    metric: MetricInfo
    problems: ProblemsInfo
    generation: GenerationInfo
    models: tuple[ModelResult, ...]
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        refuse_newer_schema(self.schema_version, RESULTS_NAME, SCHEMA_VERSION, EvalError)
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise EvalError(f"{RESULTS_NAME} names a model twice: {names}")

    @property
    def base(self) -> ModelResult | None:
        """The base model's result, if it was evaluated."""
        return next((m for m in self.models if m.step is None), None)

    @property
    def checkpoints(self) -> tuple[ModelResult, ...]:
        """The checkpoints' results, by step."""
        return tuple(sorted((m for m in self.models if m.step is not None), key=lambda m: m.step or 0))

    def by_step(self, step: int | None) -> ModelResult:
        """The result of the checkpoint at `step` (None: the base model).

        Raises:
            KeyError: that model was not evaluated.
        """
        found = next((result for result in self.models if result.step == step), None)
        if found is None:
            raise KeyError(model_name(step))
        return found

    def best(self) -> ModelResult | None:
        """The checkpoint to use: the highest accuracy; on a tie, fewer tokens on average, then the earlier step.
        None when no checkpoint was evaluated or none answered a problem right (a checkpoint at 0 % is no
        recommendation; the base never counts).
        """
        scored = [m for m in self.checkpoints if m.correct > 0]
        return min(scored, key=lambda m: (-m.accuracy, m.tokens_mean, m.step), default=None)


@dataclass(frozen=True)
class EvalResults:
    """A run's evaluation as read back: the summary and every sample."""

    summary: EvalSummary
    samples: tuple[Sample, ...]

    def best(self) -> ModelResult | None:
        """See `EvalSummary.best`."""
        return self.summary.best()

    def by_step(self, step: int | None) -> ModelResult:
        """See `EvalSummary.by_step`."""
        return self.summary.by_step(step)

    def samples_of(self, step: int | None) -> tuple[Sample, ...]:
        """One model's samples (None: the base model), in problem order."""
        return tuple(sorted((s for s in self.samples if s.step == step), key=lambda s: s.problem_index))

    def before_after(self, step: int, limit: int | None = None) -> list[tuple[Sample, Sample]]:
        """At most `limit` (base answer, answer of the checkpoint at `step`) pairs for the same problems, the
        telling ones first; none when either was not evaluated.

        Order: problems the checkpoint fixed (base wrong, checkpoint right); then problems both got
        right, the most tokens saved first; then the rest, in problem order.
        """
        base = {s.problem_index: s for s in self.samples_of(None)}
        pairs = [(base[s.problem_index], s) for s in self.samples_of(step) if s.problem_index in base]

        def order(pair: tuple[Sample, Sample]) -> tuple[int, int, int]:
            before, after = pair
            rank = 2 if not after.correct else 1 if before.correct else 0
            saved = before.tokens - after.tokens if rank == 1 else 0
            return rank, -saved, after.problem_index

        return sorted(pairs, key=order)[:limit]


# --- files ----------------------------------------------------------------------------------------


def summary_to_dict(summary: EvalSummary) -> dict[str, Any]:
    """`results.json`'s JSON form of `summary` (the key order of the documented schema)."""
    data = asdict(summary)
    ordered = {"schema_version": data.pop("schema_version"), **data}
    for model in ordered["models"]:
        model["ci95"] = list(model["ci95"])
    return ordered


def summary_from_dict(data: dict[str, Any]) -> EvalSummary:
    """Rebuild a summary from `summary_to_dict`'s form.

    Raises:
        EvalError: the data is not a valid summary, or has a newer schema.
    """
    if not isinstance(data, dict):
        raise EvalError(f"{RESULTS_NAME} must hold a JSON object")
    try:
        problems = checked_fields(ProblemsInfo, data.get("problems"), "problems")
        problems["contamination"] = Contamination(
            **checked_fields(Contamination, problems.get("contamination"), "problems.contamination")
        )
        if not isinstance(data.get("models"), list):
            raise FileFormatError("models must be a list")
        models = tuple(ModelResult(**checked_fields(ModelResult, m, "models")) for m in data["models"])
        top = checked_fields(EvalSummary, data, RESULTS_NAME)
        return EvalSummary(
            run_id=top["run_id"],
            created_at=top["created_at"],
            metric=MetricInfo(**checked_fields(MetricInfo, data.get("metric"), "metric")),
            problems=ProblemsInfo(**problems),
            generation=GenerationInfo(**checked_fields(GenerationInfo, data.get("generation"), "generation")),
            models=models,
            schema_version=top.get("schema_version", SCHEMA_VERSION),
        )
    except FileFormatError as e:
        raise EvalError(f"invalid {RESULTS_NAME}: {e}: run `hubkit eval` again") from e
    except (KeyError, TypeError, ValueError) as e:
        raise EvalError(f"invalid {RESULTS_NAME} ({e}): run `hubkit eval` again") from e


def eval_file_bytes(summary: EvalSummary, samples: Iterable[Sample]) -> dict[str, bytes]:
    """The two files' bytes, by their path in a run (``eval/results.json``, ``eval/samples.jsonl``): what
    `save_eval` writes and what a push publishes."""
    lines = (json.dumps(asdict(s), ensure_ascii=False, allow_nan=False) + "\n" for s in samples)
    text = json.dumps(summary_to_dict(summary), indent=2, ensure_ascii=False, allow_nan=False)
    return {
        f"{EVAL_DIR}/{SAMPLES_NAME}": "".join(lines).encode(),
        f"{EVAL_DIR}/{RESULTS_NAME}": (text + "\n").encode(),
    }


def save_eval(run_dir: str | os.PathLike[str], summary: EvalSummary, samples: Iterable[Sample]) -> Path:
    """Write ``run_dir/eval/samples.jsonl`` and then ``run_dir/eval/results.json`` (`run_dir`: the run
    directory, or any folder that is to hold an ``eval/`` folder); return the ``eval/`` directory."""
    eval_dir = Path(run_dir) / EVAL_DIR
    eval_dir.mkdir(parents=True, exist_ok=True)
    files = eval_file_bytes(summary, samples)
    write_atomically(eval_dir / SAMPLES_NAME, files[f"{EVAL_DIR}/{SAMPLES_NAME}"])
    write_atomically(eval_dir / RESULTS_NAME, files[f"{EVAL_DIR}/{RESULTS_NAME}"])
    return eval_dir


# Bounds on what a run's eval/ may hold (200 problems × 11 models of 1,000-token answers is ~20 MB).
_MAX_RESULTS_BYTES = 16 * 1024 * 1024
_MAX_SAMPLES_BYTES = 256 * 1024 * 1024


def _read_text(path: Path, max_bytes: int) -> str:
    """A file of the run's eval/, read only when it is within its bound.

    Raises:
        FileNotFoundError: it is not there.
        EvalError: it is too large or not UTF-8.
    """
    name = f"{EVAL_DIR}/{path.name}"
    try:
        return decode_text(read_bounded(path, max_bytes, name), name)
    except FileFormatError as e:
        if isinstance(e.__cause__, FileNotFoundError) or not path.exists():
            raise FileNotFoundError(path) from e
        raise EvalError(f"{e}: run `hubkit eval` again") from e


def load_eval(run_dir: str | os.PathLike[str]) -> EvalResults | None:
    """Read a run's evaluation: None when the run has not been evaluated (no ``eval/results.json``).

    Raises:
        EvalError: the files are corrupt, incomplete or from a newer hubkit.
    """
    eval_dir = Path(run_dir) / EVAL_DIR
    try:
        text = _read_text(eval_dir / RESULTS_NAME, _MAX_RESULTS_BYTES)
    except FileNotFoundError:
        return None
    try:
        summary = summary_from_dict(parse_json(text.encode(), f"{EVAL_DIR}/{RESULTS_NAME}", max_depth=6))
    except FileFormatError as e:
        raise EvalError(f"{e}: run `hubkit eval` again") from e
    try:
        lines = _read_text(eval_dir / SAMPLES_NAME, _MAX_SAMPLES_BYTES).splitlines()
    except FileNotFoundError as e:
        raise EvalError(f"{EVAL_DIR}/{SAMPLES_NAME} is missing: run `hubkit eval` again") from e
    samples = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        label = f"{EVAL_DIR}/{SAMPLES_NAME} line {number}"
        try:
            value = parse_json(line.encode(), label, max_depth=2)
            samples.append(Sample(**checked_fields(Sample, value, label)))
        except (FileFormatError, TypeError) as e:
            raise EvalError(f"{label} is not a sample ({e}): run `hubkit eval` again") from e
    return EvalResults(summary=summary, samples=tuple(samples))
