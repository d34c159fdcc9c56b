"""A run's place in its sweep: the Hub Collection named for the sweep holds every run's repos, each with a
note giving the run's varied value, its final accuracy and its mean answer length.

    report = with_sweep(api, report, repos, local, request)   # after the run's push

The sweep is the one the run's manifest records (the recipes' `--sweep`), or the request's
(`hubkit push --sweep NAME --sweep-value SETTING=VALUE`, for runs of one's own scripts: `in_sweep` puts it in
the run's manifest as published).

Each run's push adds its own repos, so the Collection grows as runs are pushed, one after another or as
each finishes; the items stay ordered by the varied value (numbers as numbers), after the sweep's
comparison page (`hubkit.publish.sweep.page`), which each push rebuilds from every run's published
evaluation; then every other run's card gets its list of the sweep's runs rewritten
(`hubkit.publish.sweep.siblings`). Only what differs is
written: a push of an unchanged run makes no call that changes the Collection. The Collection is found by
its title among its owner's; the Hub bounds a description to 150 characters and a note to 500.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.errors import PublishError
from hubkit.evaluate.results import EvalSummary
from hubkit.hub.failures import hub_errors
from hubkit.hub.repo_types import HUB_ENDPOINT
from hubkit.publish.push_stages import Prepared
from hubkit.publish.release_repos import ReleaseRepos
from hubkit.publish.request import PushReport, PushRequest
from hubkit.publish.sweep.page import KIND_ORDER, note_point, page_files, publish_page, read_sweep_runs
from hubkit.publish.sweep.siblings import find_collection, update_sibling_cards, value_key
from hubkit.release.layout import sweep_page_repo_id
from hubkit.runs import Run
from hubkit.runs.locate import base_differences
from hubkit.runs.manifest import SweepInfo

if TYPE_CHECKING:
    from huggingface_hub import Collection, HfApi

MAX_NOTE_CHARS = 500
PAGE_NOTE = "comparison · every run of the sweep: accuracy against answer length, a table by value, answers side by side"


@dataclass(frozen=True)
class SweepItem:
    """One repo of a run for the sweep's Collection."""

    repo_id: str
    repo_type: str  # "model", "dataset" or "space"
    kind: str  # one of KIND_ORDER


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
    """Put a run's repos in the sweep's Collection (made when missing, under the adapter repo's owner) with
    their notes, every item ordered by the varied value; return what changed, one line each, and the
    Collection as it is now. `held`: the release's repos this push did not write (``--no-merged``): their
    notes are brought up to date where the Collection holds them, and they are never added.

    Raises:
        HubkitError: the Hub refused or could not be reached (`hub_errors`).
    """
    namespace = items[0].repo_id.split("/")[0]
    notes = {(i.repo_id, i.repo_type): run_note(sweep, i.kind, evaluation) for i in (*items, *held)}
    may_add = {(i.repo_id, i.repo_type) for i in items}
    changes: list[str] = []
    with hub_errors(f"collection {sweep.name}", endpoint):
        collection = find_collection(api, namespace, sweep.name)
        if collection is None:
            collection = api.create_collection(
                sweep.name, namespace=namespace, description=sweep_description(sweep), private=private
            )
            changes.append(f"collection {collection.slug}: created")
        present = {(i.item_id, i.item_type): i for i in collection.items}
        for key, note in notes.items():
            if key not in present and key in may_add:
                api.add_collection_item(collection.slug, key[0], key[1], note=note)
                changes.append(f"collection {collection.slug}: added {key[0]}")
            elif key in present and present[key].note != note:
                api.update_collection_item(collection.slug, present[key].item_object_id, note=note)
                changes.append(f"collection {collection.slug}: note of {key[0]} updated")
        if changes:
            collection = _order_by_value(api, api.get_collection(collection.slug))
    return changes, collection


