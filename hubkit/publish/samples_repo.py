"""The release's samples dataset (`<repo>-samples`): everything its models wrote, browsable in the Hub's
Dataset Viewer and loadable with `datasets.load_dataset(repo, config)`.

    README.md                        the dataset card: its `configs:`, what each column is, the model repo
    eval/samples.parquet             config "eval": every `hubkit eval` answer (base and each checkpoint)
    rollouts/step-000001.parquet     config "rollouts": the completions the framework saved while training,
                                     at most `MAX_ROWS_PER_STEP` per step (`hubkit.runs.completions`)

Each table is vetted as every published file is (`hubkit.safety`): a secret or this machine's own folder in
an answer is refused in one line naming the row, before any repo exists (a user's home is masked as ``~``
instead); ``--no-samples`` leaves the dataset out.
"""

from __future__ import annotations

import json

from hubkit.errors import UnsafeFileError
from hubkit.formats import parquet
from hubkit.formats.yaml_file import with_front_matter
from hubkit.hub.hashing import FileHashCache
from hubkit.publish.plan import PlannedFile
from hubkit.publish.vetted import Vetter
from hubkit.runs import Run
from hubkit.runs.completions import MAX_ROWS_PER_STEP, MAX_TEXT_CHARS, Completions
from hubkit.runs.eval_results import EvalResults

EVAL_TABLE = "eval/samples.parquet"

EVAL_COLUMNS = {
    "model": ("string", "the model: `base`, or `global_step_N` for the checkpoint of step N"),
    "step": ("int64", "the checkpoint's training step (empty for the base model)"),
    "problem_index": ("int64", "the problem's place in the evaluated problem set"),
    "problem": ("string", "the problem as asked"),
    "reference": ("string", "the reference answer"),
    "answer": ("string", "what the model wrote"),
    "correct": ("bool", "the evaluation's verdict"),
    "tokens": ("int64", "the answer's length in tokens"),
    "truncated": ("bool", "the answer hit the token limit"),
}
_ROLLOUT_COLUMNS = {
    "step": ("int64", "the training step the completion was sampled at"),
    "prompt": ("string", f"the prompt (a chat one message per line; cut at {MAX_TEXT_CHARS} characters)"),
    "completion": ("string", f"what the model wrote (cut at {MAX_TEXT_CHARS} characters)"),
    "rewards": ("string", "the numbers the framework logged beside it (rewards, advantage), as JSON"),
}


def _eval_table(evaluation: EvalResults) -> bytes:
    samples = sorted(evaluation.samples, key=lambda s: (s.step is not None, s.step or 0, s.problem_index))
    columns = {name: [getattr(s, name) for s in samples] for name in EVAL_COLUMNS}
    return parquet.write_table(parquet.table_of(columns, {n: t for n, (t, _) in EVAL_COLUMNS.items()}))


def _rollout_tables(completions: Completions) -> dict[str, bytes]:
    by_step: dict[int, list] = {}
    for row in completions.rows:
        by_step.setdefault(row.step, []).append(row)
    types = {n: t for n, (t, _) in _ROLLOUT_COLUMNS.items()}
    tables = {}
    for step, rows in sorted(by_step.items()):
        columns = {
            "step": [r.step for r in rows],
            "prompt": [r.prompt for r in rows],
            "completion": [r.completion for r in rows],
            "rewards": [json.dumps(r.rewards, sort_keys=True) for r in rows],
        }
        tables[f"rollouts/step-{step:06d}.parquet"] = parquet.write_table(parquet.table_of(columns, types))
    return tables


def _card(repo_id: str, adapter_repo_id: str, configs: list[str], run_id: str) -> bytes:
    metadata = {
        "configs": [
            {"config_name": name, "data_files": [{"split": "train", "path": f"{name}/*.parquet"}]}
            for name in configs
        ],
        "tags": ["hubkit", "grpo", "completions"],
    }
    sections = [
        f"# {repo_id}",
        "",
        f"What the models of [{adapter_repo_id}](https://huggingface.co/{adapter_repo_id}) "
        f"(run `{run_id}`) wrote, loadable with `datasets`:",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
    ]
    sections += [f'{name} = load_dataset("{repo_id}", "{name}", split="train")' for name in configs]
    sections += ["```", ""]
    described = {"eval": EVAL_COLUMNS, "rollouts": _ROLLOUT_COLUMNS}
    intros = {
        "eval": "Every answer of the base model and of each evaluated checkpoint to the held-out problems "
        "(`hubkit eval`), with its verdict and length.",
        "rollouts": f"Completions the trainer saved while it trained, at most {MAX_ROWS_PER_STEP} per step (the "
        "first ones the framework wrote).",
    }
    for name in configs:
        sections += [f"## `{name}`", "", intros[name], "", "| column | type | what it is |", "|---|---|---|"]
        sections += [f"| `{c}` | {t} | {what} |" for c, (t, what) in described[name].items()]
        sections.append("")
    return with_front_matter(metadata, "\n".join(sections)).encode("utf-8")


def samples_repo_files(
    repo_id: str,
    adapter_repo_id: str,
    run_id: str,
    evaluation: EvalResults | None,
    completions: Completions,
) -> dict[str, bytes]:
    """The dataset's files (unvetted), or none when the run has neither an evaluation nor completions."""
    files: dict[str, bytes] = {}
    if evaluation is not None and evaluation.samples:
        files[EVAL_TABLE] = _eval_table(evaluation)
    files.update(_rollout_tables(completions))
    if not files:
        return {}
    configs = [name for name in ("eval", "rollouts") if any(path.startswith(f"{name}/") for path in files)]
    files["README.md"] = _card(repo_id, adapter_repo_id, configs, run_id)
    return files


def plan_samples_files(
    repo_id: str,
    adapter_repo_id: str,
    run: Run,
    evaluation: EvalResults | None,
    completions: Completions,
    vetter: Vetter,
    hashes: FileHashCache,
) -> tuple[PlannedFile, ...]:
    """The dataset's files, vetted (none when the run has nothing to put in it).

    Raises:
        UnsafeFileError: an answer holds a secret or a local path (the message names the table and the row,
            and how to leave the samples out).
    """
    files = samples_repo_files(repo_id, adapter_repo_id, run.manifest.run_id, evaluation, completions)
    try:
        return vetter.generated(files, "dataset", hashes)
    except UnsafeFileError as e:  # an answer the run's models wrote: the user may leave them all out
        raise type(e)(f"{e}, or leave the samples out with --no-samples") from None
