"""The order of an evaluation: `plan_eval` (every check, nothing heavy) → `execute_eval` (generate, score).

plan = plan_eval(run, EvalRequest(steps=(20, 40), problems="test.jsonl"))   # refuses contamination
results = execute_eval(plan, progress=bar.advance)
save_eval(run.run_dir, results.summary, results.samples)

A published release is evaluated the same way, read back as a run (`hubkit.evaluate.release`): the same
metric, problems, prompts, answer length and contamination check, from what the release publishes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from hubkit.adapters.base_check import BaseConfig, check_against_base
from hubkit.errors import EvalError
from hubkit.evaluate import backend_transformers, backend_vllm
from hubkit.evaluate.chat import completion_from_ids, load_tokenizer, render_prompts, stop_token_ids
from hubkit.evaluate.generation import DEFAULT_DTYPE, Dtype, GenerationJob, GenerationSettings, Progress
from hubkit.evaluate.metric import Metric, metric_for
from hubkit.evaluate.models import adapter_dirs, tokenizer_dir
from hubkit.evaluate.problems import (
    ContaminationReport,
    ProblemSet,
    check_contamination,
    load_hub_problems,
    load_local_problems,
    problem_source,
)
from hubkit.runs import Checkpoint, Run, select_checkpoints
from hubkit.runs.answer_length import AnswerLength, answer_length
from hubkit.runs.eval_results import (
    BASE_NAME,
    Contamination,
    EvalResults,
    EvalSummary,
    GenerationInfo,
    ModelResult,
    ProblemsInfo,
    Sample,
    model_name,
)
from hubkit.runs.locate import base_differences
from hubkit.runs.problem_hashes import read_train_problem_hashes

DEFAULT_PROBLEMS = 200


def _option(default: Any, help: str, **metadata: Any) -> Any:
    """A field that is an option of `hubkit eval` (`hubkit.cli.options` reads its metadata)."""
    return field(default=default, metadata={"help": help, **metadata})


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate and how: the options of `hubkit eval` (`hubkit.cli.options`), each field's "help".
    `problems` defaults to the metric's held-out set, `max_new_tokens` to the length the run trained with
    (`hubkit.runs.answer_length.answer_length`); the sampling fields are `GenerationSettings`'.
    """

    steps: tuple[int, ...] | None = _option(
        None, "Evaluate only these steps.", metavar="N,M,...", range={"min": 0}
    )
    every: int | None = _option(None, "Evaluate only steps that are multiples of N.", range={"min": 1})
    problems: str | None = _option(
        None,
        "A .jsonl/.json/.parquet file or a Hub dataset (ID or ID:CONFIG).  "
        "[default: GSM8K's test split for GSM8K runs]",
        metavar="FILE|DATASET",
    )
    split: str | None = _option(None, "The dataset's split.  [default: test]")
    revision: str | None = _option(None, "The dataset's revision.  [default: main]")
    n: int = _option(DEFAULT_PROBLEMS, "Problems (the first N).", range={"min": 1})
    max_new_tokens: int | None = _option(
        None,
        "Answer token limit.  [default: the run's max_completion_length (TRL) or max_response_length "
        "(verl); when it records neither, hubkit's default, said as such]",
        range={"min": 1},
    )
    backend: Literal["transformers", "vllm"] = _option("transformers", "What generates the answers.")
    dtype: Dtype = _option(  # noqa: RUF009 (a Literal: ruff cannot tell across modules)
        DEFAULT_DTYPE, "The dtype the base model is loaded in (auto: the one its config names)."
    )
    seed: int = _option(0, "Random seed (sampling).")
    temperature: float = _option(0.0, "0 decodes greedily.", range={"min": 0})
    top_p: float = _option(
        1.0,
        "Sample only from the likeliest tokens, up to this total probability.",
        range={"min": 0, "max": 1, "min_open": True},
    )
    batch_size: int = _option(
        8, "Problems per generation call (each answered by every model at once).", range={"min": 1}
    )
    metric: str | None = _option(
        None,
        "Override the run's reward spec (needed when the run records none).",
        choices=("gsm8k_correctness", "math_correctness"),
    )
    include_base: bool = _option(True, "Evaluate the base model too.", flag="--base")


@dataclass(frozen=True)
class EvalPlan:
    """A checked evaluation, ready to run: the problems are held out (or the run records no hashes).
    `published`: `run` is a release read back, its adapters in PEFT form as published; `length`: the answer
    token limit and where it came from (`settings.max_new_tokens` is its value)."""

    run: Run
    metric: Metric
    problems: ProblemSet
    contamination: ContaminationReport
    checkpoints: tuple[Checkpoint, ...]
    include_base: bool
    settings: GenerationSettings
    backend: Literal["transformers", "vllm"]
    dtype: Dtype
    length: AnswerLength
    published: bool = False

    @property
    def models(self) -> tuple[str, ...]:
        """The model names, in evaluation order: the base first, then the checkpoints by step."""
        return ((BASE_NAME,) if self.include_base else ()) + tuple(c.name for c in self.checkpoints)


