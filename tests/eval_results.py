"""Evaluation results built by hand for the tests that read them (cards, the Space, results' own tests):
one factory, with defaults for what a test does not care about (holds no tests)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hubkit.runs.eval_results import (
    Contamination,
    EvalSummary,
    GenerationInfo,
    MetricInfo,
    ModelResult,
    ProblemsInfo,
    Sample,
    save_eval,
)

METRIC = MetricInfo("gsm8k_correctness", "the last number of the <answer> block equals the reference")
PROBLEMS = ProblemsInfo(
    source="openai/gsm8k",
    split="test",
    revision="main",
    n=0,
    sha256="ab" * 32,
    contamination=Contamination(checked=True, overlap=0, train_problems=7473),
)
GENERATION = GenerationInfo(
    backend="transformers",
    max_new_tokens=12,
    temperature=0.0,
    top_p=1.0,
    do_sample=False,
    seed=0,
    batch_size=8,
    chat_template="{{ messages }}",
    system_prompt=None,
)


def summary_of_models(
    run_id: str,
    models: Sequence[ModelResult],
    *,
    metric: MetricInfo = METRIC,
    problems: dict[str, Any] | None = None,
    generation: dict[str, Any] | None = None,
    created_at: str = "2026-03-01T12:00:00Z",
) -> EvalSummary:
    """A summary of these models' results (problem count: the first model's), the rest defaults or changes.

    Args:
        run_id: the run evaluated.
        models: one result per model, the base (step None) first.
        metric: what was measured.
        problems: changes to `PROBLEMS`.
        generation: changes to `GENERATION`.
        created_at: the time it was made.
    """
    return EvalSummary(
        run_id=run_id,
        created_at=created_at,
        metric=metric,
        problems=replace(PROBLEMS, **{"n": models[0].n if models else 0, **(problems or {})}),
        generation=replace(GENERATION, **(generation or {})),
        models=tuple(models),
    )


def eval_summary(run_id: str, samples: Sequence[Sample], **changes: Any) -> EvalSummary:
    """The summary of `samples`: one model per step they hold (the base, None, first); `changes` as for
    `summary_of_models`."""
    steps = sorted({s.step for s in samples}, key=lambda step: -1 if step is None else step)
    models = [ModelResult.from_samples(step, [s for s in samples if s.step == step]) for step in steps]
    return summary_of_models(run_id, models, **changes)


def write_eval(run_dir: Path, samples: Sequence[Sample], **summary: Any) -> EvalSummary:
    """`eval_summary` of `samples`, saved in `run_dir/eval/` as `hubkit eval` saves it."""
    written = eval_summary(
        run_dir.name if "run_id" not in summary else summary.pop("run_id"), samples, **summary
    )
    save_eval(run_dir, written, samples)
    return written
