"""The repos of one release, named once per push: the adapter repo and, beside it, the merged model's,
the GGUF files', the Space and the samples dataset (`hubkit.release.companions`: their names, types and
links)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from hubkit.cards import BaseModelCard, CardInputs
from hubkit.errors import PlanRequiredError
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteFile, RemoteRepo, read_remote
from hubkit.hub.repo_types import RepoType
from hubkit.hub.retry import failure_status, hub_failure, hub_words
from hubkit.publish.adapter_repo import adapter_bytes_in_repo
from hubkit.publish.create import create_repo
from hubkit.publish.plan import check_repo_id
from hubkit.publish.request import PushRequest
from hubkit.release.companions import GGUF, MERGED, RELEASE, SAMPLES, SPACE, Companion
from hubkit.runs import Run
from hubkit.space.config import DEFAULT_HARDWARE

if TYPE_CHECKING:
    from hubkit.adapters.prepare import PreparedAdapter
    from hubkit.cards.sweep_siblings import SweepSibling
    from hubkit.runs.eval_results import EvalResults
    from hubkit.runs.manifest import SweepInfo

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReleaseRepos:
    """The repo ids of one push. The merged and GGUF repos are named whether or not this push writes them:
    the cards link them while they exist."""

    adapter: str
    merged: str
    gguf: str
    space: str | None  # the Space this push publishes; None: ``--no-space``, or gradio not installed
    linked_space: str  # the Space the cards may link (while it exists): this push's, else the default one
    notes: tuple[str, ...] = ()  # why there is no Space, when the user should know
    samples: str | None = None  # the samples dataset this push may write; None with ``--no-samples``
    # The Space is the run's sweep's (every run of it), planned with the sweep's repos, not the run's own.
    sweep_space: bool = False

    @classmethod
    def of(cls, request: PushRequest, adapter_repo_id: str, sweep: SweepInfo | None = None) -> ReleaseRepos:
        """The repos a request names beside `adapter_repo_id` (the defaults: ``<repo>-merged``,
        ``<repo>-GGUF``, ``<repo>-demo``; for a run of `sweep`, the sweep's Space ``<owner>/<sweep>-demo``).

        Raises:
            PublishError: an invalid repo id.
        """
        merged = request.merged_repo_id or MERGED.default_repo_id(adapter_repo_id)
        gguf = request.gguf_repo_id or GGUF.default_repo_id(adapter_repo_id)
        space, notes = None, ()
        if request.space and importlib.util.find_spec("gradio") is None:
            # The Space's requirements are pinned to the versions installed here, gradio's among them.
            notes = (
                "No Space this time: gradio is not installed (pip install 'hubkit[space]'), or pass --no-space",
            )
        own_space = SPACE.default_repo_id(adapter_repo_id)
        if sweep is not None:
            own_space = SPACE.sweep_repo_id(adapter_repo_id.split("/")[0], sweep.name)
        if request.space and not notes:
            space = request.space_repo_id or own_space
        samples = (
            (request.samples_repo_id or SAMPLES.default_repo_id(adapter_repo_id)) if request.samples else None
        )
        for repo_id in (adapter_repo_id, merged, gguf, space, samples):
            if repo_id is not None:
                check_repo_id(repo_id)
        linked = space or request.space_repo_id or own_space
        return cls(adapter_repo_id, merged, gguf, space, linked, notes, samples, sweep is not None)

    def named(self) -> dict[Companion, str | None]:
        """Each repo of the release the cards may link (the Space: `linked_space`), None where it has none."""
        return {c: self.linked_space if c is SPACE else getattr(self, c.kind) for c in RELEASE}

    def kinds(self) -> dict[str, RepoType]:
        """Every repo of the release (the ones the cards link too) with its type."""
        return {repo_id: c.repo_type for c, repo_id in self.named().items() if repo_id is not None}


@dataclass(frozen=True)
class ReleaseLinks:
    """What the cards link of the release's other repos: each one while it holds something of this release
    (the merged model and the GGUF files with the step they hold), else None."""

    merged: str | None = None
    merged_step: int | None = None
    gguf: str | None = None
    gguf_step: int | None = None
    merged_verified: Mapping[str, Any] | None = None  # the merged repo's check (``hubkit_merge.verified``)
    space: str | None = None
    samples: str | None = None
    sweep_siblings: tuple[SweepSibling, ...] = ()  # the other runs of the run's sweep


def release_card_inputs(
    run: Run,
    repo_id: str,
    published: Mapping[str, RemoteFile],
    *,
    base: BaseModelCard,
    has_tokenizer: bool,
    links: ReleaseLinks,
    eval: EvalResults | None,
    adapters: Sequence[PreparedAdapter] = (),
) -> CardInputs:
    """What the cards say of a release (the one builder: a push, an evaluation pushed back, `hubkit card`):
    every step the adapter repo holds afterwards (`published`: its files before this commit; `adapters`:
    those this commit adds or replaces), with its size. `run` may be a release read back as one.
    """
    sizes = adapter_bytes_in_repo(published)
    sizes.update({a.step: a.size for a in adapters})
    return CardInputs(
        run=run,
        repo_id=repo_id,
        steps=tuple(sorted(sizes)),
        base=base,
        adapter_bytes=sizes,
        has_tokenizer=has_tokenizer,
        merged_repo_id=links.merged,
        merged_step=links.merged_step,
        gguf_repo_id=links.gguf,
        gguf_step=links.gguf_step,
        merged_verified=links.merged_verified if links.merged is not None else None,
        eval=eval,
        space_repo_id=links.space,
        samples_repo_id=links.samples,
        sweep_siblings=links.sweep_siblings,
    )


def create_space(api: HfApi, space: str, *, hardware: str, private: bool) -> str | None:
    """Create the release's Space (Gradio, on `hardware`) before any card links it.

    Returns:
        None when it exists now; the push's warning when the Hub refused it for the account's plan (402):
        the rest of the release is published without it, and no card links it.

    Raises:
        HubkitError: any other refusal, as `hub_errors` names it.
    """
    try:
        with hub_errors(space, api.endpoint):
            create_repo(api, space, "space", private=private, space_sdk="gradio", space_hardware=hardware)
    except PlanRequiredError as refused:
        failure = hub_failure(refused)
        said = (
            f"HTTP {failure_status(failure)}: {hub_words(failure)}" if failure is not None else str(refused)
        )
        other = "" if hardware.startswith("zero-") else f", --space-hardware {DEFAULT_HARDWARE} (ZeroGPU)"
        return (
            f"Warning: the Space {space} was not created: the Hub refused it for the account's plan "
            f"({said}); the rest of the release is published without it. Pass --no-space, or use a paid "
            f"plan{other}"
        )
    return None


def open_space(
    api: HfApi, repos: ReleaseRepos, remotes: dict[str, RemoteRepo], request: PushRequest
) -> tuple[ReleaseRepos, str | None]:
    """The release's Space created before any card is committed (`remotes` gets it as created). One the Hub
    refuses for the account's plan is left out, and no card links it: the repos without it, and the warning."""
    space = repos.space
    if space is None or remotes[space].exists:
        return repos, None
    hardware = request.space_hardware or DEFAULT_HARDWARE
    refusal = create_space(api, space, hardware=hardware, private=request.private)
    if refusal is not None:
        return replace(repos, space=None), refusal
    remotes[space] = read_remote(api, space, "space")
    return repos, None


def remove_if_empty(api: HfApi, repos: list[tuple[str, RepoType]]) -> list[str]:
    """Delete each of `repos` (created by this push) that holds only its first commit; returns those
    deleted. One that cannot be read or deleted now is left as it is."""
    removed = []
    for repo_id, repo_type in repos:
        try:
            if not api.repo_exists(repo_id, repo_type=repo_type):
                continue
            if len(api.list_repo_commits(repo_id, repo_type=repo_type)) == 1:
                api.delete_repo(repo_id, repo_type=repo_type)
                removed.append(repo_id)
        except HfHubHTTPError as error:
            logger.warning("could not remove the empty %s (%s)", repo_id, error)
    return removed
