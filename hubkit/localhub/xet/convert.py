"""Xet hashes for large files that arrived through the classic LFS API.

huggingface.co gives every large file a Xet hash, however it was uploaded, and its listings and resolve
answers name it, so its clients download every large file through Xet. The local Hub does the same: once a
commit names an LFS object the Xet store does not know, the object is chunked by xet-core's own chunker
(hf_xet, the client library huggingface_hub installs) and uploaded to the Hub's own CAS under a write token
for that repo, through every check a client's upload passes (`xet_store.register_shard`). The hash is then
the one a Xet client computes for the same bytes. A Hub without the Xet extras (blake3, lz4: verl's
environment) serves its large files through LFS only and gives none a Xet hash.
"""

from __future__ import annotations

import logging
from importlib.util import find_spec

from hubkit.localhub.accounts.identity import Caller
from hubkit.localhub.http.context import HubContext
from hubkit.localhub.storage.repos import Repo
from hubkit.localhub.xet.tokens import WRITE

logger = logging.getLogger(__name__)


def give_xet_hashes(ctx: HubContext, repo: Repo, caller: Caller, cas_url: str, oids: list[str]) -> None:
    """Register through Xet each of `oids` (objects of `repo`'s LFS store) that has no Xet hash yet."""
    missing = sorted({oid for oid in oids if ctx.xet.file_of_object(oid) is None and repo.lfs.size(oid)})
    if not missing or not all(find_spec(name) for name in ("blake3", "lz4", "hf_xet")):
        return
    import hf_xet

    token, expires = ctx.xet_tokens.make(repo.ref, WRITE, ctx.access.signer(caller))
    try:
        hf_xet.upload_files(
            [str(repo.lfs.path(oid)) for oid in missing],
            cas_url,
            (token, expires),
            None,
            None,
            repo.ref.repo_type,
            sha256s=missing,
        )
    except Exception as e:  # the commit is applied: its files are still served, through LFS
        logger.warning(
            "Could not give %d LFS file(s) of %s a Xet hash: %s", len(missing), repo.ref.repo_id, e
        )
