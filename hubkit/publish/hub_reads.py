"""What a push reads from the Hub before it builds anything: every repo's state (one request each, all at
once), and the base model's config (for the check against the base) and card (its licence)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from huggingface_hub import HfApi

from hubkit.adapters.base_check import BaseConfig
from hubkit.cards import BaseModelCard
from hubkit.hub.failures import hub_errors
from hubkit.hub.repo_types import RepoType
from hubkit.publish.remote import RemoteRepo, read_remote
from hubkit.runs import Run


@dataclass(frozen=True)
class HubReads:
    """Every repo's state, and the base model's config and card, those two still arriving."""

    remotes: dict[str, RemoteRepo]
    base_card: Future[BaseModelCard]
    base_config: Future[BaseConfig]


def read_hub(
    api: HfApi,
    run: Run,
    repos: list[tuple[str, RepoType]],
    base_card: Callable[[Run, str | None], BaseModelCard],
) -> HubReads:
    """Each repo's state, read at once (one request each), with the base model's config and card; the
    card's read goes on while the adapters are checked against the base.

    Args:
        api: the push's client.
        run: the run (its manifest names the base model).
        repos: (repo id, type) of each repo the push may write.
        base_card: reads the base's card (run, token), the session keeping it.

    Returns:
        The reads; the base's config and card as futures.

    Raises:
        PublishError, AuthError: a repo cannot be read (as `hubkit.publish.commit.hub_errors` says).
    """

    def read(repo_id: str, repo_type: RepoType) -> RemoteRepo:
        with hub_errors(repo_id, api.endpoint):
            return read_remote(api, repo_id, repo_type)

    manifest = run.manifest
    pool = ThreadPoolExecutor(max_workers=len(repos) + 2, thread_name_prefix="hubkit-read")
    try:
        card = pool.submit(base_card, run, api.token)
        config = pool.submit(
            BaseConfig.download,
            manifest.base_model,
            manifest.base_model_revision,
            endpoint=api.endpoint,
            token=api.token,
        )
        reads = {repo_id: pool.submit(read, repo_id, repo_type) for repo_id, repo_type in repos}
        remotes = {repo_id: future.result() for repo_id, future in reads.items()}
        return HubReads(remotes=remotes, base_card=card, base_config=config)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
