"""What a push reads from the Hub before it builds anything: every repo's state and every checkpoint
branch's (one request each, all at once; the step branches listed first, in one call, and only those
that exist read), the base model's config (for the check against the base) and
card (its licence), and the run's sweep: its Collection (read once), comparison page, other runs'
evaluations and cards (`hubkit.publish.sweep.reads`)."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from huggingface_hub import HfApi

from hubkit.adapters.base_check import BaseConfig
from hubkit.cards import BaseModelCard, read_base_model_card
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteRepo, branch_names, read_remote
from hubkit.hub.repo_types import RepoType
from hubkit.publish.benchmark_results import BenchmarkTask, read_benchmark_tasks
from hubkit.publish.sweep.reads import SweepReads, read_sweep
from hubkit.runs import Run


@dataclass(frozen=True)
class HubReads:
    """Every repo's and branch's state, and the base model's config and card, those two still arriving."""

    remotes: dict[str, RemoteRepo]
    branches: dict[str, RemoteRepo]  # the adapter repo's checkpoint branches, by name
    base_card: Future[BaseModelCard]
    base_config: Future[BaseConfig]
    benchmark_tasks: tuple[BenchmarkTask, ...] = ()  # of the benchmark the run was evaluated on
    sweep: SweepReads | None = None  # the run's sweep: its Collection, page, other runs and their cards


def read_hub(
    api: HfApi,
    run: Run,
    repos: list[tuple[str, RepoType]],
    branches: list[str],
    known_base_card: BaseModelCard | None = None,
    benchmark: str | None = None,
) -> HubReads:
    """Each repo's state, read at once (one request each), with the base model's config and card; the
    card's read goes on while the adapters are checked against the base.

    Args:
        api: the push's client.
        run: the run (its manifest names the base model).
        repos: (repo id, type) of each repo the push may write; the first is the adapter repo.
        branches: the adapter repo's branches the push may write.
        known_base_card: the base's card when an earlier push of the same session read it.
        benchmark: the dataset the run was evaluated on, when its whole split was: its ``eval.yaml`` is read.

    Returns:
        The reads; the base's config and card as futures.

    Raises:
        HubkitError: a repo cannot be read (as `hubkit.hub.failures.hub_errors` says).
    """

    def read(repo_id: str, repo_type: RepoType, revision: str = "main") -> RemoteRepo:
        with hub_errors(repo_id, api.endpoint):
            return read_remote(api, repo_id, repo_type, revision)

    manifest = run.manifest
    adapter_repo = repos[0][0]
    pool = ThreadPoolExecutor(
        max_workers=min(len(repos) + len(branches) + 4, 16), thread_name_prefix="hubkit-read"
    )
    try:
        card: Future[BaseModelCard] = Future()
        if known_base_card is not None:
            card.set_result(known_base_card)
        else:
            card = pool.submit(
                read_base_model_card,
                manifest.base_model,
                manifest.base_model_revision,
                endpoint=api.endpoint,
                token=api.token,
            )
        config = pool.submit(
            BaseConfig.download,
            manifest.base_model,
            manifest.base_model_revision,
            endpoint=api.endpoint,
            token=api.token,
        )
        reads = {repo_id: pool.submit(read, repo_id, repo_type) for repo_id, repo_type in repos}
        existing = branch_names(api, adapter_repo) if branches else frozenset()
        absent = RemoteRepo(repo_id=adapter_repo, head_sha=None)
        branch_reads = {n: pool.submit(read, adapter_repo, "model", n) for n in branches if n in existing}
        tasks = (
            pool.submit(read_benchmark_tasks, benchmark, endpoint=api.endpoint, token=api.token)
            if benchmark is not None
            else None
        )
        sweep = pool.submit(read_sweep, api, run, adapter_repo)
        remotes = {repo_id: future.result() for repo_id, future in reads.items()}
        swept = sweep.result()
        return HubReads(
            remotes={**(swept.remotes if swept is not None else {}), **remotes},
            branches={n: branch_reads[n].result() if n in branch_reads else absent for n in branches},
            base_card=card,
            base_config=config,
            benchmark_tasks=tasks.result() if tasks is not None else (),
            sweep=swept,
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