def _problem_set(metric: Metric, request: EvalRequest, endpoint: str | None, token: str | None) -> ProblemSet:
    if request.n < 1:
        raise EvalError(f"--n must be at least 1, got {request.n}")
    if request.problems is not None:
        source = problem_source(request.problems, request.split)
        if isinstance(source, Path):
            return load_local_problems(source, limit=request.n)
    else:
        default = metric.default_problems
        if default is None:
            raise EvalError(
                f"{metric.name} runs have no default held-out set: pass --problems with a Hub dataset "
                "(e.g. HuggingFaceH4/MATH-500) or a local .jsonl/.json/.parquet file"
            )
        source = default if request.split is None else replace(default, split=request.split)
    return load_hub_problems(
        source, revision=request.revision, endpoint=endpoint, token=token, limit=request.n
    )


def plan_eval(
    run: Run,
    request: EvalRequest,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    published: bool = False,
) -> EvalPlan:
    """Choose the metric, load the problems, check them against the run's training problems, pick models.

    `run` may be a release read back as one (`hubkit.evaluate.release.open_release`, with `published`: its
    adapters are used as published); `endpoint` and `token` are the problem dataset's Hub.

    Raises:
        ContaminationError: problems overlap the run's training problems.
        EvalError: no metric, no problems, bad settings, or nothing to evaluate.
        CheckpointError: a requested step is not a complete checkpoint.
    """
    metric = metric_for(run.manifest.reward, request.metric)
    length = answer_length(run, request.max_new_tokens)
    settings = GenerationSettings(
        max_new_tokens=length.tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        batch_size=request.batch_size,
    )
    checkpoints = select_checkpoints(run, request.steps, request.every)
    if not checkpoints and not request.include_base:
        raise EvalError(f"run {run.manifest.run_id} has no complete checkpoint to evaluate")
    problems = _problem_set(metric, request, endpoint, token)
    report = check_contamination(problems, read_train_problem_hashes(run.run_dir), run_id=run.manifest.run_id)
    return EvalPlan(
        run,
        metric,
        problems,
        report,
        checkpoints,
        request.include_base,
        settings,
        request.backend,
        request.dtype,
        length,
        published,
    )


def execute_eval(
    plan: EvalPlan,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    progress: Progress | None = None,
    vllm_python: str | None = None,
    device: str | None = None,
) -> EvalResults:
    """Generate every model's answers and score them: the summary and every sample, not yet saved
    (`hubkit.runs.eval_results.save_eval`).

    `endpoint` and `token` are the base model's Hub; `progress` is called with the number of answers
    finished, out of problems × models; `vllm_python` is the vLLM environment's Python (default
    ``$HUBKIT_VLLM_PYTHON``); `device` the transformers backend's (default CUDA when available).

    Raises:
        MergeError: the base model cannot be fetched.
        AdapterError, CheckpointError: a checkpoint has no usable adapter.
        EvalError: the tokenizer has no chat template, or the vLLM worker failed.
    """
    options = {"endpoint": endpoint, "token": token, "progress": progress, "vllm_python": vllm_python}
    return execute_evals([plan], **options, device=device)[0]


@dataclass(frozen=True)
class _Prompts:
    """How one run asks its problems: its chat template's folder and tokenizer, the prompts, the stops."""

    template_dir: Path
    tokenizer: Any
    prompts: tuple[tuple[int, ...], ...]
    stop_ids: tuple[int, ...]


def _check_one_pass(first: EvalPlan, plan: EvalPlan) -> None:
    """Refuse to answer with `plan`'s models in `first`'s pass where an answer would differ."""
    same = {
        "problems": (first.problems.sha256, plan.problems.sha256),
        "decoding settings": (first.settings, plan.settings),
        "backend and dtype": ((first.backend, first.dtype), (plan.backend, plan.dtype)),
    }
    differ = base_differences(first.run.manifest, plan.run.manifest)
    differ += [what for what, (a, b) in same.items() if a != b]
    if differ:
        raise EvalError(
            f"runs {first.run.manifest.run_id} and {plan.run.manifest.run_id} differ in {', '.join(differ)}: "
            "one pass answers with one base model, problems and settings; evaluate them one by one"
        )


