"""Problem sets for evaluation, and the contamination check against the training-problem hashes the run
records (`hubkit.runs.problem_hashes`) before an evaluation starts.

Importing this module needs only the standard library; loading a parquet file or a Hub dataset imports
`pyarrow` or `datasets` when it happens.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hubkit.errors import ContaminationError, EvalError
from hubkit.runs.problem_hashes import normalize_problem_text, problem_hash

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")


# --- problem sets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """One evaluation problem: the question a model is asked and its reference answer as the data gives it."""

    question: str
    answer: str


@dataclass(frozen=True)
class ProblemSet:
    """Problems in the source's order, and where they came from (a Hub dataset's split, config and the commit
    read, or a file). `whole`: every row of the source is a problem of the set (none cut by a limit, none
    skipped): for a Hub dataset, the whole split as the benchmark defines it."""

    source: str  # a Hub dataset id (``openai/gsm8k``) or a file name, never a local path
    split: str | None
    revision: str | None
    problems: tuple[Problem, ...]
    skipped: int = 0  # rows left out because they have no reference answer
    config: str | None = None
    whole: bool = False

    @property
    def sha256(self) -> str:
        """A hash of the problems and their answers, in order."""
        digest = hashlib.sha256()
        for problem in self.problems:
            line = json.dumps({"question": problem.question, "answer": problem.answer}, sort_keys=True)
            digest.update(line.encode("utf-8") + b"\n")
        return digest.hexdigest()


@dataclass(frozen=True)
class HubSource:
    """A problem set on the Hub: dataset id, config (subset) and split."""

    dataset: str
    config: str | None
    split: str


# The default held-out set of GSM8K runs.
GSM8K_TEST = HubSource("openai/gsm8k", "main", "test")


def _require(module: str, purpose: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise EvalError(f"{purpose} needs {module}: pip install 'hubkit[eval]'")


def _last_user_message(messages: Any) -> str | None:
    if isinstance(messages, list | tuple):
        users = [m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    return None


def _problem_from_row(row: Mapping[str, Any], where: str) -> Problem | None:
    """The question and answer of a row: GSM8K (question/answer), MATH/DeepScaleR (problem/answer), or
    verl's RL format (prompt messages, reward_model.ground_truth). None when the row has no answer."""
    question = next((row[c] for c in ("question", "problem") if isinstance(row.get(c), str)), None)
    if question is None:
        question = _last_user_message(row.get("prompt"))
    reward_model = row.get("reward_model")
    answer = next((row[c] for c in ("answer", "ground_truth") if row.get(c) is not None), None)
    if answer is None and isinstance(reward_model, Mapping):
        answer = reward_model.get("ground_truth")
    if question is None:
        raise EvalError(
            f"{where}: a row has no question (columns {sorted(row)}): "
            "expected 'question' or 'problem', or verl's 'prompt' messages"
        )
    if answer is None or not str(answer).strip():
        return None
    return Problem(question=question, answer=str(answer))


def _read_local_rows(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        _require("pyarrow", "reading a parquet problem file")
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    try:
        if suffix == ".json" and text.lstrip().startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise EvalError(f"{path.name} is not JSON lines or a JSON array ({e.msg} at line {e.lineno})") from e
    if not all(isinstance(row, dict) for row in rows):
        raise EvalError(f"{path.name} must hold one JSON object per problem")
    return rows


def problem_set_from_rows(
    rows: Iterable[Mapping[str, Any]],
    source: str,
    *,
    split: str | None = None,
    revision: str | None = None,
    limit: int | None = None,
    config: str | None = None,
) -> ProblemSet:
    """Problems from table rows, the first `limit` of those with an answer.

    Raises:
        EvalError: a row has no question, or no row has an answer.
    """
    problems: list[Problem] = []
    skipped = 0
    cut = False
    for row in rows:
        if limit is not None and len(problems) >= limit:
            cut = True
            break
        problem = _problem_from_row(row, source)
        if problem is None:
            skipped += 1
        else:
            problems.append(problem)
    if not problems:
        raise EvalError(f"{source} holds no problem with an answer")
    return ProblemSet(source, split, revision, tuple(problems), skipped, config, not cut and not skipped)


def load_local_problems(path: str | os.PathLike[str], *, limit: int | None = None) -> ProblemSet:
    """A problem set from a local ``.jsonl``, ``.json`` (lines or array) or ``.parquet`` file.

    The set's source is the file's name: its local path is never recorded.

    Raises:
        EvalError: no such file, an unknown extension, or rows without questions.
    """
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"no problem file {path}: check --problems")
    if path.suffix.lower() not in LOCAL_SUFFIXES:
        raise EvalError(f"{path.name}: a problem file must end in {', '.join(LOCAL_SUFFIXES)}")
    return problem_set_from_rows(_read_local_rows(path), path.name, limit=limit)