def _order_by_value(api: HfApi, collection: Collection) -> Collection:
    """Move items so that the comparison page comes first, then the runs' repos ordered by the value their
    note starts with, then by kind; items without a hubkit note, or of another owner, keep their place at
    the end. Returns the Collection as it is then."""
    owner = collection.slug.split("/")[0]

    def key(item: object) -> tuple:
        note = getattr(item, "note", None) or ""
        if note == PAGE_NOTE:
            return (-1, 0.0, "", 0)
        point = note_point(note)
        if point is None or point[1] not in KIND_ORDER or item.item_id.split("/")[0] != owner:
            return (2, 0.0, "", 0)
        return (*value_key(point[0]), KIND_ORDER.index(point[1]))

    current = list(collection.items)
    wanted = sorted(current, key=key)
    moved = False
    for position, item in enumerate(wanted):
        if current[position].item_object_id != item.item_object_id:
            api.update_collection_item(collection.slug, item.item_object_id, position=position)
            current.remove(item)
            current.insert(position, item)
            moved = True
    return api.get_collection(collection.slug) if moved else collection


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


def planned_sweep(run: Run) -> list[str]:
    """What a push would do for the run's sweep, in words (a dry run's note; nothing without a sweep)."""
    sweep = run.manifest.sweep
    if sweep is None:
        return []
    return [
        f"the release's repos would join the Hub Collection {sweep.name!r} as {sweep.setting}={sweep.value}"
    ]


def with_sweep(
    api: HfApi, report: PushReport, repos: ReleaseRepos, local: Prepared, request: PushRequest
) -> PushReport:
    """The report of a push whose run belongs to a sweep, after its repos joined the sweep's Collection
    (`join_sweep`) and the comparison page was rebuilt (what changed added to its notes); the report as it
    is for a run of no sweep."""
    sweep = local.run.manifest.sweep
    if sweep is None:
        return report
    pushed = {r.repo_id for r in report.repos if r.revision == "main"}
    kinds = zip(
        KIND_ORDER,
        (repos.adapter, repos.merged, repos.gguf, repos.space or repos.linked_space, repos.samples),
        strict=True,
    )
    types = {"Space": "space", "samples": "dataset"}
    release = [SweepItem(repo_id, types.get(kind, "model"), kind) for kind, repo_id in kinds if repo_id]
    summary = local.evaluation.summary if local.evaluation is not None else None
    changes, collection = join_sweep(
        api,
        sweep,
        [i for i in release if i.repo_id in pushed],
        summary,
        endpoint=request.endpoint,
        private=request.private,
        held=[i for i in release if i.repo_id not in pushed],
    )
    changes += _comparison_page(api, sweep, collection, local, request)
    changes += update_sibling_cards(api, collection, sweep.setting, f"{sweep.value}", local.vetter)
    return replace(report, notes=(*report.notes, *changes))


def _comparison_page(
    api: HfApi, sweep: SweepInfo, collection: Collection, local: Prepared, request: PushRequest
) -> list[str]:
    """Rebuild the sweep's comparison page from every run's published evaluation, and list it first in the
    Collection; what changed, in words."""
    page = sweep_page_repo_id(collection.slug.split("/")[0], sweep.name)
    with hub_errors(f"collection {sweep.name}", request.endpoint):
        runs, left_out = read_sweep_runs(collection, endpoint=request.endpoint, token=local.token)
    url = f"{HUB_ENDPOINT}/collections/{collection.slug}"
    files = page_files(sweep.name, sweep.setting, url, runs, left_out)
    committed = publish_page(api, page, files, local.vetter, private=request.private)
    changes = [] if committed.unchanged else [f"{page}: comparison page committed {committed.commit_sha}"]
    if page not in {item.item_id for item in collection.items}:
        with hub_errors(f"collection {sweep.name}", request.endpoint):
            api.add_collection_item(collection.slug, page, "dataset", note=PAGE_NOTE)
            _order_by_value(api, api.get_collection(collection.slug))
        changes.append(f"collection {collection.slug}: added {page}")
    return changes
