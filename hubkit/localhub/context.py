"""What every handler needs: the repository store, the server's settings and its public URLs."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from hubkit.localhub import errors
from hubkit.localhub.access import AccessPolicy, Account
from hubkit.localhub.exceptions import RepoNotFoundError
from hubkit.localhub.faults import FaultPlan, Faults
from hubkit.localhub.identity import Caller
from hubkit.localhub.messages import Request
from hubkit.localhub.repos import Repo, RepoRef, RepoStore

# URL prefix of each repo type on the Hub's web and git routes (models have none).
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass(frozen=True)
class HubSettings:
    """How a local Hub behaves.

    Attributes:
        token: an administrator's token (the server's `user`: reads and writes every namespace); with
            it or `users`, writes and private reads need a token, and unknown tokens are refused.
        users: the accounts of a users file (`access.load_users`): tokens of users and their orgs.
        user: the administrator's name; with neither token nor users, every request acts as this user.
        multipart_threshold: LFS uploads of at least this many bytes are asked for in parts.
        multipart_chunk_size: size of each part.
        faults: faults to inject on purpose, for tests of clients against a flaky Hub (`faults.py`).
    """

    token: str | None = field(default=None, repr=False)
    users: tuple[Account, ...] = ()
    user: str = "hubkit-user"
    multipart_threshold: int = 64 * 1024 * 1024
    multipart_chunk_size: int = 16 * 1024 * 1024
    faults: FaultPlan | None = None

    @property
    def has_credentials(self) -> bool:
        """Whether requests are checked at all (else the Hub is open, and loopback only)."""
        return bool(self.token or self.users)


@dataclass
class HubContext:
    """Shared state of one running Hub; handlers receive it with each request."""

    store: RepoStore
    settings: HubSettings
    endpoint: str = ""
    cdn_endpoint: str | None = None
    faults: Faults = field(default_factory=lambda: Faults(None))
    # Signs upload and download URLs; kept in the root, so that URLs handed out survive a restart.
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    access: AccessPolicy = field(init=False)

    def __post_init__(self) -> None:
        self.access = AccessPolicy(self.settings.user, self.settings.token, self.settings.users)

    @staticmethod
    def author(caller: Caller) -> str:
        """The git author line of a commit made by `caller`."""
        name = caller.name or "anonymous"
        return f"{name} <{name}@users.noreply.localhost>"

    def sign(self, path: str) -> str:
        """A signature that lets a URL path be used without a token (like the Hub's presigned URLs)."""
        return hmac.new(self.secret, path.encode(), hashlib.sha256).hexdigest()

    def signature_ok(self, path: str, signature: str | None) -> bool:
        return signature is not None and hmac.compare_digest(self.sign(path), signature)

    @staticmethod
    def repo_url(req: Request, ref: RepoRef) -> str:
        """The repo's URL, on the address the request came to."""
        return f"{req.base_url}/{URL_PREFIXES[ref.repo_type]}{ref.repo_id}"

    def repo(self, req: Request, repo_type: str, namespace: str, name: str, write: bool = False) -> Repo:
        """The repository named by a URL, if the caller may see it (and write to it, for writes).

        Raises:
            InvalidInputError: a malformed name.
            HubHTTPError: RepoNotFound (401 to anonymous callers, else 404) when there is no such repo or it
                is private to a namespace the caller is not in; 401/403 for a write the caller may not make.
        """
        caller = req.caller
        ref = RepoRef(repo_type, namespace, name)
        try:
            repo = self.store.get(ref)
            hidden = repo.meta.private and not caller.owns(namespace)
        except RepoNotFoundError:
            hidden = True
        if hidden:
            status = 401 if caller.name is None else 404
            raise errors.repo_not_found(f"Repository not found: {repo_type}s/{ref.repo_id}", status)
        if write or req.write:
            self.access.check_write(caller, namespace)
        return repo

    def signed_repo(self, repo_type: str, namespace: str, name: str) -> Repo:
        """The repository of a signed URL: the signature is the permission. Raises RepoNotFoundError."""
        return self.store.get(RepoRef(repo_type, namespace, name))
