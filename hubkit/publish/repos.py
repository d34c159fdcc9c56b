"""What each repo of a push should hold: one builder per repo, all with the same shape.

A builder takes the `BuildContext` (the run, its prepared adapters, each repo's remote state as read
once, the merge if one was made) and returns the repo's `RepoPlan`, or None when this push has nothing
for that repo. Builders only read local files and the context: no network, no heavy work. What the run
gives was vetted before any repo was created (the run's files, the Space's); what a builder makes
from it (the cards) is vetted as it is planned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hubkit.adapters.prepare import PreparedAdapter
from hubkit.cards import (
    BaseModelCard,
    CardInputs,
    adapter_card_files,
    gguf_card_files,
    merged_card_files,
)
from hubkit.cards.gguf_record import GGUFRecord
from hubkit.cards.merge_record import MergeRecord
from hubkit.hub.hashing import FileHashCache
from hubkit.hub.remote import RemoteRepo
from hubkit.publish.adapter_repo import RunFiles
from hubkit.publish.benchmark_results import BenchmarkTask, eval_results_files
from hubkit.publish.gguf_repo import plan_gguf_repo
from hubkit.publish.merge_decision import plan_merged_card
from hubkit.publish.merged_repo import plan_merged_repo
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.release_repos import ReleaseLinks, ReleaseRepos, release_card_inputs
from hubkit.publish.vetted import Vetter
from hubkit.runs import Run
from hubkit.runs.eval_results import EvalResults
from hubkit.safety import kinds
from hubkit.space.config import DEFAULT_HARDWARE, SpaceConfig
from hubkit.space.files import space_repo_files

if TYPE_CHECKING:
    from hubkit.merge import MergeResult


@dataclass(frozen=True)
class BuildContext:
    """What the builders of one push read: the run, its prepared adapters and files (planned and vetted),
    each repo's state before the push (a dry run: as the last recorded push left it), what executing the
    decisions made, and what the cards link of the release's other repos after this push."""

    run: Run
    repos: ReleaseRepos
    adapters: tuple[PreparedAdapter, ...]  # this push's, by step
    run_files: RunFiles
    adapter_files: RepoPlan  # the adapter repo's plan but its card (`plan_adapter_repo`)
    remotes: dict[str, RemoteRepo]  # by repo id
    base_card: BaseModelCard  # its licence: the cards' one input not from the run, vetted
    hashes: FileHashCache
    vetter: Vetter  # the cards are vetted as they are planned
    links: ReleaseLinks
    eval: EvalResults | None = None
    benchmark_tasks: tuple[BenchmarkTask, ...] = ()  # of the benchmark it was evaluated on
    writes_merged: bool = False  # a new merge, or the card of the merge the merged repo holds
    merged: MergeResult | None = None  # the merge this push made
    merge_record: MergeRecord | None = None  # what the merged repo holds after this push
    space_files: tuple[PlannedFile, ...] = ()  # vetted before any repo existed; a sweep's: with its repos
    writes_gguf: bool = False  # new files, or the card of those it holds
    gguf_files: tuple[PlannedFile, ...] = ()  # exported by this push, vetted
    gguf_record: GGUFRecord | None = None  # what the GGUF repo holds after this push
    samples_files: tuple[PlannedFile, ...] = ()  # vetted (none: the push does not write the dataset)
    private: bool = False  # create new repos private

    def card_inputs(self) -> CardInputs:
        """What the cards say about this push: every step in the repo afterwards, with its size."""
        remote = self.remotes.get(self.repos.adapter)
        return release_card_inputs(
            self.run,
            self.repos.adapter,
            remote.files if remote is not None else {},
            base=self.base_card,
            has_tokenizer=bool(self.run_files.tokenizer),
            # The adapter card's "Verified" line: the check of the merge the merged repo holds after this push.
            links=replace(
                self.links, merged_verified=record.verified if (record := self.merge_record) else None
            ),
            eval=self.eval,
            adapters=self.adapters,
        )


def vet_base_card(card: BaseModelCard, vetter: Vetter) -> BaseModelCard:
    """The base model's licence, as its card on the Hub states it, vetted as card text: everything else the
    cards say comes from the run's files, vetted before any repo is created, and so does this.

    Raises:
        UnsafeFileError: the licence's name or link holds a secret or a local path.
    """
    text = "\n".join(v for v in (card.license, card.license_name, card.license_link) if v is not None)
    vetter.data(
        "README.md", kinds.CARD, text.encode(), label=f"the licence on the card of base model {card.repo_id}"
    )
    return card


