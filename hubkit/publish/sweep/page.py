"""A sweep's comparison page: one dataset repo beside its runs, `<owner>/<sweep name>-sweep`, that its
Collection lists first, rebuilt from every run's published evaluation whenever a run joins or changes.

    README.md                       accuracy against mean answer length of every evaluated model of every run
                                    and the base (the Pareto front marked), a table by varied value (final
                                    and best checkpoint), every model's answer to the first problems
    assets/accuracy_vs_length.png   the chart
    eval/answers.parquet            config "answers": every evaluated answer of every run, to put any two
                                    models side by side on one problem (the Dataset Viewer, `datasets`)

Each run's evaluation is read back from its adapter repo as any release is (`hubkit.release.read`: bounded,
every file of its kind) in the push's read stage (the run pushed gives its own), and only runs evaluated on
the same problems as the first one are compared. The page is planned, vetted and committed as every repo of
a push is (`hubkit.publish.sweep.plans`): an unchanged sweep makes no commit.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hubkit.cards import text
from hubkit.cards.plots import png, sweep_figure
from hubkit.cards.tables import Table
from hubkit.errors import ReleaseError
from hubkit.formats import parquet
from hubkit.formats.yaml_file import with_front_matter
from hubkit.hub.hashing import FileHashCache
from hubkit.publish.plan import RepoPlan, is_repo_id
from hubkit.publish.samples_repo import EVAL_COLUMNS
from hubkit.publish.vetted import Vetter
from hubkit.release.companions import ADAPTER, LABELS, RELEASE, SPACE
from hubkit.release.layout import SWEEP_CHART
from hubkit.release.read import download_release_files, read_release
from hubkit.runs.eval_results import EVAL_DIR, RESULTS_NAME, SAMPLES_NAME, EvalResults, ModelResult, load_eval
from hubkit.safety.local_paths import mask_homes

if TYPE_CHECKING:
    from huggingface_hub import Collection, CollectionItem

ANSWERS_TABLE = "eval/answers.parquet"
SHOWN_PROBLEMS = 2
_TAGS = ["hubkit", "grpo", "sweep"]
MAX_RUNS = 100  # the runs a page compares: each is downloaded, and a Collection read back is untrusted
# The items a sweep of MAX_RUNS runs puts in its Collection (every repo of each, and the page): no item
# after them is looked at, however many a Collection holds.
MAX_ITEMS = 1 + MAX_RUNS * len(RELEASE)
_REPO_TYPES = {c.repo_type for c in RELEASE}
_ANSWER_START = 80
# Every evaluated answer, as the samples dataset holds one run's, with the run it is from.
_ANSWER_COLUMNS = {
    "value": ("string", "the run's value of the varied setting"),
    "run": ("string", "the run's adapter repo"),
    **EVAL_COLUMNS,
}


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep as its adapter repo publishes it."""

    repo_id: str
    value: str  # as its Collection note gives it
    evaluation: EvalResults


@dataclass(frozen=True)
class PublishedRun:
    """One run of a sweep as read back (or, for the run being pushed, as it is about to be published)."""

    repo_id: str
    value: str
    evaluation: EvalResults | None  # None: not evaluated, or not published by hubkit
    left_out: str  # why it is not compared, in words, when it has no evaluation


def note_point(note: str | None) -> tuple[str, str] | None:
    """The varied value and the repo's kind a run's Collection note starts with
    (``setting=value · kind: …``, `hubkit.publish.sweep.collection.run_note`); None for any other note."""
    head, _, _ = (note or "").partition(":")
    point, _, kind = head.partition(" · ")
    _, equals, value = point.partition("=")
    return (value, kind) if equals and kind else None


def release_items(collection: Collection | None) -> list[tuple[CollectionItem, str, str]]:
    """Each item of the Collection that is a repo of a release its owner pushed to the sweep, with its
    varied value and kind: among the first `MAX_ITEMS`, in the Collection owner's namespace (another
    owner's repo listed there is not a run of this sweep, and its card is not the pusher's to rewrite), a
    valid repo id and a note hubkit writes (``setting=value · kind: …``). Any other item is left out."""
    if collection is None:
        return []
    owner = collection.slug.split("/")[0]
    found = []
    for item in collection.items[:MAX_ITEMS]:
        point = note_point(item.note)
        if point is None or point[1] not in LABELS or item.item_type not in _REPO_TYPES:
            continue
        if is_repo_id(item.item_id) and item.item_id.split("/")[0] == owner:
            found.append((item, *point))
    return found


