"""What every handler needs: the repository store, the server's settings and its public URLs."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from hubkit.localhub import errors
from hubkit.localhub.faults import FaultPlan, Faults
from hubkit.localhub.repos import Repo, RepoRef, RepoStore

# URL prefix of each repo type on the Hub's web and git routes (models have none).
URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass(frozen=True)
class HubSettings:
    """How a local Hub behaves.

    Attributes:
        token: when set, writes and private reads need `Authorization: Bearer <token>`.
        user: the account every request acts as (the namespace of repos created without one).
        multipart_threshold: LFS uploads of at least this many bytes are asked for in parts.
        multipart_chunk_size: size of each part.
        faults: faults to inject on purpose, for tests of clients against a flaky Hub (`faults.py`).
    """

    token: str | None = None
    user: str = "hubkit-user"
    multipart_threshold: int = 64 * 1024 * 1024
    multipart_chunk_size: int = 16 * 1024 * 1024
    faults: FaultPlan | None = None


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

    @property
    def author(self) -> str:
        return f"{self.settings.user} <{self.settings.user}@users.noreply.localhost>"

    def sign(self, path: str) -> str:
        """A signature that lets a URL path be used without a token (like the Hub's presigned URLs)."""
        return hmac.new(self.secret, path.encode(), hashlib.sha256).hexdigest()

    def signature_ok(self, path: str, signature: str | None) -> bool:
        return signature is not None and hmac.compare_digest(self.sign(path), signature)

    def repo_url(self, ref: RepoRef) -> str:
        return f"{self.endpoint}/{URL_PREFIXES[ref.repo_type]}{ref.repo_id}"

    def repo(self, repo_type: str, namespace: str, name: str, authenticated: bool) -> Repo:
        """The repository named by a URL; a private one is hidden from unauthenticated callers.

        Raises:
            InvalidInputError: a malformed name.
            RepoNotFoundError: no such repository.
            HubHTTPError: 404 RepoNotFound for a private repository and a caller without the token.
        """
        repo = self.store.get(RepoRef(repo_type, namespace, name))
        if self.settings.token and not authenticated and repo.meta.private:
            raise errors.repo_not_found(f"Repository not found: {repo_type}s/{namespace}/{name}")
        return repo
