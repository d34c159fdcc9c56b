"""What each repo of a push should hold: one builder per repo, all with the same shape.

A builder takes the `BuildContext` (the run, its prepared adapters, each repo's remote state as read
once, the merge if one was made) and returns the repo's `RepoPlan`, or None when this push has nothing
for that repo. Builders only read local files and the context: no network, no heavy work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hubkit.adapters.prepare import PreparedAdapter
from hubkit.cards import BaseModelCard, CardInputs, ChartsDrawnAhead, adapter_card_files, merged_card_files
from hubkit.cards.merge_record import MergeRecord
from hubkit.evaluate.problems import TRAIN_PROBLEM_HASHES_NAME
from hubkit.evaluate.results import EVAL_DIR, RESULTS_NAME, SAMPLES_NAME, EvalResults
from hubkit.hub.hashing import FileHashCache
from hubkit.publish.adapter_repo import (
    RunFiles,
    adapter_bytes_in_repo,
    has_tokenizer,
    plan_adapter_repo,
    steps_in_paths,
)
from hubkit.publish.merge_decision import plan_merged_card
from hubkit.publish.merged_repo import plan_merged_repo
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.remote import RemoteRepo
from hubkit.publish.safety import check_planned_files
from hubkit.runs import Run
from hubkit.space.config import DEFAULT_HARDWARE, SpaceConfig
from hubkit.space.files import space_repo_files

if TYPE_CHECKING:
    from hubkit.merge import MergeResult


@dataclass(frozen=True)
class BuildContext:
    """What the builders of one push read.

    Args:
        run: the run.
        repo_id: the adapter repo.
        adapters: the prepared adapters this push publishes, by step.
        run_files: the files the adapter repo takes from the run, planned and checked.
        remotes: each repo's state before the push, by repo id (for a dry run: the last recorded push).
        base_card: the base model's licence, from its card on the push's Hub.
        hashes: the push's hash cache.
        eval: the run's evaluation (`hubkit eval`), if any.
        merged_repo_id: the merged repo, when this push writes to it (a new merge, or the card of the merge
            it holds).
        merged: the merge this push made, if it made one.
        merge_record: what the merged repo holds after this push (this push's merge, or the one it kept),
            None when the release has no merged repo.
        space_repo_id: the Space repo, when the push publishes one.
        linked_space_id: the release's Space, which the cards link: the one this push publishes, or one
            already on the Hub.
        space_hardware: the Space's suggested hardware (None: ZeroGPU).
        published_merged_repo_id: the merged repo the release has (or gets), whether or not this push
            merges (the Space names it).
        private: create new repos private.
        token: the token in use, so that a file containing it is refused (never published).
        charts: the adapter card's charts, drawn while the push did other work.
    """

    run: Run
    repo_id: str
    adapters: tuple[PreparedAdapter, ...]
    run_files: RunFiles
    remotes: dict[str, RemoteRepo]
    base_card: BaseModelCard
    hashes: FileHashCache
    eval: EvalResults | None = None
    merged_repo_id: str | None = None
    merged: MergeResult | None = None
    merge_record: MergeRecord | None = None
    space_repo_id: str | None = None
    linked_space_id: str | None = None
    space_hardware: str | None = None
    published_merged_repo_id: str | None = None
    private: bool = False
    token: str | None = field(default=None, repr=False)
    charts: ChartsDrawnAhead | None = None

    def published_steps(self) -> tuple[int, ...]:
        """The checkpoint steps the adapter repo held before this push."""
        remote = self.remotes.get(self.repo_id)
        return steps_in_paths(remote.files) if remote is not None else ()

    def card_inputs(self) -> CardInputs:
        """What the cards say about this push: every step in the repo afterwards, with its size."""
        remote = self.remotes.get(self.repo_id)
        sizes = adapter_bytes_in_repo(remote.files) if remote is not None else {}
        sizes.update({a.step: a.size for a in self.adapters})
        newest = self.adapters[-1].step
        record = self.merge_record
        return CardInputs(
            run=self.run,
            repo_id=self.repo_id,
            steps=tuple(sorted(sizes)),
            base=self.base_card,
            adapter_bytes=sizes,
            has_tokenizer=has_tokenizer(self.run, newest),
            merged_repo_id=self.published_merged_repo_id if record is not None else None,
            merged_step=record.step if record is not None else None,
            eval=self.eval,
            space_repo_id=self.linked_space_id,
        )


def build_adapter_repo(context: BuildContext) -> RepoPlan:
    return plan_adapter_repo(
        context.run,
        context.repo_id,
        context.run_files,
        private=context.private,
        token=context.token,
        published_steps=context.published_steps(),
        card_files={**adapter_card_files(context.card_inputs(), context.charts), **eval_files(context)},
    )


def eval_files(context: BuildContext) -> dict[str, bytes]:
    """The run's evaluation results and its training-problem hashes, as the run directory holds them."""
    run_dir = context.run.run_dir
    paths = [f"{EVAL_DIR}/{RESULTS_NAME}", f"{EVAL_DIR}/{SAMPLES_NAME}", TRAIN_PROBLEM_HASHES_NAME]
    if context.eval is None:
        paths = paths[2:]
    return {path: (run_dir / path).read_bytes() for path in paths if (run_dir / path).is_file()}


def build_merged_repo(context: BuildContext) -> RepoPlan | None:
    record = context.merge_record
    if context.merged_repo_id is None or record is None:
        return None
    card = merged_card_files(context.card_inputs(), record)
    if context.merged is None:  # it holds this merge already: only its card is refreshed
        return plan_merged_card(
            context.run, context.merged_repo_id, card, private=context.private, token=context.token
        )
    return plan_merged_repo(
        context.run,
        context.merged_repo_id,
        record.step,
        context.merged,
        card,
        hashes=context.hashes,
        private=context.private,
        token=context.token,
    )


def build_space_repo(context: BuildContext) -> RepoPlan | None:
    """The Space comparing the base model with every checkpoint (`spaces/compare`, configured for the run)."""
    if context.space_repo_id is None:
        return None
    config = SpaceConfig.from_run(
        context.run,
        context.repo_id,
        merged_repo_id=context.published_merged_repo_id,
        space_repo_id=context.space_repo_id,
        hardware=context.space_hardware or DEFAULT_HARDWARE,
    )
    files = [
        PlannedFile.from_bytes(path, content) for path, content in sorted(space_repo_files(config).items())
    ]
    check_planned_files(files, context.run.run_dir, context.token)
    return RepoPlan(
        repo_id=context.space_repo_id,
        files=tuple(files),
        repo_type="space",
        space_sdk="gradio",
        private=context.private,
        title=f"hubkit push {context.run.manifest.run_id} (Space)",
    )


RepoBuilder = Callable[[BuildContext], RepoPlan | None]
# In commit order: the adapter repo first, so that the repos the others name exist when they arrive.
BUILDERS: tuple[RepoBuilder, ...] = (build_adapter_repo, build_merged_repo, build_space_repo)


def build_repos(context: BuildContext) -> tuple[RepoPlan, ...]:
    """Every repo's desired files for this push, in commit order."""
    plans = (builder(context) for builder in BUILDERS)
    return tuple(plan for plan in plans if plan is not None)
