"""An evaluation on a registered benchmark, as the Hub's own record of it: ``.eval_results/<name>.yaml`` in
the adapter repo, which the Hub shows on the model page and in the benchmark's leaderboard (from main).

A benchmark is registered when its dataset repo holds an ``eval.yaml`` naming its tasks (``tasks: [{id,
config, split}]``); the push reads it from the Hub and never assumes a task id. An entry is written only
when what was evaluated is one of those tasks as the benchmark defines it: its config and split, every row
of it (`ProblemsInfo.whole`), and the model on main (the newest adapter) among the evaluated. Anything
else (a sample, another split, a dataset that is no benchmark) stays in the card alone, which says why.
The entry is written with huggingface_hub's own `EvalResultEntry`.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubkit.errors import RepoNotFoundError
from hubkit.formats.yaml_file import YAMLError, dump_yaml, load_yaml
from hubkit.hub.download import download_repo_file
from hubkit.publish.plan import is_repo_id
from hubkit.runs.eval_results import EvalResults, EvalSummary

EVAL_YAML = "eval.yaml"
RESULTS_DIR = ".eval_results"
_MAX_EVAL_YAML_BYTES = 256_000


@dataclass(frozen=True)
class BenchmarkTask:
    """One task of a registered benchmark, as its ``eval.yaml`` names it."""

    id: str
    config: str | None = None
    split: str | None = None


def _tasks(data: object) -> tuple[BenchmarkTask, ...]:
    tasks = data.get("tasks") if isinstance(data, dict) else None
    found = []
    for task in tasks if isinstance(tasks, list) else ():
        if not isinstance(task, dict) or not isinstance(task.get("id"), str):
            continue
        config, split = task.get("config"), task.get("split")
        found.append(
            BenchmarkTask(
                task["id"],
                config if isinstance(config, str) else None,
                split if isinstance(split, str) else None,
            )
        )
    return tuple(found)


def read_benchmark_tasks(dataset_id: str, *, endpoint: str, token: str | None) -> tuple[BenchmarkTask, ...]:
    """The tasks the dataset's ``eval.yaml`` names on the Hub; none when it has none (it is no registered
    benchmark), is not on that Hub, or its ``eval.yaml`` cannot be read as one.

    Raises:
        HubkitError: the Hub refuses or cannot be reached (`hubkit.hub.failures`).
    """
    if not is_repo_id(dataset_id):  # a local problem file's name
        return ()
    try:
        path = download_repo_file(
            dataset_id, EVAL_YAML, revision=None, endpoint=endpoint, token=token, repo_type="dataset"
        )
    except RepoNotFoundError:
        return ()
    if path is None or path.stat().st_size > _MAX_EVAL_YAML_BYTES:
        return ()
    try:
        return _tasks(load_yaml(path.read_text(encoding="utf-8")))
    except (YAMLError, UnicodeDecodeError):
        return ()


def benchmark_task(summary: EvalSummary, tasks: tuple[BenchmarkTask, ...]) -> BenchmarkTask | None:
    """The benchmark task the evaluation is, as the benchmark defines it, or None (see the module docstring)."""
    problems = summary.problems
    if not problems.whole:
        return None
    matching = [
        task
        for task in tasks
        if task.split in (None, problems.split) and task.config in (None, problems.config)
    ]
    return matching[0] if len(matching) == 1 else None


def eval_results_files(
    evaluation: EvalResults | None,
    tasks: tuple[BenchmarkTask, ...],
    *,
    step_on_main: int,
    repo_id: str,
) -> dict[str, bytes]:
    """``.eval_results/<benchmark>.yaml`` for the model on main, or nothing when the evaluation is not one
    of the benchmark's tasks or did not evaluate that model."""
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    if evaluation is None or not tasks:
        return {}
    summary = evaluation.summary
    task = benchmark_task(summary, tasks)
    evaluated = {m.step: m for m in summary.checkpoints}
    if task is None or step_on_main not in evaluated:
        return {}
    model = evaluated[step_on_main]
    generation = summary.generation
    notes = (
        f"hubkit eval of step {step_on_main}, scored with {summary.metric.name} ({summary.metric.description}), "
        f"not the benchmark harness's metric; {generation.prompt_description()}, "
        f"{'greedy' if not generation.do_sample else f'temperature {generation.temperature:g}'}, at most "
        f"{generation.max_new_tokens} new tokens; {model.correct} of {model.n} correct"
    )
    entry = EvalResultEntry(
        dataset_id=summary.problems.source,
        task_id=task.id,
        value=round(model.accuracy, 6),
        dataset_revision=summary.problems.revision,
        date=summary.created_at,
        source_url=f"https://huggingface.co/{repo_id}/blob/main/eval/results.json",  # what it is read from
        source_name="hubkit eval (eval/results.json)",
        notes=notes,
    )
    name = summary.problems.source.rsplit("/", 1)[-1]
    return {f"{RESULTS_DIR}/{name}.yaml": dump_yaml(eval_result_entries_to_yaml([entry])).encode("utf-8")}