def load_hub_problems(
    source: HubSource,
    *,
    revision: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    limit: int | None = None,
) -> ProblemSet:
    """A problem set from a Hub dataset, read at one commit of `revision` (default the main branch),
    recorded as the set's revision; the first `limit` problems.

    The dataset repo is fetched through the Hub cache and read with `datasets` (its README's configs
    decide which files hold which split).

    Raises:
        EvalError: the dataset, revision, config or split does not exist.
    """
    _require("datasets", "loading a Hub dataset")
    import datasets
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    try:
        commit = HfApi(endpoint=endpoint, token=token).dataset_info(source.dataset, revision=revision).sha
        folder = snapshot_download(
            source.dataset, repo_type="dataset", revision=commit, endpoint=endpoint, token=token
        )
    except HfHubHTTPError as e:
        raise EvalError(
            f"could not fetch dataset {source.dataset}@{revision or 'main'} ({type(e).__name__}): "
            "check --problems, --revision and --endpoint"
        ) from e
    try:
        rows = datasets.load_dataset(folder, name=source.config, split=source.split)
    except (ValueError, FileNotFoundError) as e:
        raise EvalError(
            f"dataset {source.dataset} has no split {source.split!r}"
            + (f" in config {source.config!r}" if source.config else "")
            + f" ({str(e).splitlines()[0][:120]}): check --split, or name a config as ID:CONFIG"
        ) from e
    return problem_set_from_rows(
        rows, source.dataset, split=source.split, revision=commit, limit=limit, config=source.config
    )


def problem_source(spec: str, split: str | None) -> Path | HubSource:
    """Where a `--problems` value points: a local problem file (an existing path, or one ending in
    .jsonl/.json/.parquet) for `load_local_problems`, or a Hub dataset for `load_hub_problems` (``ID`` or
    ``ID:CONFIG``, e.g. ``openai/gsm8k:main``, and the split, default ``test``).
    """
    path = Path(spec)
    if path.suffix.lower() in LOCAL_SUFFIXES or path.exists():
        return path
    dataset, _, config = spec.partition(":")
    return HubSource(dataset, config or None, split or "test")


# --- contamination --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContaminationReport:
    """The check of a problem set against a run's training problems."""

    checked: bool  # False when the run records no training-problem hashes
    overlapping: tuple[int, ...]  # indices (in the problem set) of problems that are training problems
    train_problems: int | None  # distinct training problems the run records (None if not checked)


def check_contamination(
    problems: ProblemSet, train_hashes: frozenset[str] | None, *, run_id: str
) -> ContaminationReport:
    """Which problems of `problems` are training problems (by normalized-text hash), refusing any: the
    report says no overlap, or not checked when the run records no hashes.

    Raises:
        ContaminationError: some problems are training problems; the message says how many and which.
    """
    if train_hashes is None:
        return ContaminationReport(checked=False, overlapping=(), train_problems=None)
    overlapping = tuple(
        i for i, problem in enumerate(problems.problems) if problem_hash(problem.question) in train_hashes
    )
    report = ContaminationReport(checked=True, overlapping=overlapping, train_problems=len(train_hashes))
    if report.overlapping:
        shown = ", ".join(str(i) for i in report.overlapping[:10])
        more = f" and {len(report.overlapping) - 10} more" if len(report.overlapping) > 10 else ""
        first = normalize_problem_text(problems.problems[report.overlapping[0]].question)
        preview = first if len(first) <= 60 else first[:57] + "..."
        raise ContaminationError(
            f"{len(report.overlapping)} of {len(problems.problems)} problems in {problems.source} are training "
            f"problems of run {run_id} (problem index {shown}{more}; first: {preview!r}): "
            "evaluate on held-out problems"
        )
    return report
