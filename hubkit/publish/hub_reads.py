"""What a push reads from the Hub before it builds anything (`HubState`, the read stage's record): every repo's state and every checkpoint
branch's (one request each, all at once; the step branches listed first, in one call, and only those
that exist read), the base model's config (for the check against the base) and
card (its licence), and the run's sweep: its Collection (read once), comparison page, other runs'
evaluations and cards (`hubkit.publish.sweep.reads`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from huggingface_hub import HfApi

from hubkit.adapters.base_check import BaseConfig
from hubkit.cards import BaseModelCard, read_base_model_card
from hubkit.cards.sweep_siblings import SweepSibling
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteRepo, branch_names, read_remote
from hubkit.hub.repo_types import RepoType
from hubkit.publish.benchmark_results import BenchmarkTask, read_benchmark_tasks
from hubkit.publish.release_repos import ReleaseRepos
from hubkit.publish.sweep.reads import SweepReads, read_sweep
from hubkit.runs import Run


@dataclass(frozen=True)
class HubState:
    """The release's repos and checkpoint branches as the Hub holds them, and the base model's config and
    card (`read_hub`); or, for a dry run, as the run directory's push records say (no client, the base's
    config and card as the client's cache holds them: `PushSession._recorded_hub`)."""

    api: HfApi | None
    repos: ReleaseRepos
    remotes: dict[str, RemoteRepo]
    branches: dict[str, RemoteRepo]  # the adapter repo's checkpoint branches, by name
    base_config: BaseConfig | None
    base_card: BaseModelCard
    benchmark_tasks: tuple[BenchmarkTask, ...] = ()  # of the benchmark the run was evaluated on
    sweep: SweepReads | None = None  # the run's sweep: its Collection, page, other runs and their cards

    @property
    def sweep_siblings(self) -> tuple[SweepSibling, ...]:
        """The other runs of the run's sweep, as its Collection lists them (its card lists them)."""
        return self.sweep.siblings if self.sweep is not None else ()


def read_hub(
    api: HfApi,
    run: Run,
    repos: ReleaseRepos,
    branches: list[str],
    known_base_card: BaseModelCard | None = None,
    benchmark: str | None = None,
) -> HubState:
    """Each repo's state, read at once (one request each: the release's, and those this push does not
    write, which the cards link while they exist), with the base model's config and card.

    Args:
        branches: the adapter repo's branches the push may write.
        known_base_card: the base's card when an earlier push of the same session read it.
        benchmark: the dataset the run was evaluated on, when its whole split was: its ``eval.yaml`` is read.

    Raises:
        HubkitError: a repo cannot be read (as `hubkit.hub.failures.hub_errors` says).
    """

    def read(repo_id: str, repo_type: RepoType, revision: str = "main") -> RemoteRepo:
        with hub_errors(repo_id, api.endpoint):
            return read_remote(api, repo_id, repo_type, revision)

    manifest, adapter_repo = run.manifest, repos.adapter
    reads: list[tuple[str, RepoType]] = [
        (repos.adapter, "model"),
        (repos.merged, "model"),
        (repos.gguf, "model"),
    ]
    reads += [(repos.linked_space, "space")] + ([(repos.samples, "dataset")] if repos.samples else [])
    pool = ThreadPoolExecutor(
        max_workers=min(len(reads) + len(branches) + 4, 16), thread_name_prefix="hubkit-read"
    )
    try:
        card = pool.submit(
            lambda: (
                known_base_card
                or read_base_model_card(
                    manifest.base_model, manifest.base_model_revision, endpoint=api.endpoint, token=api.token
                )
            )
        )
        config = pool.submit(
            BaseConfig.download,
            manifest.base_model,
            manifest.base_model_revision,
            endpoint=api.endpoint,
            token=api.token,
        )
        repo_reads = {repo_id: pool.submit(read, repo_id, repo_type) for repo_id, repo_type in reads}
        existing = branch_names(api, adapter_repo) if branches else frozenset()
        absent = RemoteRepo(repo_id=adapter_repo, head_sha=None)
        branch_reads = {n: pool.submit(read, adapter_repo, "model", n) for n in branches if n in existing}
        tasks = (
            pool.submit(read_benchmark_tasks, benchmark, endpoint=api.endpoint, token=api.token)
            if benchmark is not None
            else None
        )
        sweep = pool.submit(read_sweep, api, run, adapter_repo)
        remotes = {repo_id: future.result() for repo_id, future in repo_reads.items()}
        swept = sweep.result()
        return HubState(
            api=api,
            repos=repos,
            remotes={**(swept.remotes if swept is not None else {}), **remotes},
            branches={n: branch_reads[n].result() if n in branch_reads else absent for n in branches},
            base_card=card.result(),
            base_config=config.result(),
            benchmark_tasks=tasks.result() if tasks is not None else (),
            sweep=swept,
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
