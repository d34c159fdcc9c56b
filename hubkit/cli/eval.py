"""`hubkit eval`: accuracy and answer length of the base model and each checkpoint on held-out problems."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from hubkit.cli.options import RUN, Target, command, endpoint_option, options_of, quiet_option
from hubkit.cli.output import command_console
from hubkit.visible import visible

if TYPE_CHECKING:
    from hubkit.evaluate.evaluation import EvalPlan, EvalRequest
    from hubkit.release.read import Release
    from hubkit.runs import Run
    from hubkit.runs.eval_results import EvalResults, EvalSummary


def _options() -> list[click.Option]:
    from hubkit.evaluate.evaluation import EvalRequest

    return options_of(EvalRequest)


@command(
    "eval",
    target=(*RUN, "repo_id", "sweep"),
    repo_id="Evaluate a release `hubkit push` published instead of a run directory (downloads what it needs).",
    sweep="Evaluate every run of the sweep NAME under --runs-dir in one pass: the base model loaded and "
    "answering once, each run's chosen checkpoints named adapters of it; each run's results are written "
    "into it.",
    options=_options,
)
@click.option(
    "--push",
    is_flag=True,
    help="With --repo-id: commit the results to the repo's eval/ and update its card.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --repo-id: the folder the results are written to.  [default: ./<repo name>-eval]",
)
@click.option(
    "--vllm-python",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="HUBKIT_VLLM_PYTHON",
    help="The Python of an environment with vLLM (--backend vllm; also HUBKIT_VLLM_PYTHON).",
)
@endpoint_option
@quiet_option
def eval_command(
    target: Target,
    push: bool,
    out: Path | None,
    vllm_python: Path | None,
    endpoint: str,
    quiet: bool,
    **options: Any,
) -> None:
    """Evaluate the base model and the run's checkpoints on held-out problems.

    The metric is the run's own correctness reward (or --metric's), the prompt its chat template and
    system prompt (if it has one), the answer length the one it trained with. Problems that the run
    trained on (by the hashes it records) are refused. Writes eval/results.json and eval/samples.jsonl
    into the run, which `hubkit push` publishes. With --repo-id, a published release is evaluated the
    same way, from what it publishes and the base model; --push commits the results to its eval/ and
    updates its card.

    \b
        $ hubkit eval --run-id RUN                                  # GSM8K runs: 200 GSM8K test problems
        $ hubkit eval --run-id RUN --problems HuggingFaceH4/MATH-500 --every 40
        $ hubkit eval --run-dir runs/RUN --problems heldout.jsonl --steps 20,200
        $ hubkit eval --repo-id me/qwen3-4b-grpo --steps 100,200 --push
    """
    from hubkit.evaluate.evaluation import EvalRequest, plan_eval

    target.check(reads=("repo_id", "sweep"))
    if (push or out) and not target.repo_id:
        raise click.UsageError(
            "--push and --out go with --repo-id; a run directory's results are published by `hubkit push`"
        )
    console = command_console(quiet)
    request = EvalRequest(**options)
    release = None
    if target.sweep:
        plans = [plan_eval(run, request, endpoint=endpoint) for run in _sweep_runs(target)]
    elif target.repo_id:
        release, run = _open_release(target.repo_id, request, endpoint, push)
        plans = [plan_eval(run, request, endpoint=endpoint, published=True)]
    else:
        plans = [plan_eval(target.load(steps=request.steps), request, endpoint=endpoint)]
    eval_parent = (out or Path(f"{target.repo_id.rsplit('/', 1)[-1]}-eval")) if target.repo_id else None
    for plan, results in zip(plans, _evaluate(plans, console, quiet, endpoint, vllm_python), strict=True):
        _show(results, plan.run, eval_parent, console)
    if release is not None and push:
        _push(release, results, endpoint, console)


def _open_release(repo_id: str, request: EvalRequest, endpoint: str, push: bool) -> tuple[Release, Run]:
    from hubkit.evaluate.release import open_release
    from hubkit.hub.auth import resolve_token

    # A push needs a token before any work is done; reading a public release needs none.
    token = resolve_token(endpoint, required=push)
    return open_release(repo_id, request.steps, request.every, endpoint=endpoint, token=token)


def _evaluate(
    plans: list[EvalPlan], console: Console, quiet: bool, endpoint: str, vllm_python: Path | None
) -> list[EvalResults]:
    """The plans' evaluations in one pass (one plan, or a sweep's runs), with a progress bar."""
    from hubkit.evaluate.evaluation import execute_evals

    for plan in plans:
        console.print(_plan_line(plan), highlight=False)
        console.print(_contamination_line(plan), highlight=False)
    models = any(p.include_base for p in plans) + sum(len(p.checkpoints) for p in plans)  # the base once
    columns = (TextColumn("answering"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=quiet) as progress:
        task = progress.add_task("eval", total=len(plans[0].problems.problems) * models)
        return execute_evals(
            plans,
            endpoint=endpoint,
            progress=lambda done: progress.advance(task, done),
            vllm_python=str(vllm_python) if vllm_python else None,
        )


def _sweep_runs(target: Target) -> list[Run]:
    from hubkit.runs import load_run
    from hubkit.runs.locate import sweep_run_dirs

    return [load_run(folder) for folder in sweep_run_dirs(target.sweep, target.runs_dir)]


def _show(results: EvalResults, run: Run, eval_parent: Path | None, console: Console) -> None:
    """The results' table and best checkpoint, then saved: into the run, or under `eval_parent`."""
    from hubkit.runs.eval_results import EVAL_DIR, save_eval

    console.print(_table(results.summary))
    console.print(_best_line(results.summary), highlight=False)
    if eval_parent is None:
        save_eval(run.run_dir, results.summary, results.samples)
        console.print(f"Results written to {EVAL_DIR}/ in run {run.manifest.run_id}", highlight=False)
    else:
        written = save_eval(eval_parent, results.summary, results.samples)
        console.print(f"Results written to {written}", highlight=False)