def read_sweep_runs(
    collection: Collection | None, skip: str, *, endpoint: str | None, token: str | None
) -> list[PublishedRun]:
    """Every run the Collection holds (its adapter items) but the one at `skip` (the run being pushed,
    whose evaluation is its own), each with its evaluation as published, in the Collection's order.

    Raises:
        HubkitError: the Hub refused or could not be reached.
    """
    read: list[PublishedRun] = []
    items = release_items(collection)
    adapters = [
        (item, value)
        for item, value, kind in items
        if kind == ADAPTER.label and item.item_type == ADAPTER.repo_type
    ]
    for item, value in adapters:
        if item.item_id == skip:
            continue
        if len(read) == MAX_RUNS:  # read or not, each costs calls: a Collection cannot make a push read more
            read.append(PublishedRun("", "", None, f"the runs after the first {MAX_RUNS}"))
            break
        try:
            release = read_release(item.item_id, endpoint=endpoint, token=token)
        except ReleaseError:  # a model noted as a run's adapter that `hubkit push` did not publish
            read.append(PublishedRun(item.item_id, value, None, f"{item.item_id}: not published by hubkit"))
            continue
        evaluation = None
        if f"{EVAL_DIR}/{RESULTS_NAME}" in release.files:
            evaluated = (
                f"{EVAL_DIR}/{RESULTS_NAME}",
                f"{EVAL_DIR}/{SAMPLES_NAME}",
            )  # no weights, no tokenizer
            folder = download_release_files(release, evaluated, endpoint=endpoint, token=token)
            evaluation = load_eval(folder)
        read.append(PublishedRun(item.item_id, value, evaluation, f"{item.item_id}: not evaluated"))
    return read


def compared_runs(published: Sequence[PublishedRun]) -> tuple[list[SweepRun], list[str]]:
    """The evaluated runs, in the order given (the varied value's), that were evaluated on the first one's
    problems; and the others, in words (not evaluated, on other problems, not published by hubkit)."""
    runs: list[SweepRun] = []
    left_out: list[str] = []
    for run in published:
        evaluation = run.evaluation
        if evaluation is None:
            left_out.append(run.left_out)
        elif runs and evaluation.summary.problems.sha256 != runs[0].evaluation.summary.problems.sha256:
            left_out.append(f"{run.repo_id}: evaluated on other problems than {runs[0].repo_id}")
        else:
            runs.append(SweepRun(run.repo_id, run.value, evaluation))
    return runs, left_out


def pareto_front(models: Sequence[tuple[str, ModelResult]]) -> list[tuple[str, int | None]]:
    """The (label, step) of each model no other model beats on both accuracy and mean length."""

    def beaten(model: ModelResult) -> bool:
        return any(
            other.accuracy >= model.accuracy
            and other.tokens_mean <= model.tokens_mean
            and (other.accuracy, -other.tokens_mean) != (model.accuracy, -model.tokens_mean)
            for _, other in models
        )

    return [(label, model.step) for label, model in models if not beaten(model)]


def _result(model: ModelResult) -> str:
    low, high = model.ci95
    return f"{text.percent(model.accuracy)} [{text.percent(low)}, {text.percent(high)}]"


def _table(setting: str, runs: Sequence[SweepRun]) -> Table:
    rows = []
    for run in runs:
        final, best = run.evaluation.summary.checkpoints[-1], run.evaluation.best()
        rows.append(
            (
                text.literal(run.value),
                f"[{text.cell(run.repo_id)}](https://huggingface.co/{run.repo_id})",
                f"{final.step}: {_result(final)}",
                f"{final.tokens_mean:.0f} / {final.tokens_median:.0f} / {final.tokens_max}",
                text.percent(final.truncated_share),
                f"{best.step}: {_result(best)}, {best.tokens_mean:.0f} tokens" if best else "",
            )
        )
    header = (
        text.cell(setting),
        "run",
        "final checkpoint: accuracy [95 % interval]",
        "tokens mean / median / max",
        "cut at the limit",
        "best checkpoint",
    )
    return Table(header, tuple(rows), (True, False, False, True, True, False))


def _answers(runs: Sequence[SweepRun], problem_index: int) -> tuple[str, Table]:
    """A problem, and every evaluated model's answer to it: the base once, then each run's checkpoints."""
    samples = [("base", s) for s in runs[0].evaluation.samples if s.step is None]
    samples += [(r.value, s) for r in runs for s in r.evaluation.samples if s.step is not None]
    shown = [(value, s) for value, s in samples if s.problem_index == problem_index]
    rows = tuple(
        (
            text.literal(value if s.step is None else f"{value}, step {s.step}"),
            "correct" if s.correct else "wrong",
            str(s.tokens),
            text.literal(" ".join(mask_homes(s.answer).split())[:_ANSWER_START]),
        )
        for value, s in shown
    )
    problem = shown[0][1].problem if shown else ""
    return problem, Table(("model", "verdict", "tokens", "answer (start)"), rows, (False, False, True, False))


