"""What each stage of a push hands to the next (`hubkit.publish.push.PushSession`): what was prepared on
this machine, the release as the Hub holds it, and every decision taken before any repo is created."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from huggingface_hub import HfApi

from hubkit.adapters.base_check import BaseConfig
from hubkit.adapters.prepare import PreparedAdapter
from hubkit.cards import BaseModelCard
from hubkit.cards.sweep_siblings import SweepSibling
from hubkit.evaluate.results import EvalResults
from hubkit.publish.adapter_repo import RunFiles
from hubkit.publish.benchmark_results import BenchmarkTask
from hubkit.publish.gguf_repo import GGUFDecision
from hubkit.publish.merge_decision import MergeDecision
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.release_repos import ReleaseRepos
from hubkit.publish.remote import RemoteRepo
from hubkit.publish.vetted import Vetter
from hubkit.runs import Run
from hubkit.runs.completions import Completions
from hubkit.safety import CheckpointsTree

if TYPE_CHECKING:
    from hubkit.merge import MergePlan


@dataclass(frozen=True)
class Prepared:
    """What the push read and prepared on this machine (`PushSession._prepare_locally`)."""

    run: Run
    tree: CheckpointsTree
    token: str | None
    vetter: Vetter
    adapters: list[PreparedAdapter]
    run_files: RunFiles
    evaluation: EvalResults | None
    completions: Completions  # the training completions the framework saved (none with --no-samples)


@dataclass(frozen=True)
class Remote:
    """The release's repos and checkpoint branches as the Hub holds them, and the base model's config and
    card (`_read_remote`); or, for a dry run, as the run directory's push records say (`_recorded_remote`:
    no client, no base config, a base card without a licence)."""

    api: HfApi | None
    repos: ReleaseRepos
    remotes: dict[str, RemoteRepo]
    branches: dict[str, RemoteRepo]  # by branch name
    base_config: BaseConfig | None
    base_card: Future[BaseModelCard]
    benchmark_tasks: tuple[BenchmarkTask, ...] = ()  # the evaluation's benchmark, read from the Hub
    sweep_siblings: tuple[SweepSibling, ...] = ()  # the other runs of the run's sweep, read from the Hub


@dataclass(frozen=True)
class Decided:
    """Every decision of the push, taken before any repo is created (`_decide`)."""

    notes: list[str]
    base_revision: str | None
    merging: MergeDecision
    gguf: GGUFDecision
    space_files: tuple[PlannedFile, ...]
    to_merge: PreparedAdapter | None
    merge_plan: MergePlan | None
    base_card: BaseModelCard
    branches: tuple[RepoPlan, ...]
    samples_files: tuple[PlannedFile, ...] = ()  # the samples dataset's, vetted
