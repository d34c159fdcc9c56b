"""What a push is told and what it answers, as data: `PushRequest` (the command line's options),
`PushProgress` (callbacks; the library never prints), `PushReport` and its `RepoReport`s."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.errors import PublishError
from hubkit.formats.gguf_types import choose_types
from hubkit.hub.repo_types import HUB_ENDPOINT
from hubkit.hub.retry import DEFAULT_RETRY
from hubkit.publish.adapter_repo import LeftOutOf
from hubkit.publish.plan import PushPlan, check_repo_id
from hubkit.publish.push_record import PushRecord
from hubkit.publish.split import MAX_FILES_PER_COMMIT
from hubkit.runs.manifest import SweepInfo
from hubkit.runs.model import Run

if TYPE_CHECKING:
    from huggingface_hub import HfApi


def gguf_type_names(types: Sequence[str]) -> tuple[str, ...]:
    """The asked types as llama.cpp names them (``Q8_0``), each once, in the order given.

    Raises:
        PublishError: a type hubkit does not write.
    """
    try:
        return tuple(t.name for t in choose_types(types))
    except ValueError as e:
        raise PublishError(str(e)) from e


@dataclass(frozen=True)
class PushRequest:
    """Everything a push is told: the command line's options, as data.

    Args:
        run_dir: the run directory.
        repo_id: the adapter repo; None means the repo the recipe recorded (`push_to` in hubkit.json),
            else `<token owner>/<run id>`.
        base_model: the base model's Hub id, for runs without hubkit.json whose adapters name none.
        steps: publish only these steps (each must be a complete checkpoint).
        every: publish only steps that are multiples of this.
        private: create new repos private.
        merged: also merge the newest pushed checkpoint and push it to its own repo.
        merged_repo_id: the merged repo; default `<repo_id>-merged`.
        gguf: also write the merged model as GGUF files of these types (``q8_0``, ``bf16``, ``f16``, any
            case; kept as llama.cpp names them, ``Q8_0``) and push them to their own repo; needs `merged`.
        gguf_repo_id: the GGUF repo; default `<repo_id>-GGUF`.
        gguf_lora: also write each pushed checkpoint's adapter as a GGUF LoRA (``lora/``), beside the base
            model's GGUF files of the `gguf` types (``base/``) it applies over; needs `gguf`.
        space: also create or update the Gradio Space that compares base and checkpoints.
        space_repo_id: the Space repo; default `<repo_id>-demo`.
        space_hardware: the Space's suggested hardware; default ZeroGPU (`zero-a10g`).
        samples: also publish the samples dataset (every evaluated answer, the training completions the
            framework saved), when the run has any.
        samples_repo_id: the samples dataset; default `<repo_id>-samples`.
        endpoint: the Hub URL.
        token: the Hub token; None looks it up (`HF_TOKEN`, then `hf auth login`'s). Never printed.
        dry_run: build the plan and compare it with the last recorded push; send nothing.
        checkpoints_dir: where the run's ``checkpoints_dir`` leads when that is outside the run directory
            (a symlink to a scratch disk): naming it says those checkpoints are this run's. Without it
            such a run is refused (another run's checkpoints would be published under this one's name).
        sweep: the sweep the run is one point of, when its manifest records none or another
            (`hubkit.publish.sweep`): its repos join the Hub Collection named for it.
        max_wait: the longest one step of the push waits for the Hub's rate limit to reset (seconds); a
            later reset stops the push in one line saying when to run it again.
        verify: check the merged model against its adapter, as users load them, before committing it
            (`hubkit.verify`); a mismatch refuses the push.
        max_files_per_commit: the most files one commit holds; a repo's changes take as many commits as
            they need (`hubkit.publish.split`; the Hub recommends at most 100).
    """

    run_dir: Path
    repo_id: str | None = None
    base_model: str | None = None
    steps: tuple[int, ...] | None = None
    every: int | None = None
    private: bool = False
    merged: bool = True
    merged_repo_id: str | None = None
    gguf: tuple[str, ...] = ()
    gguf_repo_id: str | None = None
    gguf_lora: bool = False
    space: bool = True
    space_repo_id: str | None = None
    space_hardware: str | None = None
    samples: bool = True
    samples_repo_id: str | None = None
    endpoint: str = HUB_ENDPOINT
    token: str | None = field(default=None, repr=False)
    dry_run: bool = False
    checkpoints_dir: Path | None = None
    sweep: SweepInfo | None = None
    max_wait: float = DEFAULT_RETRY.max_wait
    verify: bool = True
    max_files_per_commit: int = MAX_FILES_PER_COMMIT

    def __post_init__(self) -> None:
        if self.gguf and not self.merged:
            raise PublishError("GGUF files are written from the merged model: drop --no-merged, or --gguf")
        if self.gguf_lora and not self.gguf:
            raise PublishError(
                "--gguf-lora writes the base model in the --gguf types: add --gguf f16 (or others)"
            )
        object.__setattr__(self, "gguf", gguf_type_names(self.gguf))  # as llama.cpp names them: Q8_0


@dataclass(frozen=True)
class RepoReport:
    """What a push did to one repo. `commit_sha` is None when the repo was already up to date."""

    repo_id: str
    repo_type: str
    url: str
    commit_sha: str | None
    files_uploaded: int
    bytes_uploaded: int
    steps: tuple[int, ...]
    revision: str = "main"  # a checkpoint's branch (`hubkit.publish.revisions`), else the main branch
    commits: int = 1  # the commits it took (`hubkit.publish.split`); `commit_sha` is the last one's

    @property
    def unchanged(self) -> bool:
        return self.commit_sha is None


@dataclass(frozen=True)
class PushReport:
    """What a push did (or, for a dry run, would do).

    Args:
        run_id: the run.
        repo_id: the adapter repo the push chose (from the request, the manifest or the token owner).
        steps: the checkpoint steps this push published.
        repos: one report per repo that was pushed (empty for a dry run).
        plan: the desired files of every repo.
        revisions: one report per checkpoint branch (`step-N`) this push brought up to date.
        records: for a dry run, the last recorded push to each repo (by repo id) and branch
            (`REPO@BRANCH`) from this run directory.
        notes: things the user should know that are not errors (a repo already public, a merge skipped).
        finished: whether the run had finished training when it was read.
        dry_run: whether this was a dry run (the rest is filled by dry runs only).
        checkpoints_from: where the checkpoints were read from, in words.
        left_out: what the chosen checkpoints' folders hold that is not published, and why.
        changes: what vetting changed in the files on their way to the plan, one line per file.
    """

    run_id: str
    repo_id: str
    steps: tuple[int, ...]
    repos: tuple[RepoReport, ...]
    plan: PushPlan
    revisions: tuple[RepoReport, ...] = ()
    records: dict[str, PushRecord | None] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    finished: bool = True
    dry_run: bool = False
    checkpoints_from: str | None = None
    left_out: tuple[LeftOutOf, ...] = ()
    changes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PushProgress:
    """Callbacks a caller can give to show progress; the library never prints.

    Args:
        stage: a one-line description of the step starting now ("Merging step 40 into ...").
        merge: (bytes done, total bytes) while merging.
        gguf: (input bytes done, total) while writing GGUF files.
        upload_started: the total bytes the push will upload.
        uploaded: bytes just uploaded.
    """

    stage: Callable[[str], None] = lambda _message: None
    merge: Callable[[int, int], None] | None = None
    gguf: Callable[[int, int], None] | None = None
    upload_started: Callable[[int], None] = lambda _total: None
    uploaded: Callable[[int], None] = lambda _bytes: None


def adapter_repo_id(chosen: str | None, run: Run, api: HfApi | None) -> str:
    """The adapter repo: `chosen` (the request's, else the one the run recorded), else
    `<token owner>/<run id>`, asking the Hub through `api` (None: a dry run, which asks nothing).

    Raises:
        PublishError: an invalid id, or a dry run with none chosen.
    """
    if chosen is None and api is None:
        raise PublishError(
            "a dry run cannot ask the Hub who the token belongs to: pass --repo-id OWNER/NAME "
            "(or record one with the recipe's --push-to)"
        )
    if chosen is None:
        from hubkit.hub.auth import token_owner  # the client, imported by a push that asks the Hub

        chosen = f"{token_owner(api)}/{repo_name_for_run(run.manifest.run_id)}"  # type: ignore[arg-type]
    check_repo_id(chosen)
    return chosen


def repo_name_for_run(run_id: str) -> str:
    """`run_id` made into a valid Hub repo name (letters, digits, `-`, `_`, `.`; at most 96 characters)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", run_id)
    name = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", ".", name)).strip("-.")[:96].rstrip("-.")
    if not name:
        raise PublishError(f"run id {run_id!r} gives no valid repo name: pass --repo-id OWNER/NAME")
    return name