def build_adapter_repo(context: BuildContext) -> RepoPlan:
    inputs = context.card_inputs()
    card = adapter_card_files(inputs)
    card |= eval_results_files(
        context.eval, context.benchmark_tasks, step_on_main=inputs.root_step, repo_id=context.repos.adapter
    )
    plan = context.adapter_files
    return replace(plan, files=(*plan.files, *context.vetter.generated(card, "model", context.hashes)))


def build_merged_repo(context: BuildContext) -> RepoPlan | None:
    record = context.merge_record
    if not context.writes_merged or record is None:
        return None
    repo_id = context.repos.merged
    card = context.vetter.generated(merged_card_files(context.card_inputs(), record), "model", context.hashes)
    if context.merged is None:  # it holds this merge already: only its card is refreshed
        return plan_merged_card(context.run, repo_id, card, private=context.private)
    return plan_merged_repo(
        context.run,
        repo_id,
        record.step,
        context.merged,
        card,
        run_files=context.run_files,
        vetter=context.vetter,
        hashes=context.hashes,
        private=context.private,
    )


def build_gguf_repo(context: BuildContext) -> RepoPlan | None:
    """The GGUF files of the merged model and their card, when this push exports or refreshes them."""
    record = context.gguf_record
    if not context.writes_gguf or record is None:
        return None
    card = gguf_card_files(context.card_inputs(), record, context.repos.gguf)
    return plan_gguf_repo(
        context.run,
        context.repos.gguf,
        context.gguf_files,
        context.vetter.generated(card, "model", context.hashes),
        private=context.private,
    )


def plan_space_files(
    run: Run,
    repo_id: str,
    *,
    merged_repo_id: str | None,
    space_repo_id: str,
    hardware: str | None,
    vetter: Vetter,
    hashes: FileHashCache,
) -> tuple[PlannedFile, ...]:
    """The Space's files (`spaces/compare`, configured for the run: the adapter repo, the merged repo it
    has or gets, the Space's suggested hardware, None: ZeroGPU), vetted: made before any repo is created,
    since everything they say is known by then.

    Raises:
        SpaceError: a package the Space pins is not installed.
        UnsafeFileError: a file that must not be published (its configuration holds a secret or a path).
    """
    config = SpaceConfig.from_run(
        run,
        repo_id,
        merged_repo_id=merged_repo_id,
        space_repo_id=space_repo_id,
        hardware=hardware or DEFAULT_HARDWARE,
    )
    return vetter.generated(space_repo_files(config), "space", hashes)


def space_repo_plan(repo_id: str, files: tuple[PlannedFile, ...], *, private: bool, title: str) -> RepoPlan:
    """A comparison Space's plan (a Gradio Space), from its files vetted earlier."""
    return RepoPlan(
        repo_id=repo_id, files=files, repo_type="space", space_sdk="gradio", private=private, title=title
    )


def build_space_repo(context: BuildContext) -> RepoPlan | None:
    """The Space comparing the base model with every checkpoint, from its files vetted earlier; a sweep's
    Space is planned with the sweep's repos (`hubkit.publish.sweep.plans`)."""
    if context.repos.space is None or context.repos.sweep_space:
        return None
    title = f"hubkit push {context.run.manifest.run_id} (Space)"
    return space_repo_plan(context.repos.space, context.space_files, private=context.private, title=title)


def build_samples_repo(context: BuildContext) -> RepoPlan | None:
    """The samples dataset (every evaluated answer, the training completions), from its files vetted earlier."""
    if context.repos.samples is None or not context.samples_files:
        return None
    return RepoPlan(
        repo_id=context.repos.samples,
        files=context.samples_files,
        repo_type="dataset",
        private=context.private,
        title=f"hubkit push {context.run.manifest.run_id} (samples)",
    )


RepoBuilder = Callable[[BuildContext], RepoPlan | None]
# In commit order: the adapter repo first, so that the repos the others name exist when they arrive.
BUILDERS: tuple[RepoBuilder, ...] = (
    build_adapter_repo,
    build_merged_repo,
    build_gguf_repo,
    build_space_repo,
    build_samples_repo,
)


def build_repos(context: BuildContext) -> tuple[RepoPlan, ...]:
    """Every repo's desired files for this push, in commit order."""
    plans = (builder(context) for builder in BUILDERS)
    return tuple(plan for plan in plans if plan is not None)
