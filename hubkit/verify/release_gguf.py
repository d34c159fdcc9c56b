"""A published release's GGUF files checked against its merged model (`hubkit verify --repo-id`), as the push
checks them (`hubkit.verify.gguf`): the same prompt token ids and end token, then each whole-model file run in
llama.cpp on the merged model's greedy answers when llama-cpp-python is installed. Read as untrusted: the GGUF
repo at its head commit, its record (``hubkit_gguf``) read as data, only the record's files at the repo root
whose names are a GGUF file's, each within a GGUF file's size on the listing before any byte is downloaded.

    checks = verify_release_gguf("me/run", GGUF.default_repo_id("me/run"), merged_dir, questions, system_prompt, ...)
    for check, recorded in checks: ...   # recorded: the figures the GGUF card gave that file (None: none)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hubkit.cards.gguf_record import GGUFRecord
from hubkit.errors import ReleaseError
from hubkit.formats.gguf_types import FILE_NAME_RE
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import read_remote
from hubkit.release.read import Release, download_release_files
from hubkit.verify.gguf import GGUFCheck, check_gguf, gguf_reference


def verify_release_gguf(
    repo_id: str,
    gguf_repo_id: str,
    merged_dir: Path,
    questions: Sequence[str],
    system_prompt: str | None,
    adapter: Release,
    *,
    endpoint: str | None = None,
    token: str | None = None,
) -> tuple[tuple[GGUFCheck, Mapping[str, Any] | None], ...]:
    """Each whole-model GGUF file `gguf_repo_id` holds, checked against `merged_dir` (the release's merged
    model, downloaded), with the figures its card recorded; () when the release has no GGUF repo.

    Raises:
        ReleaseError: the GGUF repo records files of another adapter repo, or a file larger than its kind.
        VerificationError: llama.cpp could not run a file within its bounds.
        HubError: the Hub cannot be read.
    """
    from huggingface_hub import HfApi

    with hub_errors(gguf_repo_id, endpoint):
        listing = read_remote(HfApi(endpoint=endpoint, token=token), gguf_repo_id)
    # A repo that is not there has no card, so no record.
    record = GGUFRecord.from_card_data(listing.card_data)
    if record is None:
        return ()
    if record.merge.adapter_repo != repo_id:
        raise ReleaseError(
            f"{gguf_repo_id} records GGUF files of {record.merge.adapter_repo}, not {repo_id}: it is not "
            "this release's"
        )
    gguf = Release.listed(listing, adapter.manifest, endpoint)
    names = {t: f.name for t, f in record.files.items() if "/" not in f.name and FILE_NAME_RE.match(f.name)}
    present = {t: name for t, name in names.items() if name in gguf.files}
    if not present:
        return ()
    folder = download_release_files(gguf, list(present.values()), endpoint=endpoint, token=token)
    reference = gguf_reference(merged_dir, questions, system_prompt)
    return tuple(
        (
            check_gguf(
                folder / name, merged_dir, questions, system_prompt, f"{gguf_repo_id}/{name}", reference
            ),
            record.verified.get(t),
        )
        for t, name in present.items()
    )
