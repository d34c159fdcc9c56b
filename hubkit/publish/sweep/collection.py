"""A run's place in its sweep: the Hub Collection named for the sweep holds every run's repos, each with a
note giving the run's varied value, its final accuracy and its mean answer length.

    items = decide_items(collection, notes, may_add)     # in the plan (`hubkit.publish.sweep.plans`)
    report = with_sweep(api, report, endpoint)           # after the plan's commits

The sweep is the one the run's manifest records (the recipes' `--sweep`), or the request's
(`hubkit push --sweep NAME --sweep-value SETTING=VALUE`, for runs of one's own scripts: `in_sweep` puts it in
the run's manifest as published).

Each run's push adds its own repos, so the Collection grows as runs are pushed, one after another or as
each finishes; the items stay ordered by the varied value (numbers as numbers), after the sweep's
comparison page (`hubkit.publish.sweep.page`). The page and every other run's card
(`hubkit.publish.sweep.siblings`) are commits of the push's plan; the Collection's changes, which are not
commits, are decided with them and made after them. Only what differs is written: a push of an unchanged
run makes no call that changes the Collection. The Collection is found by its title among its owner's
(read once a push, in its read stage); the Hub bounds a description to 150 characters and a note to 500.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.errors import PublishError
from hubkit.hub.failures import hub_errors
from hubkit.hub.repo_types import RepoType
from hubkit.publish.plan import CollectionItemPlan
from hubkit.publish.push_record import load_sweep_record, save_sweep_record
from hubkit.publish.release_repos import ReleaseRepos
from hubkit.publish.request import PushReport, PushRequest
from hubkit.publish.sweep.page import note_point
from hubkit.publish.sweep.siblings import find_collection, value_key
from hubkit.release.companions import LABELS, SPACE, SWEEP_PAGE
from hubkit.runs import Run
from hubkit.runs.eval_results import EvalSummary
from hubkit.runs.locate import base_differences
from hubkit.runs.manifest import SweepInfo

if TYPE_CHECKING:
    from huggingface_hub import Collection, HfApi

MAX_NOTE_CHARS = 500
PAGE_NOTE = "comparison · every run of the sweep: accuracy against answer length, a table by value, answers side by side"
SPACE_NOTE = "Space · every run of the sweep: pick a run and a checkpoint, it answers beside the base model"


@dataclass(frozen=True)
class SweepItem:
    """One repo of a run for the sweep's Collection."""

    repo_id: str
    repo_type: RepoType
    kind: str  # its companion's label (`hubkit.release.companions`)


def sweep_description(sweep: SweepInfo) -> str:
    return f"Runs of one recipe varying {sweep.setting} (published by hubkit)"[:150]


def run_note(sweep: SweepInfo, kind: str, evaluation: EvalSummary | None) -> str:
    """`{setting}={value} · {kind}: final accuracy … [interval], mean … tokens (step N)`, at most 500 chars."""
    head = f"{sweep.setting}={sweep.value} · {kind}"
    final = evaluation.checkpoints[-1] if evaluation is not None and evaluation.checkpoints else None
    if final is None:
        return f"{head}: not evaluated"[:MAX_NOTE_CHARS]
    low, high = final.ci95
    return (
        f"{head}: final accuracy {final.accuracy:.1%} [{low:.1%}, {high:.1%}] on {final.n} problems, "
        f"mean answer {final.tokens_mean:.0f} tokens (step {final.step})"
    )[:MAX_NOTE_CHARS]


def decide_items(
    collection: Collection,
    notes: dict[tuple[str, str], str],
    may_add: set[tuple[str, str]],
) -> tuple[CollectionItemPlan, ...]:
    """The Collection's changes for a push: each repo of `may_add` it does not hold yet added with its
    note, each noted repo it holds whose note differs brought up to date (a repo the push did not write,
    ``--no-merged``, is never added); nothing when every note is as it should be."""
    present = {(i.item_id, i.item_type): i for i in collection.items}
    changes = []
    for (repo_id, repo_type), note in notes.items():
        item = present.get((repo_id, repo_type))
        if item is None and (repo_id, repo_type) in may_add:
            changes.append(CollectionItemPlan(collection.slug, repo_id, repo_type, note))  # type: ignore[arg-type]
        elif item is not None and item.note != note:
            changes.append(
                CollectionItemPlan(collection.slug, repo_id, repo_type, note, item.item_object_id)  # type: ignore[arg-type]
            )
    return tuple(changes)


