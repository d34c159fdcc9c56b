"""Creating the repos and branches a push commits to: each created once, one that exists meanwhile kept as
it is, with the push's retries."""

from __future__ import annotations

from huggingface_hub import HfApi

from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import RemoteRepo, read_remote
from hubkit.hub.repo_types import RepoType
from hubkit.hub.retry import DEFAULT_RETRY, RetryPolicy, with_retries
from hubkit.publish.diff import RepoDiff


def create_repo(
    api: HfApi,
    repo_id: str,
    repo_type: RepoType,
    *,
    private: bool,
    space_sdk: str | None = None,
    space_hardware: str | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> None:
    """Create a repo (a Space with its SDK and hardware); one that exists meanwhile is kept as it is.

    Raises:
        The client's HTTP failure once retries run out (`hub_errors` makes it one line).
    """
    with_retries(
        lambda: api.create_repo(
            repo_id,
            repo_type=repo_type,
            private=private,
            exist_ok=True,
            space_sdk=space_sdk,
            space_hardware=space_hardware,  # type: ignore[arg-type]
        ),
        retry,
        f"creating {repo_id}",
        api.endpoint,
    )


def create_branch(
    api: HfApi,
    repo_id: str,
    branch: str,
    *,
    retry: RetryPolicy = DEFAULT_RETRY,
    first_commits: dict[str, str] | None = None,
) -> str:
    """Create `branch` from the repo's first commit (which holds only `.gitattributes`), so that it holds
    nothing but what is committed to it; one created meanwhile is kept as it is.

    Args:
        first_commits: each repo's first commit as read by this push (read once, not once per branch:
            the Hub counts every API call against the account's window).

    Returns:
        The branch's head: the commit to make the next one on top of.

    Raises:
        The client's HTTP failure once retries run out (`hub_errors` makes it one line).
    """
    what = f"creating branch {branch} of {repo_id}"
    known = first_commits if first_commits is not None else {}
    if repo_id not in known:
        known[repo_id] = with_retries(
            lambda: api.list_repo_commits(repo_id)[-1].commit_id, retry, what, api.endpoint
        )
    first = known[repo_id]
    with_retries(
        lambda: api.create_branch(repo_id, branch=branch, revision=first, exist_ok=True),
        retry,
        what,
        api.endpoint,
    )
    # The branch starts at `first`: no read after it (one created meanwhile by another push moved on, and
    # the commit on top of `first` is then refused as on any moved head).
    return first


def created_if_new(api: HfApi, remote: RemoteRepo, *, private: bool) -> RemoteRepo:
    """A model repo (the adapter repo), created when it does not exist yet and then read again (its first
    commit); only once every check of the push has passed, so that a refused push leaves no repo behind."""
    if remote.exists:
        return remote
    with hub_errors(remote.repo_id, api.endpoint):
        create_repo(api, remote.repo_id, "model", private=private)
        return read_remote(api, remote.repo_id, "model")


def head_to_commit_on(
    api: HfApi,
    diff: RepoDiff,
    *,
    retry: RetryPolicy = DEFAULT_RETRY,
    first_commits: dict[str, str] | None = None,
) -> str:
    """The head the diff's commit goes on top of: the one diffed, or the new branch's (`create_branch`), or
    the new repo's first commit (the repo made now, with the plan's visibility and SDK)."""
    plan = diff.plan
    if diff.remote.head_sha is not None:
        return diff.remote.head_sha
    if plan.revision != "main":
        return create_branch(api, plan.repo_id, plan.revision, retry=retry, first_commits=first_commits)
    create_repo(
        api, plan.repo_id, plan.repo_type, private=plan.private, space_sdk=plan.space_sdk, retry=retry
    )
    return with_retries(
        lambda: api.repo_info(plan.repo_id, repo_type=plan.repo_type).sha,
        retry,
        f"reading {plan.repo_id}",
        api.endpoint,
    )