def _push(release: Release, results: EvalResults, endpoint: str, console: Console) -> None:
    from hubkit.hub.auth import hub_client, resolve_token
    from hubkit.publish.release_eval import push_release_eval

    token = resolve_token(endpoint)
    commit = push_release_eval(hub_client(endpoint, token), release, results, token=token)
    if commit.commit_sha is None:
        console.print(f"{release.repo_id} already holds these results: nothing to commit", highlight=False)
    else:
        console.print(
            f"Pushed the results and the updated card to {release.repo_id} (commit {commit.commit_sha[:8]})",
            highlight=False,
        )


def _best_line(summary: EvalSummary) -> str:
    best = summary.best()
    if best is not None:
        return f"Best checkpoint: {best.name} ({best.accuracy:.1%}, {best.tokens_mean:.0f} tokens on average)"
    if summary.checkpoints:
        return "No checkpoint answered any problem correctly: no best checkpoint"
    return "No checkpoint evaluated"


def _plan_line(plan: EvalPlan) -> str:
    problems = plan.problems
    source = problems.source + (f" ({problems.split})" if problems.split else "")
    skipped = f", {problems.skipped} without an answer skipped" if problems.skipped else ""
    models = ", ".join(plan.models)
    whose = "the run's reward" if plan.metric.from_run else "chosen with --metric"
    system = "the run's system prompt" if plan.run.manifest.system_prompt else "no system prompt"
    return (
        f"Evaluating {plan.run.manifest.run_id}: {models} on {len(problems.problems)} problems from {source}"
        f"{skipped}; metric {plan.metric.name} ({whose}), {system}, {plan.backend} in {plan.dtype}, "
        f"{'greedy' if not plan.settings.do_sample else f'temperature {plan.settings.temperature}'}, "
        f"up to {plan.settings.max_new_tokens} tokens ({plan.length.source})"
    )


def _contamination_line(plan: EvalPlan) -> str:
    from hubkit.runs.problem_hashes import TRAIN_PROBLEM_HASHES_NAME

    report = plan.contamination
    if not report.checked:
        return (
            f"Contamination not checked: run {plan.run.manifest.run_id} records no training problems "
            f"({TRAIN_PROBLEM_HASHES_NAME})"
        )
    return f"Held out: none of the problems is among the run's {report.train_problems} training problems"


def _table(summary: EvalSummary) -> Table:
    # Text, not str: a metric or model name from a release is shown as written, never as rich markup.
    title = Text(visible(f"{summary.metric.name} on {summary.problems.n} problems"))
    table = Table(title=title, title_justify="left")
    table.add_column("model", no_wrap=True)
    for header in ("accuracy", "95% CI", "tokens", "median", "max", "cut"):
        table.add_column(header, justify="right", no_wrap=True)
    for model in summary.models:
        low, high = model.ci95
        table.add_row(
            Text(visible(model.name)),
            f"{model.accuracy:.1%}",
            f"{low:.0%}-{high:.0%}",
            f"{model.tokens_mean:.1f}",
            f"{model.tokens_median:.0f}",
            str(model.tokens_max),
            f"{model.truncated_share:.0%}",
        )
    table.caption = "tokens: mean answer length; cut: share of answers that hit the token limit"
    return table