def open_collection(
    api: HfApi, sweep: SweepInfo, namespace: str, collection: Collection | None, *, private: bool
) -> tuple[Collection, list[str]]:
    """The sweep's Collection as read, or made now (empty) when the Hub has none: once every check of the
    push has passed, before its commits (the page links it)."""
    if collection is not None:
        return collection, []
    with hub_errors(f"collection {sweep.name}", api.endpoint):
        made = api.create_collection(
            sweep.name, namespace=namespace, description=sweep_description(sweep), private=private
        )
    return made, [f"collection {made.slug}: created"]


def apply_items(api: HfApi, items: Sequence[CollectionItemPlan], endpoint: str | None) -> list[str]:
    """The plan's Collection changes, after its commits: notes updated, then repos added, then every item
    ordered by value when one was added; what changed, one line each.

    Raises:
        HubkitError: the Hub refused or could not be reached (`hub_errors`).
    """
    changes: list[str] = []
    added: Collection | None = None
    if not items:
        return changes
    with hub_errors(f"collection {items[0].collection}", endpoint):
        for item in sorted(items, key=lambda i: i.item_object_id is None):
            if item.item_object_id is not None:
                api.update_collection_item(item.collection, item.item_object_id, note=item.note)
                changes.append(f"collection {item.collection}: note of {item.repo_id} updated")
            else:
                added = api.add_collection_item(item.collection, item.repo_id, item.repo_type, note=item.note)
                changes.append(f"collection {item.collection}: added {item.repo_id}")
        if added is not None:
            _order_by_value(api, added)
    return changes


def join_sweep(
    api: HfApi,
    sweep: SweepInfo,
    items: Sequence[SweepItem],
    evaluation: EvalSummary | None,
    *,
    endpoint: str | None,
    private: bool = False,
    held: Sequence[SweepItem] = (),
) -> tuple[list[str], Collection]:
    """Put repos in the sweep's Collection (made when missing, under the first repo's owner) with their
    notes (`decide_items`, `apply_items`): what a push does in its plan, in one call. Returns what changed
    and the Collection as it is then."""
    namespace = items[0].repo_id.split("/")[0]
    with hub_errors(f"collection {sweep.name}", endpoint):
        found = find_collection(api, namespace, sweep.name)
    collection, changes = open_collection(api, sweep, namespace, found, private=private)
    notes = {(i.repo_id, i.repo_type): run_note(sweep, i.kind, evaluation) for i in (*items, *held)}
    changes += apply_items(
        api, decide_items(collection, notes, {(i.repo_id, i.repo_type) for i in items}), endpoint
    )
    with hub_errors(f"collection {sweep.name}", endpoint):
        return changes, api.get_collection(collection.slug)


def _order_by_value(api: HfApi, collection: Collection) -> None:
    """Move items so that the comparison page comes first, then the runs' repos ordered by the value their
    note starts with, then by kind; items without a hubkit note, or of another owner, keep their place at
    the end."""
    owner = collection.slug.split("/")[0]

    def key(item: object) -> tuple:
        note = getattr(item, "note", None) or ""
        if note in (PAGE_NOTE, SPACE_NOTE):
            return (-1, 0.0, "", int(note == SPACE_NOTE))
        point = note_point(note)
        if point is None or point[1] not in LABELS or item.item_id.split("/")[0] != owner:
            return (2, 0.0, "", 0)
        return (*value_key(point[0]), LABELS.index(point[1]))

    current = list(collection.items)
    wanted = sorted(current, key=key)
    for position, item in enumerate(wanted):
        if current[position].item_object_id != item.item_object_id:
            api.update_collection_item(collection.slug, item.item_object_id, position=position)
            current.remove(item)
            current.insert(position, item)


