"""Xet access tokens: what the Hub's `xet-read-token` / `xet-write-token` endpoints hand out, and what the
CAS API accepts as `Authorization: Bearer`.

A token names one repository, a scope (`read`, or `write`, which includes read), an expiry and its signer
(the opaque id of the Hub token it was made for, as signed URLs do), all under an HMAC of the server's
key. As with signed URLs, a valid token is not enough: the CAS handlers check that the signer may still
see (or write to) the repository now.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass

from hubkit.localhub.accounts.signed_urls import expires_in
from hubkit.localhub.http import errors
from hubkit.localhub.storage.repos import RepoRef

READ, WRITE = "read", "write"
_PREFIX = "xet_"


@dataclass(frozen=True)
class XetGrant:
    """What a valid Xet token allows."""

    ref: RepoRef
    signer: str


class XetTokens:
    """Makes and checks one Hub's Xet tokens (`secret`: the server's key; `ttl`: seconds one is valid)."""

    def __init__(self, secret: bytes, ttl: int) -> None:
        self._key = hmac.new(secret, b"xet-token", hashlib.sha256).digest()
        self.ttl = ttl

    def _signature(self, payload: bytes) -> str:
        return hmac.new(self._key, payload, hashlib.sha256).hexdigest()

    def make(self, ref: RepoRef, scope: str, signer: str) -> tuple[str, int]:
        """A token for `ref` with `scope`, and when it expires (unix seconds)."""
        expires = expires_in(self.ttl)
        fields = [ref.repo_type, ref.namespace, ref.name, scope, signer, expires]
        payload = base64.urlsafe_b64encode(json.dumps(fields).encode())
        return f"{_PREFIX}{payload.decode()}.{self._signature(payload)}", expires

    def verify(self, authorization: str | None, scope: str) -> XetGrant:
        """The grant of a request's `Authorization: Bearer xet_…` header, for an API needing `scope`: 401
        for a missing, malformed, forged or expired token (the client then asks the Hub for a new one), 403
        for a read token on a write API."""
        scheme, _, token = (authorization or "").partition(" ")
        payload, _, signature = token.strip().removeprefix(_PREFIX).partition(".")
        if (
            scheme.lower() != "bearer"
            or not token.startswith(_PREFIX)
            or not hmac.compare_digest(self._signature(payload.encode()), signature)
        ):
            raise errors.unauthorized(
                "a valid Xet token (from the Hub's xet-read-token or xet-write-token API)"
            )
        try:
            repo_type, namespace, name, granted, signer, expires = json.loads(
                base64.urlsafe_b64decode(payload)
            )
        except (ValueError, TypeError, binascii.Error):
            raise errors.unauthorized() from None
        if expires < time.time():
            raise errors.unauthorized("a Xet token that has not expired: ask the Hub for a new one")
        if scope == WRITE and granted != WRITE:
            raise errors.forbidden("This Xet token is read-only: ask the Hub for a write token.")
        return XetGrant(RepoRef(repo_type, namespace, name), signer)
