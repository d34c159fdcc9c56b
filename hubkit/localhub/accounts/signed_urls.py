"""Signed URLs: where a client sends or fetches an LFS object without its token, as it does with the Hub's
presigned URLs.

A URL names its path, the object's size (uploads), when it expires and who it was made for (the signer:
an opaque id of the caller's token, `access.py`), all under an HMAC of the server's key; the key is kept
in the storage root, so URLs survive a restart. A valid signature is not enough: the handler serving
the URL checks that the signer may still make the request (the repo still visible to them, their token
still known and still allowed to write), so that withdrawn access is withdrawn at once.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from dataclasses import dataclass

from hubkit.localhub.http import errors
from hubkit.localhub.http.messages import Request

_NUMBER = re.compile(r"^[0-9]{1,20}$")
_SIGNER = re.compile(r"^[0-9a-z]{1,64}$")
_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")


def expires_in(ttl: int) -> int:
    """Unix seconds `ttl` from now, rounded up: a URL, token or shard never lives less than its ttl."""
    return math.ceil(time.time()) + ttl


@dataclass(frozen=True)
class Grant:
    """What a valid signed URL allows: who it was made for, and the object's size (None for downloads)."""

    signer: str
    size: int | None


class UrlSigner:
    """Makes and checks one Hub's signed URLs (`secret`: the signing key; `ttl`: seconds a URL is valid)."""

    def __init__(self, secret: bytes, ttl: int) -> None:
        self._secret = secret
        self.ttl = ttl

    def _signature(self, path: str, size: str, expires: str, signer: str) -> str:
        message = f"{path}\n{size}\n{expires}\n{signer}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def query(self, path: str, signer: str, size: int | None = None) -> str:
        """The query string that makes `path` a signed URL for `signer` (and an object of `size` bytes)."""
        expires = str(expires_in(self.ttl))
        size_text = "" if size is None else str(size)
        signature = self._signature(path, size_text, expires, signer)
        sized = f"size={size_text}&" if size is not None else ""
        return f"{sized}expires={expires}&signer={signer}&sig={signature}"

    def verify(self, path: str, req: Request, sized: bool) -> Grant:
        """The grant of a signed URL for `path`, the request's query holding the signature; 403 for a
        missing, malformed, wrong or expired signature."""
        size = req.param("size") or ""
        expires, signer = req.param("expires") or "", req.param("signer") or ""
        signature = req.param("sig") or ""
        well_formed = (
            _SIGNATURE.match(signature)
            and _NUMBER.match(expires)
            and _SIGNER.match(signer)
            and (_NUMBER.match(size) if sized else size == "")
        )
        if not well_formed or not hmac.compare_digest(
            self._signature(path, size, expires, signer), signature
        ):
            raise errors.forbidden("Invalid or missing signature for this URL: ask the Hub for a new one.")
        if int(expires) < time.time():
            raise errors.forbidden("This signed URL has expired: ask the Hub for a new one.")
        return Grant(signer, int(size) if sized else None)
