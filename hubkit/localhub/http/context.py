"""What every handler needs: the repository store, the server's settings and its public URLs."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from hubkit.localhub.accounts.access import AccessPolicy, Account
from hubkit.localhub.accounts.identity import Caller
from hubkit.localhub.accounts.limits import PLAN_NAMES, UNLIMITED, HubLimits, Limiter
from hubkit.localhub.accounts.signed_urls import Grant, UrlSigner
from hubkit.localhub.http import errors
from hubkit.localhub.http.hooks import HubHooks
from hubkit.localhub.http.messages import Request
from hubkit.localhub.storage.collections import CollectionStore
from hubkit.localhub.storage.exceptions import RepoNotFoundError
from hubkit.localhub.storage.repos import Repo, RepoRef
from hubkit.localhub.storage.root import RepoStore
from hubkit.localhub.xet.store import XetStore
from hubkit.localhub.xet.tokens import XetTokens

# URL prefix of each repo type on the Hub's web and git routes (models have none).
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass(frozen=True)
class HubSettings:
    """How a local Hub behaves.

    Attributes:
        token: an administrator's token (the server's `user`: reads and writes every namespace); with
            it or `users`, writes and private reads need a token, and unknown tokens are refused.
        users: the accounts of a users file (`access.load_users`): tokens of users and their orgs.
        user: the administrator's name; with neither token nor users, every request acts as this user
            (and writes with any token).
        allowed_hosts: names, besides the address it listens on, that a request's Host may give for the
            server (a DNS name users reach a shared Hub by); any other is refused (`guards.py`).
        multipart_threshold: LFS uploads of at least this many bytes are asked for in parts.
        multipart_chunk_size: size of each part.
        max_lfs_size: the largest LFS object accepted, in bytes (50 GB: well above a model's shard).
        max_json_body: the largest body of a JSON request (repo, branch and LFS batch APIs).
        max_commit_body: the largest commit (its regular files travel inside it, in base64).
        signed_url_ttl: seconds an upload or download URL, or a Xet token, stays valid.
        incomplete_upload_timeout: seconds after its last write that an unfinished multipart upload is
            removed (None: `signed_url_ttl` plus 10 minutes, when none of its URLs can add to it).
        plan: the plan (free, pro, team, enterprise) of the administrator, of every caller of an open Hub,
            and of organizations; `unlimited` (the default): the server's operator, without quotas. Users
            of a users file have their own (default free).
        limits: production's limits the Hub enforces for each plan (`accounts/limits.py`;
            `HubLimits.off()`: none).
    """

    token: str | None = field(default=None, repr=False)
    users: tuple[Account, ...] = ()
    user: str = "hubkit-user"
    allowed_hosts: tuple[str, ...] = ()
    multipart_threshold: int = 64 * 1024 * 1024
    multipart_chunk_size: int = 16 * 1024 * 1024
    max_lfs_size: int = 50 * 1000**3
    max_json_body: int = 1024 * 1024
    max_commit_body: int = 256 * 1024 * 1024
    signed_url_ttl: int = 3600
    incomplete_upload_timeout: int | None = None
    plan: str = UNLIMITED
    limits: HubLimits = field(default_factory=HubLimits)

    def __post_init__(self) -> None:
        if self.plan not in (*PLAN_NAMES, UNLIMITED):
            names = ", ".join((*PLAN_NAMES, UNLIMITED))
            raise ValueError(f"The plan must be one of {names}; got {self.plan!r}.")
        limits = (self.multipart_chunk_size, self.max_lfs_size, self.max_json_body, self.max_commit_body)
        if min(*limits, self.signed_url_ttl) < 1:
            raise ValueError("The local Hub's sizes, limits and URL lifetime must be positive.")
        timeout = self.incomplete_upload_timeout
        if timeout is not None and timeout < self.signed_url_ttl:
            raise ValueError("incomplete_upload_timeout must be at least signed_url_ttl.")

    @property
    def has_credentials(self) -> bool:
        """Whether requests are checked at all (else the Hub is open, and loopback only)."""
        return bool(self.token or self.users)

    @property
    def upload_timeout(self) -> int:
        """Seconds after which an unfinished multipart upload is removed."""
        return self.incomplete_upload_timeout or self.signed_url_ttl + 600


@dataclass
class HubContext:
    """Shared state of one running Hub; handlers receive it with each request."""

    store: RepoStore
    settings: HubSettings
    endpoint: str = ""
    cdn_endpoint: str | None = None
    hooks: HubHooks = field(default_factory=HubHooks)  # `LocalHub(hooks=...)`
    # Signs upload and download URLs; kept in the root, so that URLs handed out survive a restart.
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    uploads: list[tuple[str, str, str]] = field(default_factory=list)  # `LocalHub.uploads`
    access: AccessPolicy = field(init=False)
    signer: UrlSigner = field(init=False)
    collections: CollectionStore = field(init=False)
    xet: XetStore = field(init=False)
    xet_tokens: XetTokens = field(init=False)
    limiter: Limiter = field(init=False)

    def __post_init__(self) -> None:
        settings = self.settings
        self.access = AccessPolicy(settings.user, settings.token, settings.users, self.secret, settings.plan)
        self.limiter = Limiter(settings.limits)
        self.signer = UrlSigner(self.secret, self.settings.signed_url_ttl)
        self.collections = CollectionStore(self.store.root)
        self.xet = XetStore(self.store.root)
        self.xet_tokens = XetTokens(self.secret, self.settings.signed_url_ttl)

    @staticmethod
    def author(caller: Caller) -> str:
        """The git author line of a commit made by `caller`."""
        name = caller.name or "anonymous"
        return f"{name} <{name}@users.noreply.localhost>"

    def signed_url(self, base_url: str, path: str, caller: Caller, size: int | None = None) -> str:
        """A URL for `path` that works without a token, for a while, as long as `caller` may use it."""
        return f"{base_url}{path}?{self.signer.query(path, self.access.signer(caller), size)}"

    @staticmethod
    def repo_url(req: Request, ref: RepoRef) -> str:
        """The repo's URL, on the address the request came to."""
        return f"{req.base_url}/{URL_PREFIXES[ref.repo_type]}{ref.repo_id}"

    def repo(self, req: Request, repo_type: str, namespace: str, name: str, write: bool = False) -> Repo:
        """The repository named by a URL, if the caller may see it (and write to it, for writes): else
        RepoNotFound (401 to anonymous callers, else 404) when there is no such repo or it is private to a
        namespace the caller is not in, 401/403 for a write the caller may not make."""
        ref = RepoRef(repo_type, namespace, name)
        repo = self.visible(req.caller, ref)
        if repo is None:
            status = 401 if req.caller.name is None else 404
            raise errors.repo_not_found(f"Repository not found: {repo_type}s/{ref.repo_id}", status)
        if write or req.write:
            self.access.check_write(req.caller, repo.ref.namespace)
        return repo

    def visible(self, caller: Caller, ref: RepoRef) -> Repo | None:
        """The repository `ref` (in any case, as on the Hub: the rules read its own spelling), if `caller`
        may see it."""
        try:
            repo = self.store.get(ref)
        except RepoNotFoundError:
            return None
        return None if repo.meta.private and not caller.owns(repo.ref.namespace) else repo

    def check_download(self, req: Request, repo: Repo) -> None:
        """Refuse a gated repository's files to a caller outside its namespace, in the Hub's words: GatedRepo,
        401 to an anonymous caller, else 403 (there are no access requests here: its namespace's members
        and the administrator are the authorized list)."""
        if not repo.meta.gated or req.caller.owns(repo.ref.namespace):
            return
        what = f"Access to {repo.ref.repo_type} {repo.ref.repo_id} is restricted"
        if req.caller.name is None:
            raise errors.gated(
                401, f"{what}. You must have access to it and be authenticated to access it. Please log in."
            )
        url = self.repo_url(req, repo.ref)
        raise errors.gated(
            403, f"{what} and you are not in the authorized list. Visit {url} to ask for access."
        )

    def signed_repo(
        self, req: Request, path: str, repo_type: str, namespace: str, name: str, upload: bool
    ) -> tuple[Repo, Grant]:
        """The repository of a signed URL, if its signer may still use it now: see the repo (a download),
        or write to it (an upload); the request then acts as the signer. 403 for a bad or expired
        signature, or a signer whose token is gone; as `repo` when the signer may no longer use it."""
        grant = self.signer.verify(path, req, sized=upload)
        caller = self.access.caller_of(grant.signer)
        if caller is None:
            raise errors.forbidden(
                "The token this URL was made for is no longer accepted here: ask the Hub for a new URL."
            )
        req.caller = caller
        return self.repo(req, repo_type, namespace, name, write=upload), grant
