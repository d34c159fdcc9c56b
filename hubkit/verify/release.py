"""A published release's merged model checked against its adapter (`hubkit verify --repo-id`): for someone who
received a release, or to check an old one. Everything is read as untrusted, bounded as the read side is
(`hubkit.release.read`): the adapter repo through `open_release` (its adapter and the base checked as data
before PEFT or transformers read them), the merged repo at its head commit, only files of a kind a merged repo
publishes, each within its kind's size on the listing before any byte is downloaded, its config and tokenizer
checked as a base's are.

    check, recorded, gguf = verify_release("me/qwen3-4b-grpo", endpoint=..., token=...)
    check.failures   # () when the merged model is still the adapter's
    recorded         # the figures the merged card recorded when it was pushed (None: not verified then)
    gguf             # each GGUF file's check against the merged model, with its card's figures
                     # (`hubkit.verify.release_gguf`; checked once the merged model passes)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import ReleaseError
from hubkit.evaluate.release import open_release
from hubkit.hub.failures import hub_errors
from hubkit.hub.remote import read_remote
from hubkit.release.base_files import check_base_files, check_tokenizer_files
from hubkit.release.companions import GGUF, MERGED
from hubkit.release.read import Release, download_release_files
from hubkit.runs.eval_results import RESULTS_NAME, SAMPLES_NAME, load_eval
from hubkit.safety import kinds
from hubkit.verify.gguf import GGUFCheck
from hubkit.verify.merged import MergedCheck, MergedCheckInput, check_merged, questions_of
from hubkit.verify.release_gguf import verify_release_gguf


def verify_release(
    repo_id: str,
    merged_repo_id: str | None = None,
    gguf_repo_id: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
) -> tuple[MergedCheck, Mapping[str, Any] | None, tuple[tuple[GGUFCheck, Mapping[str, Any] | None], ...]]:
    """Check the release's merged model against the adapter of the step it records, as users load them.

    Returns:
        The check, the figures the merged card recorded at its push (None when it was not verified), and
        each GGUF file of `gguf_repo_id` (default ``<repo_id>-GGUF``) checked against the merged model
        with its card's figures (`hubkit.verify.release_gguf`; none when the merged model failed).

    Raises:
        ReleaseError: not a release, no merge record, a file larger than its kind, a config or tokenizer
            refused as data.
        HubError: the Hub cannot be read.
    """
    from huggingface_hub import HfApi

    from hubkit.evaluate.models import tokenizer_dir
    from hubkit.merge.base_files import fetch_base_snapshot

    merged_repo_id = merged_repo_id or MERGED.default_repo_id(repo_id)
    with hub_errors(merged_repo_id, endpoint):
        listing = read_remote(HfApi(endpoint=endpoint, token=token), merged_repo_id)
    listing.head(endpoint)  # a repo that is not there is refused as one, not as a card without a record
    record = MergeRecord.from_card_data(listing.card_data)
    if record is None:
        raise ReleaseError(
            f"{merged_repo_id} records no merge in its card (hubkit_merge): it is not a merged model "
            f"`hubkit push` published; name the merged repo with {MERGED.flag}"
        )
    if record.adapter_repo != repo_id:
        raise ReleaseError(
            f"{merged_repo_id} records a merge of {record.adapter_repo}, not {repo_id}: name the adapter repo "
            "it was merged from"
        )
    release, run = open_release(repo_id, steps=(record.step,), endpoint=endpoint, token=token)
    merged = Release.listed(listing, release.manifest, endpoint)
    manifest = release.manifest
    base_dir = fetch_base_snapshot(
        manifest.base_model, manifest.base_model_revision, endpoint=endpoint, token=token
    )
    wanted = [p for p in merged.files if "/" not in p and p != "README.md" and kinds.max_bytes_of(p)]
    merged_dir = download_release_files(merged, wanted, endpoint=endpoint, token=token)
    vocab_size = check_base_files(merged_dir, merged_repo_id)
    check_tokenizer_files(merged_dir, vocab_size, merged_repo_id)
    evaluated = [f"eval/{RESULTS_NAME}", f"eval/{SAMPLES_NAME}"]
    eval_dir = download_release_files(release, evaluated, endpoint=endpoint, token=token)
    evaluation = load_eval(eval_dir)
    checkpoint = next(c for c in run.checkpoints if c.step == record.step)
    if checkpoint.adapter_dir is None:
        raise ReleaseError(f"{repo_id}: step {record.step}'s adapter was not downloaded")
    questions = questions_of(evaluation.samples if evaluation is not None else ())
    check = check_merged(
        MergedCheckInput(
            base_dir=base_dir,
            adapter_dir=checkpoint.adapter_dir,
            adapter_tokenizer_dir=tokenizer_dir(run, base_dir),
            merged_dir=merged_dir,
            questions=questions,
            system_prompt=manifest.system_prompt,
            artifact=merged_repo_id,
            adapter=f"step {record.step}",
        )
    )
    if not check.passed:
        return check, record.verified, ()
    gguf = verify_release_gguf(
        repo_id,
        gguf_repo_id or GGUF.default_repo_id(repo_id),
        merged_dir,
        questions,
        manifest.system_prompt,
        release,
        endpoint=endpoint,
        token=token,
    )
    return check, record.verified, gguf
