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
    """Everything a push is told: the command line's options, as data. A field with a "help" is an option of
    `hubkit push` (`hubkit.cli.options`); the others:

    Args:
        repo_id: the adapter repo; None means the repo the recipe recorded (`push_to` in hubkit.json),
            else `<token owner>/<run id>`.
        base_model: the base model's Hub id, for runs without hubkit.json whose adapters name none.
        token: the Hub token; None looks it up (`HF_TOKEN`, then `hf auth login`'s). Never printed.
        sweep: the sweep the run is one point of, when its manifest records none or another
            (`hubkit.publish.sweep`): its repos join the Hub Collection named for it.

    `gguf` is kept as llama.cpp names the types (``Q8_0``); `gguf_lora`'s GGUF LoRAs apply over the base's
    GGUF files; `checkpoints_dir` says the checkpoints outside the run directory are this run's (without
    it, another run's could be published under this one's name); `max_files_per_commit` splits a repo's
    changes (`hubkit.publish.split`); `verify` is `hubkit.verify`.
    """

    run_dir: Path
    repo_id: str | None = None
    base_model: str | None = None
    steps: tuple[int, ...] | None = field(
        default=None,
        metadata={"help": "Publish only these steps.", "metavar": "N,M,...", "range": {"min": 0}},
    )
    every: int | None = field(
        default=None, metadata={"help": "Publish only steps that are multiples of N.", "range": {"min": 1}}
    )
    private: bool = field(
        default=False, metadata={"help": "Create the repos private (if the push creates them)."}
    )
    dry_run: bool = field(
        default=False, metadata={"help": "Print the plan (repos, files, sizes); send nothing."}
    )
    merged: bool = field(
        default=True,
        metadata={
            "help": "Also merge the newest pushed checkpoint into the base model and push it to its own "
            "repo (with --watch: once the run has finished)."
        },
    )
    merged_repo_id: str | None = field(
        default=None,
        metadata={"help": "The merged model's repo.  [default: <repo-id>-merged]", "metavar": "OWNER/NAME"},
    )
    gguf: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "Also write the merged model as GGUF files of these comma-separated types (q8_0, bf16, "
            "f16; the k-quants q4_k_m, q5_k_m, q6_k, q2_k, q3_k_s/m/l, q4_k_s, q5_k_s with "
            "hubkit[gguf-quant]) and push them to their own repo, for llama.cpp, Ollama and LM Studio.",
            "metavar": "TYPES",
        },
    )
    gguf_repo_id: str | None = field(
        default=None,
        metadata={"help": "The GGUF files' repo.  [default: <repo-id>-GGUF]", "metavar": "OWNER/NAME"},
    )
    gguf_lora: bool = field(
        default=False,
        metadata={
            "help": "Also write every pushed checkpoint as a GGUF LoRA (lora/) beside the base model's GGUF "
            "files of the --gguf types (base/), for llama.cpp's --lora and Ollama's ADAPTER."
        },
    )
    space: bool = field(
        default=True,
        metadata={
            "help": "Also create or update the Gradio Space comparing the base model with every checkpoint."
        },
    )
    space_repo_id: str | None = field(
        default=None,
        metadata={"help": "The Space's repo.  [default: <repo-id>-demo]", "metavar": "OWNER/NAME"},
    )
    space_hardware: str | None = field(
        default=None,
        metadata={
            "help": "The Space's suggested hardware (e.g. cpu-basic, t4-small).  "
            "[default: zero-a10g (ZeroGPU)]",
            "metavar": "FLAVOR",
        },
    )
    samples: bool = field(
        default=True,
        metadata={
            "help": "Also publish the samples dataset: every evaluated answer and the training completions "
            "the framework saved (when the run has any)."
        },
    )
    samples_repo_id: str | None = field(
        default=None,
        metadata={"help": "The samples dataset.  [default: <repo-id>-samples]", "metavar": "OWNER/NAME"},
    )
    endpoint: str = HUB_ENDPOINT
    token: str | None = field(default=None, repr=False)
    checkpoints_dir: Path | None = field(
        default=None,
        metadata={
            "help": "Publish checkpoints from outside the run directory: the folder the run's "
            "checkpoints_dir links to (a scratch disk). Without it such a run is refused.",
            "path": {"exists": True, "file_okay": False},
        },
    )
    sweep: SweepInfo | None = None
    max_wait: float = field(
        default=DEFAULT_RETRY.max_wait,
        metadata={
            "help": "The longest the push waits for the Hub's rate limit to reset (it says until when); a "
            "later reset stops it in one line saying how many commits are left and when to run it again.",
            "metavar": "SECONDS",
            "range": {"min": 0},
        },
    )
    max_files_per_commit: int = field(
        default=MAX_FILES_PER_COMMIT,
        metadata={
            "help": "The most files one commit holds (the Hub recommends at most 100): a first push of many "
            "checkpoints is split into several commits, the checkpoint folders first, the card and "
            "hubkit.json last.",
            "metavar": "N",
            "range": {"min": 1},
        },
    )
    verify: bool = field(
        default=True,
        metadata={
            "help": "Before committing the merged model, load it and the adapter as users do and compare "
            "their prompt ids, end tokens and logits on a few held-out prompts; a mismatch refuses the push."
        },
    )

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
    """What a push did (or, for a dry run, would do)."""

    run_id: str
    repo_id: str  # the adapter repo the push chose (from the request, the manifest or the token owner)
    steps: tuple[int, ...]  # the checkpoint steps this push published
    repos: tuple[RepoReport, ...]  # one per repo pushed (none for a dry run)
    plan: PushPlan
    revisions: tuple[RepoReport, ...] = ()  # one per checkpoint branch (`step-N`) brought up to date
    # A dry run's: the last recorded push to each repo (by repo id) and branch (`REPO@BRANCH`).
    records: dict[str, PushRecord | None] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what the user should know that is no error (a repo already public, ...)
    finished: bool = True  # the run had finished training when it was read
    dry_run: bool = False  # the rest is filled by dry runs only
    checkpoints_from: str | None = None  # where the checkpoints were read from, in words
    left_out: tuple[LeftOutOf, ...] = ()  # what the chosen checkpoints' folders hold unpublished, and why
    changes: tuple[str, ...] = ()  # what vetting changed on the way to the plan, one line per file


@dataclass(frozen=True)
class PushProgress:
    """Callbacks a caller can give to show progress; the library never prints."""

    stage: Callable[[str], None] = lambda _message: None  # the step starting now ("Merging step 40 into ...")
    merge: Callable[[int, int], None] | None = None  # (bytes done, total bytes) while merging
    gguf: Callable[[int, int], None] | None = None  # (input bytes done, total) while writing GGUF files
    upload_started: Callable[[int], None] = lambda _total: None  # the bytes the push will upload
    uploaded: Callable[[int], None] = lambda _bytes: None  # bytes just uploaded


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
