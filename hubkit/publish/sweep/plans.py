"""A sweep's part of a push's plan, decided with the rest from what the read stage read of it
(`hubkit.publish.sweep.reads`): the comparison page, the sweep's Space (`hubkit.publish.sweep.space`) and
every sibling run's card as repo plans, committed by the one commit path after the release's repos, and the
Collection's changes, made after the commits.

The Collection as it will be after the push is the one read, with this push's repos and notes in it: the
page compares every run of it (this run's evaluation as it is about to be published), and each sibling's
card lists the others. What is unchanged makes no commit and no call that writes."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hubkit.hub.hashing import FileHashCache
from hubkit.hub.repo_types import HUB_ENDPOINT
from hubkit.publish.plan import PlannedFile, PushPlan, RepoPlan
from hubkit.publish.release_repos import ReleaseRepos
from hubkit.publish.repos import space_repo_plan
from hubkit.publish.sweep.collection import (
    PAGE_NOTE,
    SPACE_NOTE,
    decide_items,
    open_collection,
    release_items,
    run_note,
)
from hubkit.publish.sweep.page import PublishedRun, compared_runs, page_files, plan_page
from hubkit.publish.sweep.reads import SweepReads
from hubkit.publish.sweep.siblings import plan_card, siblings_of, sweep_runs, value_key
from hubkit.publish.vetted import Vetter
from hubkit.release.companions import ADAPTER

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.publish.hub_reads import HubState
    from hubkit.publish.push_stages import Prepared
    from hubkit.runs.eval_results import EvalResults


def with_sweep_plan(
    plan: PushPlan,
    hub: HubState,
    prepared: Prepared,
    space_files: tuple[PlannedFile, ...],
    private: bool,
) -> tuple[PushPlan, list[str]]:
    """`plan_sweep` for a push whose run belongs to a sweep, with the sweep's Space's files planned in the
    decide stage; `plan` as it is (and no notes) for a run of no sweep."""
    if hub.sweep is None or hub.api is None:
        return plan, []
    repos, reads = hub.repos, hub.sweep
    space = None
    if repos.space is not None and repos.sweep_space and space_files:  # None: refused, or --no-space
        title = f"hubkit sweep {reads.sweep.name} (Space)"
        space = space_repo_plan(repos.space, space_files, private=private, title=title)
    return plan_sweep(
        hub.api, plan, reads, repos, prepared.evaluation, prepared.vetter, private=private, space=space
    )


def plan_sweep(
    api: HfApi,
    plan: PushPlan,
    reads: SweepReads,
    repos: ReleaseRepos,
    evaluation: EvalResults | None,
    vetter: Vetter,
    *,
    private: bool,
    space: RepoPlan | None = None,
) -> tuple[PushPlan, list[str]]:
    """`plan` with the sweep's page, its Space (`space`, when the push writes it) and sibling cards after
    its repos, and its Collection changes; and notes (the Collection made now, a sibling card left as it is). The Collection is made here when the
    Hub has none (the page links it): once every check of the push has passed."""
    sweep, value = reads.sweep, f"{reads.sweep.value}"
    collection, notes = open_collection(api, sweep, reads.namespace, reads.collection, private=private)
    notes += reads.notes
    pushed, held = release_items(repos, {r.repo_id for r in plan.repos})
    summary = evaluation.summary if evaluation is not None else None
    own = {(i.repo_id, i.repo_type): run_note(sweep, i.kind, summary) for i in (*pushed, *held)}
    present = {(i.item_id, i.item_type) for i in collection.items}
    joined = [
        (r, t, note) for (r, t), note in own.items() if (r, t) in present or r in {i.repo_id for i in pushed}
    ]
    after = sweep_runs(collection, joined)

    others = [r for r in reads.published if r.repo_id]
    runs = sorted(
        [*others, PublishedRun(repos.adapter, value, evaluation, f"{repos.adapter}: not evaluated")],
        key=lambda r: value_key(r.value),
    )
    compared, left_out = compared_runs([*runs, *(r for r in reads.published if not r.repo_id)])
    url = f"{HUB_ENDPOINT}/collections/{collection.slug}"
    space_id = repos.space if repos.sweep_space else None  # None: refused, or --no-space
    files = page_files(sweep.name, sweep.setting, url, compared, left_out, space_id)
    sweep_repos: list[RepoPlan] = [plan_page(reads.page_id, files, vetter, FileHashCache(), private=private)]
    sweep_repos += [space] if space is not None else []
    values = {r.repo_id: run.value for run in after for r in run.repos if r.kind == ADAPTER.label}
    for repo_id, card in reads.cards.items():
        if repo_id not in values:
            continue
        card_plan, note = plan_card(card, sweep.setting, siblings_of(values[repo_id], after), vetter)
        sweep_repos += [card_plan] if card_plan is not None else []
        notes += [note] if note else []

    wanted = {**own, (reads.page_id, "dataset"): PAGE_NOTE}
    may_add = {(i.repo_id, i.repo_type) for i in pushed} | {(reads.page_id, "dataset")}
    if space is not None:  # the sweep's one Space, listed beside its page
        wanted[(space.repo_id, "space")] = SPACE_NOTE
        may_add.add((space.repo_id, "space"))
    items = decide_items(collection, wanted, may_add)
    ids = tuple(r.repo_id for r in sweep_repos)
    return replace(
        plan, repos=(*plan.repos, *sweep_repos), collection_items=items, sweep=sweep.name, sweep_repos=ids
    ), notes
