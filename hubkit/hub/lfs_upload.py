"""Send one file's LFS object to a Hub that speaks the classic git-lfs protocol, in large pieces.

huggingface_hub uploads to huggingface.co through Xet (Rust: chunked, deduplicated, outside the GIL),
and hubkit leaves those uploads to it. With Xet off (`HF_HUB_DISABLE_XET`, which hubkit sets for its
local Hub) huggingface_hub sends a file as httpx reads it: 64 KiB at a time, each piece taking the GIL
back. While the push renders its cards on another thread, each of those waits its turn, and a 132 MB
adapter took about 0.1 s longer to send (`bench/push.py`, adding one checkpoint). Here the same upload
goes in 4 MiB pieces. Memory: an upload holds one piece and the HTTP layer's copy of it, about 8 MiB
whatever the file's size (32 MiB for a push's four uploads at once; 1 MiB pieces measured slower).

The protocol is git-lfs's batch API (https://github.com/git-lfs/git-lfs/blob/main/docs/api/batch.md)
as `huggingface_hub.lfs` speaks it: the batch request, one PUT to the URL it returns, then the verify
call. An object the Hub already holds comes back without actions and is not sent. A multipart answer
(a `chunk_size` header) is left to huggingface_hub's `lfs_upload`. Each request is retried as
huggingface_hub retries its own (`http_backoff`); the caller retries the whole call on top
(`hubkit.hub.retry`), as it does huggingface_hub's upload.
"""

from __future__ import annotations

from collections.abc import Iterator

from huggingface_hub import CommitOperationAdd, HfApi, constants
from huggingface_hub.lfs import lfs_upload, post_lfs_batch_info
from huggingface_hub.utils import build_hf_headers, fix_hf_endpoint_in_url, hf_raise_for_status, http_backoff

from hubkit.errors import PublishError
from hubkit.hub.kinds import RepoType

PIECE_BYTES = 4 * 1024 * 1024


def classic_lfs() -> bool:
    """Whether huggingface_hub uploads with the classic LFS protocol (Xet off) rather than through Xet."""
    return bool(constants.HF_HUB_DISABLE_XET)


class _Pieces:
    """The file's bytes in `PIECE_BYTES` pieces, read as they are sent (one piece in memory).

    Each iteration starts from the file's beginning, so that a request sent again (huggingface_hub's
    `http_backoff` retries 5xx, 429 after its `Retry-After`, and dropped connections) sends it whole.

    Raises (while iterating):
        PublishError: the file is no longer the size it had when it was hashed.
    """

    def __init__(self, addition: CommitOperationAdd) -> None:
        if not isinstance(addition.path_or_fileobj, str | bytes):
            raise TypeError(f"{addition.path_in_repo}: only a file or bytes are sent in pieces")
        self._source = addition.path_or_fileobj
        self._path_in_repo = addition.path_in_repo
        self._size = addition.upload_info.size

    def __iter__(self) -> Iterator[bytes]:
        if isinstance(self._source, bytes):
            yield self._source
            return
        sent = 0
        with open(self._source, "rb", buffering=0) as f:
            while piece := f.read(min(PIECE_BYTES, self._size + 1 - sent)):
                sent += len(piece)
                if sent > self._size:
                    break
                yield piece
        if sent != self._size:
            raise PublishError(
                f"{self._path_in_repo} changed since it was checked (still being written?): push again"
            )


def send_lfs_object(api: HfApi, repo_id: str, repo_type: RepoType, addition: CommitOperationAdd) -> bool:
    """Upload `addition`'s content as an LFS object of `repo_id`, unless the Hub holds it already.

    The object stays invisible until a commit names it.

    Args:
        api: a client bound to the endpoint and token.
        repo_id: the repo the object is for.
        repo_type: its type.
        addition: the file, its sha256 known (`hubkit.publish.commit.hand_in_sha256`).

    Returns:
        Whether the content was sent (False: the Hub had it).

    Raises:
        HfHubHTTPError: the Hub answered an error (the caller maps and retries it).
        PublishError: the batch answer refused the object.
    """
    info = addition.upload_info
    objects, refused, _transfer = post_lfs_batch_info(
        upload_infos=[info],
        token=api.token,
        repo_type=repo_type,
        repo_id=repo_id,
        endpoint=api.endpoint,
        headers=api.headers,
    )
    if refused:
        error = refused[0].get("error", {})
        raise PublishError(
            f"the Hub refused {addition.path_in_repo} for {repo_id} "
            f"(LFS error {error.get('code')}): {error.get('message')}"
        )
    (batch_action,) = objects
    actions = batch_action.get("actions")
    if actions is None:
        return False
    upload = actions["upload"]
    header = upload.get("header") or {}
    if "chunk_size" in header:
        lfs_upload(addition, batch_action, token=api.token, headers=api.headers, endpoint=api.endpoint)
        return True
    response = http_backoff(
        "PUT",
        fix_hf_endpoint_in_url(upload["href"], api.endpoint),  # as the client does, for a proxy's URLs
        content=_Pieces(addition),
        # A known length, not chunked transfer encoding: the Hub's upload URLs are for exact sizes.
        headers={**header, "Content-Length": str(info.size)},
    )
    hf_raise_for_status(response)
    verify = actions.get("verify")
    if verify is not None:
        response = http_backoff(
            "POST",
            fix_hf_endpoint_in_url(verify["href"], api.endpoint),
            headers={
                **build_hf_headers(token=api.token, headers=api.headers),
                **(verify.get("header") or {}),
            },
            json={"oid": info.sha256.hex(), "size": info.size},
        )
        hf_raise_for_status(response)
    return True