def page_files(
    sweep_name: str,
    setting: str,
    collection_url: str,
    runs: Sequence[SweepRun],
    left_out: Sequence[str],
    space: str | None = None,
) -> dict[str, bytes]:
    """The page's files (unvetted), linking the sweep's Space when it has one. Before any run is evaluated,
    the page says so: every run's card links it and shows its chart from the run's first push."""
    if not runs:
        return _waiting_page(sweep_name, setting, collection_url, left_out, space)
    base = runs[0].evaluation.summary.base
    models = [("base", base)] if base else []
    models += [(run.value, m) for run in runs for m in run.evaluation.summary.checkpoints]
    problems = runs[0].evaluation.summary.problems
    figure = sweep_figure(
        [(run.value, run.evaluation.summary.checkpoints) for run in runs],
        base,
        pareto_front(models),
        f"Accuracy vs. answer length, every run (n = {problems.n})",
        setting,
    )
    answers = sorted(
        ((run, s) for run in runs for s in run.evaluation.samples),
        key=lambda rs: (rs[0].repo_id, rs[1].step is not None, rs[1].step or 0, rs[1].problem_index),
    )
    columns = {
        "value": [r.value for r, _ in answers],
        "run": [r.repo_id for r, _ in answers],
        **{name: [getattr(s, name) for _, s in answers] for name in list(_ANSWER_COLUMNS)[2:]},
    }
    table = parquet.table_of(columns, {n: t for n, (t, _) in _ANSWER_COLUMNS.items()})
    lines = [
        f"# {text.prose(sweep_name)}",
        "",
        f"{len(runs)} runs of one recipe varying `{setting}`, each evaluated on {problems.n} problems of "
        f"{text.code(problems.source)} ({text.code(runs[0].evaluation.summary.metric.name)}); every repo of every "
        f"run is in the Hub Collection [{text.prose(sweep_name)}]({collection_url}).{_space_line(space)}",
        "",
        f"![accuracy against mean answer length]({SWEEP_CHART})",
        "",
        _table(setting, runs).markdown,
        "",
    ]
    lines += [f"Not compared: {text.literal(note)}." for note in left_out] + ([""] if left_out else [])
    lines += ["## Every model's answer to one problem", ""]
    lines += [
        "Any two models side by side, on any problem: the `answers` config (`datasets.load_dataset(repo, "
        '"answers")`, or the Dataset Viewer), filtered on `problem_index`.',
        "",
    ]
    for index in range(min(SHOWN_PROBLEMS, problems.n)):
        problem, answers_table = _answers(runs, index)
        lines += [f"Problem {index}:", "", text.fence(mask_homes(problem)), "", answers_table.markdown, ""]
    lines += ["## `answers`", "", "| column | type | what it is |", "|---|---|---|"]
    lines += [f"| `{c}` | {t} | {what} |" for c, (t, what) in _ANSWER_COLUMNS.items()]
    metadata = {
        "configs": [{"config_name": "answers", "data_files": [{"split": "train", "path": ANSWERS_TABLE}]}],
        "tags": _TAGS,
    }
    card = with_front_matter(metadata, "\n".join(lines) + "\n")
    return {
        "README.md": card.encode("utf-8"),
        SWEEP_CHART: png(figure),
        ANSWERS_TABLE: parquet.write_table(table),
    }


def _space_line(space: str | None) -> str:
    """The sentence linking the sweep's Space (a repo id of a checked form), or nothing."""
    if space is None:
        return ""
    return f" Any run's checkpoint answers beside the base model in the Space [{space}]({SPACE.url(space)})."


def _waiting_page(
    sweep_name: str, setting: str, collection_url: str, left_out: Sequence[str], space: str | None
) -> dict[str, bytes]:
    lines = [
        f"# {text.prose(sweep_name)}",
        "",
        f"Runs of one recipe varying `{setting}`; every repo of every run is in the Hub Collection "
        f"[{text.prose(sweep_name)}]({collection_url}).{_space_line(space)}",
        "",
        f"![accuracy against mean answer length]({SWEEP_CHART})",
        "",
        f"No run of the sweep is evaluated yet: {text.code('hubkit eval --sweep ' + shlex.quote(sweep_name))} "
        "evaluates them all in one pass, and the next push of any of them compares them here.",
        "",
    ]
    lines += [f"Not compared: {text.literal(note)}." for note in left_out]
    card = with_front_matter({"tags": _TAGS}, "\n".join(lines) + "\n")
    figure = sweep_figure([], None, [], "Accuracy vs. answer length, every run", setting)
    return {"README.md": card.encode("utf-8"), SWEEP_CHART: png(figure)}


def plan_page(
    repo_id: str, files: dict[str, bytes], vetter: Vetter, hashes: FileHashCache, *, private: bool
) -> RepoPlan:
    """The page's files vetted, as the dataset repo's plan (committed with every repo of the push)."""
    planned = vetter.generated(files, "dataset", hashes)
    return RepoPlan(
        repo_id=repo_id, files=planned, repo_type="dataset", private=private, title="hubkit sweep"
    )