def execute_evals(
    plans: Sequence[EvalPlan],
    *,
    endpoint: str | None = None,
    token: str | None = None,
    progress: Progress | None = None,
    vllm_python: str | None = None,
    device: str | None = None,
) -> list[EvalResults]:
    """Several runs' evaluations in one pass (a sweep's runs): the base model loaded once and answering
    once, every chosen checkpoint of every run a named adapter of it, answered in the same batches; then
    each run's answers scored into its own complete results (the base's answers in each).

    The runs share the base model and its revision, the problems, the decoding settings, the backend and
    dtype, and the prompts as rendered (chat template, system prompt). Arguments as `execute_eval`.

    Raises:
        EvalError: runs that differ in one of those (named); as `execute_eval` otherwise.
    """
    from hubkit.merge.base_files import fetch_base_snapshot

    first = plans[0]
    for plan in plans[1:]:
        _check_one_pass(first, plan)
    manifest = first.run.manifest
    base_dir = fetch_base_snapshot(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    asked = [_prompts(plan, base_dir) for plan in plans]
    for plan, own in zip(plans[1:], asked[1:], strict=True):
        if (own.prompts, own.stop_ids) != (asked[0].prompts, asked[0].stop_ids):
            raise EvalError(
                f"run {plan.run.manifest.run_id} asks its problems otherwise than {manifest.run_id} (its chat "
                "template, system prompt or stop tokens): evaluate them one by one"
            )
    # Checkpoint names are the runs' own when there is one run; with several, each run's are prefixed.
    prefixes = [""] if len(plans) == 1 else [f"run{i}-" for i in range(len(plans))]
    with tempfile.TemporaryDirectory(prefix="hubkit-eval-") as staging:
        base_config = BaseConfig.of(manifest.base_model, base_dir / "config.json")
        adapters: dict[str, Path] = {}
        for i, plan in enumerate(plans):
            folder = Path(staging) / str(i)
            folder.mkdir()
            for name, adapter_dir in adapter_dirs(
                plan.run, plan.checkpoints, folder, published=plan.published
            ).items():
                # Before PEFT builds anything from them: a release's or a run's configs are untrusted.
                check_against_base(adapter_dir, base_config, label=name)
                adapters[prefixes[i] + name] = adapter_dir
        include_base = any(plan.include_base for plan in plans)
        job = GenerationJob(
            base_dir=base_dir,
            models=((BASE_NAME,) if include_base else ()) + tuple(adapters),
            adapters=tuple(adapters.items()),
            prompts=asked[0].prompts,
            settings=first.settings,
            stop_ids=asked[0].stop_ids,
            pad_id=int(asked[0].tokenizer.pad_token_id),
            dtype=first.dtype,
        )
        if first.backend == "vllm":
            generated = backend_vllm.run(job, progress, python=vllm_python)
        else:
            generated = backend_transformers.run(job, progress, device=device)
    return [
        _scored(
            plan,
            own,
            base_dir,
            {name: generated[name if name == BASE_NAME else prefix + name] for name in plan.models},
        )
        for plan, own, prefix in zip(plans, asked, prefixes, strict=True)
    ]


def _prompts(plan: EvalPlan, base_dir: Path) -> _Prompts:
    template_dir = tokenizer_dir(plan.run, base_dir)
    tokenizer = load_tokenizer(template_dir)
    questions = [p.question for p in plan.problems.problems]
    prompts = render_prompts(template_dir, questions, plan.run.manifest.system_prompt)
    return _Prompts(template_dir, tokenizer, tuple(prompts), tuple(stop_token_ids(base_dir, tokenizer)))


def _scored(plan: EvalPlan, asked: _Prompts, base_dir: Path, generated: dict[str, Any]) -> EvalResults:
    """One run's answers (model name → each problem's generated ids) scored into its results."""
    run, tokenizer, stop_ids = plan.run, asked.tokenizer, asked.stop_ids
    system_prompt, chat_template_dir = run.manifest.system_prompt, asked.template_dir
    steps = {c.name: c.step for c in plan.checkpoints}
    references = [plan.metric.reference(p.answer) for p in plan.problems.problems]
    samples: list[Sample] = []
    results: list[ModelResult] = []
    with plan.metric.scorer() as score:
        for name in plan.models:
            completions = [
                completion_from_ids(
                    ids, tokenizer, stop_ids=stop_ids, max_new_tokens=plan.settings.max_new_tokens
                )
                for ids in generated[name]
            ]
            verdicts = score([c.text for c in completions], references)
            step = steps.get(name)
            own = [
                Sample(
                    model=model_name(step),
                    step=step,
                    problem_index=i,
                    problem=problem.question,
                    reference=reference,
                    answer=completion.text,
                    correct=verdict,
                    tokens=completion.tokens,
                    truncated=completion.truncated,
                )
                for i, (problem, reference, completion, verdict) in enumerate(
                    zip(plan.problems.problems, references, completions, verdicts, strict=True)
                )
            ]
            samples.extend(own)
            results.append(ModelResult.from_samples(step, own))
    problems, report = plan.problems, plan.contamination
    summary = EvalSummary(
        run_id=run.manifest.run_id,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        metric=plan.metric.info,
        problems=ProblemsInfo(
            source=problems.source,
            split=problems.split,
            revision=problems.revision,
            n=len(problems.problems),
            sha256=problems.sha256,
            config=problems.config,
            whole=problems.whole,
            contamination=Contamination(
                checked=report.checked, overlap=len(report.overlapping), train_problems=report.train_problems
            ),
        ),
        generation=GenerationInfo(
            backend=plan.backend,
            **asdict(plan.settings),  # max_new_tokens, temperature, top_p, seed, batch_size
            do_sample=plan.settings.do_sample,
            chat_template=tokenizer.chat_template,
            system_prompt=system_prompt,
            dtype=plan.dtype,
            chat_template_from="base" if chat_template_dir == base_dir else "run",
        ),
        models=tuple(results),
    )
    return EvalResults(summary=summary, samples=tuple(samples))