def in_sweep(run: Run, sweep: SweepInfo | None) -> Run:
    """The run as one point of `sweep` (`hubkit push --sweep`), its manifest saying so where it is
    published and in the cards; the run as it is without one."""
    return run if sweep is None else replace(run, manifest=run.manifest.with_updates(sweep=sweep))


def check_sweep_runs(name: str, run_dirs: Sequence[Path]) -> None:
    """Refuse a sweep whose runs cannot be compared (another base model or revision), as `hubkit eval
    --sweep` refuses it: before any of its runs is pushed.

    Raises:
        PublishError: the first run that differs from the first, naming both and what differs.
    """
    from hubkit.runs.manifest import Manifest

    def base(manifest: Manifest) -> str:
        return manifest.base_model + (
            f"@{manifest.base_model_revision}" if manifest.base_model_revision else ""
        )

    first, *others = [Manifest.load(folder) for folder in run_dirs]
    for other in others:
        differ = base_differences(first, other)
        if differ:
            raise PublishError(
                f"runs {first.run_id} ({base(first)}) and {other.run_id} ({base(other)}) of the sweep {name!r} "
                f"differ in {', '.join(differ)}: a sweep compares runs of one base model, as `hubkit eval "
                "--sweep` does; give the others a sweep of their own (hubkit push --run-id RUN --sweep OTHER)"
            )


def planned_sweep(
    run: Run, adapter_repo: str, run_dir: Path, endpoint: str, space: str | None = None
) -> list[str]:
    """What a push would do for the run's sweep, in words (a dry run's note; nothing without a sweep): the
    commits it plans from the Collection (the page, the sweep's Space `space` when the push writes one, the
    other runs' cards as the last push from this run directory found them), then the Collection's changes."""
    sweep = run.manifest.sweep
    if sweep is None:
        return []
    page = SWEEP_PAGE.sweep_repo_id(adapter_repo.split("/")[0], sweep.name)
    recorded = load_sweep_record(run_dir, endpoint, sweep.name)
    namespace = adapter_repo.split("/")[0]
    cards = [r for r in recorded or () if r not in (page, space, SPACE.sweep_repo_id(namespace, sweep.name))]
    if recorded is None:
        known, commits = "the other runs' cards, as its Collection lists them", "one commit each"
    else:
        known = f"the cards of the {len(cards)} other runs the last push found ({', '.join(cards) or 'none'})"
        commits = f"at most {1 + bool(space) + len(cards)} commits, one each"
    with_space = f", its Space {space} (every run of the sweep)" if space else ""
    return [
        f"the sweep {sweep.name!r}: its comparison page {page}{with_space} and {known} are read from the Hub "
        f"and planned by the push, {commits} where it changes",
        f"the release's repos would join the Hub Collection {sweep.name!r} as {sweep.setting}={sweep.value}",
    ]


def release_items(repos: ReleaseRepos, written: set[str]) -> tuple[list[SweepItem], list[SweepItem]]:
    """The release's repos for its sweep's Collection: those the push writes (`written`), and those it
    leaves as they are (their notes are still brought up to date)."""
    named = repos.named()
    if repos.sweep_space:
        named[SPACE] = None  # the sweep's: one item, listed with its page
    release = [SweepItem(repo_id, c.repo_type, c.label) for c, repo_id in named.items() if repo_id]
    return [i for i in release if i.repo_id in written], [i for i in release if i.repo_id not in written]


def with_sweep(api: HfApi, report: PushReport, request: PushRequest) -> PushReport:
    """The report of a push after its plan's Collection changes were made (`apply_items`), what changed
    added to its notes, and the sweep's repos recorded for a dry run; the report as it is when its plan
    changes no Collection."""
    sweep = report.plan.sweep_repos
    if sweep:
        save_sweep_record(request.run_dir, api.endpoint, report.plan.sweep, sweep)
    changes = apply_items(api, report.plan.collection_items, request.endpoint)
    return replace(report, notes=(*report.notes, *changes)) if changes else report
