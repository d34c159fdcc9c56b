"""The order of an evaluation: `plan_eval` (every check, nothing heavy) → `execute_eval` (generate, score).

plan = plan_eval(run, EvalRequest(steps=(20, 40), problems="test.jsonl"))   # refuses contamination
results = execute_eval(plan, progress=bar.advance)
save_eval(run.run_dir, results.summary, results.samples)

A published release is evaluated the same way, read back as a run (`hubkit.evaluate.release`): the same
metric, problems, prompts, answer length and contamination check, from what the release publishes.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from hubkit.adapters.base_check import BaseConfig, check_against_base
from hubkit.errors import EvalError
from hubkit.evaluate import backend_transformers, backend_vllm
from hubkit.evaluate.chat import completion_from_ids, load_tokenizer, render_prompts, stop_token_ids
from hubkit.evaluate.generation import DEFAULT_DTYPE, Dtype, GenerationJob, GenerationSettings, Progress
from hubkit.evaluate.length import AnswerLength, answer_length
from hubkit.evaluate.metric import Metric, metric_for
from hubkit.evaluate.models import adapter_dirs, tokenizer_dir
from hubkit.evaluate.problems import (
    ContaminationReport,
    ProblemSet,
    check_contamination,
    load_hub_problems,
    load_local_problems,
    problem_source,
    read_train_problem_hashes,
)
from hubkit.evaluate.results import (
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
from hubkit.runs import Checkpoint, Run, select_checkpoints

DEFAULT_PROBLEMS = 200


@dataclass(frozen=True)
class EvalRequest:
    """What to evaluate and how (the options of `hubkit eval`).

    Args:
        steps: checkpoints to evaluate; default all complete ones.
        every: only steps that are multiples of this.
        problems: a local problem file or a Hub dataset id (``ID`` or ``ID:CONFIG``); default the metric's
            held-out set (GSM8K's test split for GSM8K runs).
        split: the dataset split (default ``test``); not used for a file.
        revision: the dataset revision.
        n: evaluate the first `n` problems.
        max_new_tokens: the answer token limit; default the length the run trained with
            (`hubkit.evaluate.length.answer_length`).
        temperature, top_p, seed, batch_size: see `GenerationSettings`.
        backend: ``transformers`` or ``vllm``.
        dtype: the dtype the base model is loaded in (`hubkit.evaluate.generation.DTYPES`).
        metric: a metric name overriding the run's reward spec (required when the run records none).
        include_base: evaluate the base model too.
    """

    steps: tuple[int, ...] | None = None
    every: int | None = None
    problems: str | None = None
    split: str | None = None
    revision: str | None = None
    n: int = DEFAULT_PROBLEMS
    max_new_tokens: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    batch_size: int = 8
    backend: Literal["transformers", "vllm"] = "transformers"
    dtype: Dtype = DEFAULT_DTYPE
    metric: str | None = None
    include_base: bool = True


@dataclass(frozen=True)
class EvalPlan:
    """A checked evaluation, ready to run: the problems are held out (or the run records no hashes).

    Args:
        run: the run, or a release read back as one.
        published: True for a release: its adapters are published ones, in PEFT form as they are.
        length: the answer token limit and where it came from (`settings.max_new_tokens` is its value).
    """

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

    Args:
        run: the run (or a release read back as one: `hubkit.evaluate.release.open_release`).
        request: what to evaluate.
        endpoint: the Hub for a problem dataset; default the client's.
        token: for a private dataset; default the client's.
        published: `run` is a release: its checkpoints' adapters are used as published.

    Returns:
        The plan.

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
    """Generate every model's answers and score them.

    Args:
        plan: from `plan_eval`.
        endpoint: the Hub the base model is fetched from; default the client's.
        token: for a private or gated base model.
        progress: called with the number of answers finished, out of problems × models.
        vllm_python: the vLLM environment's Python (vllm backend; default ``$HUBKIT_VLLM_PYTHON``).
        device: the transformers backend's device; default CUDA when available.

    Returns:
        The summary and every sample (not yet saved: see `hubkit.evaluate.results.save_eval`).

    Raises:
        MergeError: the base model cannot be fetched.
        AdapterError, CheckpointError: a checkpoint has no usable adapter.
        EvalError: the tokenizer has no chat template, or the vLLM worker failed.
    """
    from hubkit.merge.base_files import fetch_base_snapshot

    run = plan.run
    base_dir = fetch_base_snapshot(
        run.manifest.base_model, run.manifest.base_model_revision, endpoint=endpoint, token=token
    )
    chat_template_dir = tokenizer_dir(run, base_dir)
    tokenizer = load_tokenizer(chat_template_dir)
    system_prompt = run.manifest.system_prompt
    prompts = render_prompts(chat_template_dir, [p.question for p in plan.problems.problems], system_prompt)
    stop_ids = stop_token_ids(base_dir, tokenizer)
    with tempfile.TemporaryDirectory(prefix="hubkit-eval-") as staging:
        adapters = adapter_dirs(run, plan.checkpoints, Path(staging), published=plan.published)
        # Before PEFT builds anything from them: a release's or a run's configs are untrusted.
        base_config = BaseConfig.of(run.manifest.base_model, base_dir / "config.json")
        for name, adapter_dir in adapters.items():
            check_against_base(adapter_dir, base_config, label=name)
        job = GenerationJob(
            base_dir=base_dir,
            models=plan.models,
            adapters=tuple(adapters.items()),
            prompts=prompts,
            settings=plan.settings,
            stop_ids=stop_ids,
            pad_id=int(tokenizer.pad_token_id),
            dtype=plan.dtype,
        )
        if plan.backend == "vllm":
            generated = backend_vllm.run(job, progress, python=vllm_python)
        else:
            generated = backend_transformers.run(job, progress, device=device)
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
