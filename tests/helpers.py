"""Helpers the publishing tests share (holds no tests): running the CLI in-process, pushing a run's adapters,
the logits two models are compared on. Synthetic runs are built by `tests.support.runs`; the real
training runs are fixtures."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from hubkit.cli import main

# A short chat-formatted prompt in the Qwen3 tokenizer's ids: logits on it compare two models.
CHAT_INPUT_IDS = (151644, 872, 198, 3838, 374, 220, 17, 10, 18, 30, 151645)


def logits(model, input_ids: torch.Tensor) -> torch.Tensor:
    """The model's logits on `input_ids` (no gradients)."""
    with torch.no_grad():
        return model(input_ids=input_ids).logits


def sha256_of(path: Path | str) -> str:
    """The file's sha256, read here (an oracle independent of hubkit's hashing)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def chat_logits(model) -> torch.Tensor:
    """The model's logits on `CHAT_INPUT_IDS` (eval mode, no gradients)."""
    with torch.no_grad():
        return model.eval()(torch.tensor([CHAT_INPUT_IDS])).logits


def push_argv(run_dir: Path, repo_id: str, endpoint: str) -> list[str]:
    """`hubkit push`'s arguments for `run_dir` to `repo_id` on `endpoint` (options are added after)."""
    return ["push", "--run-dir", str(run_dir), "--repo-id", repo_id, "--endpoint", endpoint]


def push_adapters(run_dir: Path, repo_id: str, endpoint: str, *extra: str) -> int:
    """`hubkit push` of the adapter repo only (quiet, --no-merged, --no-space); returns the exit status."""
    return run_cli([*push_argv(run_dir, repo_id, endpoint), "--quiet", "--no-merged", "--no-space", *extra])


def commit_ids(hub_api, repo_id: str) -> list[str]:
    """The repo's commits, newest first."""
    return [c.commit_id for c in hub_api.list_repo_commits(repo_id)]


def write_requests(request_log: list, start: int) -> list[tuple[str, str, int]]:
    """Requests to the local Hub since `start` that upload bytes (LFS or Xet) or change a repo."""
    return [
        r
        for r in request_log[start:]
        if r[0] in ("PUT", "DELETE") or "/commit/" in r[1] or (r[0] == "POST" and r[1].startswith("/xet/"))
    ]


def uploaded(hub, start: int = 0) -> list[str]:
    """The sha256 of every object uploaded to `hub` since `hub.uploads[start]`, through LFS or Xet."""
    return [sha256 for _repo, sha256, _protocol in hub.uploads[start:]]


def chunks_sent(hub, start: int, end: int | None = None) -> set[bytes]:
    """The hashes of the chunks in the xorbs uploaded to `hub` between two points of its request log: what
    a Xet push sent of its files' bytes (a file registered again, its chunks already sent, adds none)."""
    from hubkit.localhub.xet.store import XetStore

    store = XetStore(hub.root)
    posted = [p for m, p, status in hub.request_log[start:end] if m == "POST" and "/xet/v1/xorbs/" in p]
    return {chunk.hash for path in posted for chunk in store.xorb_chunks(path.rsplit("/", 1)[-1])}


def chunks_of(hub, sha256s: set[str]) -> set[bytes]:
    """The hashes of the chunks that make up objects the Hub holds through Xet (by their sha256)."""
    from hubkit.localhub.xet.store import XetStore

    store = XetStore(hub.root)
    records = [store.file(file_id) for sha256 in sha256s if (file_id := store.file_of_object(sha256))]
    assert len(records) == len(sha256s), "an object did not arrive through Xet"
    return {
        chunk.hash
        for record in records
        for xorb, start, end, _length in record.terms
        for chunk in store.xorb_chunks(xorb)[start:end]
    }


def run_cli(argv: list[str]) -> int:
    """Run `hubkit ARGV` in this process; returns the exit status (`main` exits only on errors)."""
    try:
        main(argv)
    except SystemExit as exited:
        return exited.code if isinstance(exited.code, int) else 1
    return 0


@dataclass(frozen=True)
class Bounded:
    """How a process ended: exit status, output, wall seconds and peak resident memory (it and its children)."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_bytes: int


# A process forked from the test's own keeps the test's resident set as its peak past exec; the command is
# therefore started by this small launcher, which reports the peak of the children it waited for.
_LAUNCHER = """
import json, resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}, f)
"""


def run_bounded(args: list[str], cwd: Path, seconds: float = 30.0) -> Bounded:
    """`python ARGS` in its own process in `cwd`, killed after `seconds`, with its peak resident memory.

    The kernel reports the largest resident set of the command and of every child it waited for, so a
    bounded worker the command starts (a chat template's renderer) counts too.
    """
    with tempfile.TemporaryDirectory() as scratch:
        report, out_path, err_path = (Path(scratch) / n for n in ("report.json", "out", "err"))
        with out_path.open("wb") as out, err_path.open("wb") as err:
            started = time.monotonic()
            launcher = subprocess.Popen(
                [sys.executable, "-c", _LAUNCHER, str(report), sys.executable, *args],
                cwd=cwd,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                launcher.wait(seconds)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, 9)
                launcher.wait()
            elapsed = time.monotonic() - started
        ended = json.loads(report.read_text()) if report.is_file() else {"code": -9, "peak_kb": 0}
        return Bounded(
            returncode=ended["code"],
            stdout=out_path.read_text(errors="replace"),
            stderr=err_path.read_text(errors="replace"),
            seconds=elapsed,
            peak_bytes=ended["peak_kb"] * 1024,  # kilobytes on Linux
        )


def assert_fsck_clean(git_dir: Path) -> None:
    """`git fsck --strict` finds nothing wrong in one bare repository."""
    result = subprocess.run(
        ["git", "--git-dir", str(git_dir), "fsck", "--strict", "--no-dangling"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, f"{git_dir}: {result.stdout}{result.stderr}"
    assert "error" not in result.stderr.lower() and "missing" not in result.stdout.lower()


def assert_hub_fsck_clean(root: Path) -> int:
    """`assert_fsck_clean` for every repository of a local Hub rooted at `root`; returns how many."""
    git_dirs = sorted((Path(root) / "repos").glob("*/*/*.git"))
    for git_dir in git_dirs:
        assert_fsck_clean(git_dir)
    return len(git_dirs)


LLAMA_PYTHON = Path(__file__).resolve().parents[1] / ".venv-llama" / "bin" / "python"


def run_llama_worker(job: dict, out: Path) -> dict:
    """What llama.cpp computes for `job` (hubkit's own worker, hubkit/verify/llama_worker.py, with the tests'
    measures: tests/support/llama_worker.py, run in .venv-llama): its result.json, with the logits of every
    position of each of the job's ``sequences`` under ``logits``."""
    import numpy

    import hubkit.verify

    sequences = [[list(ids), 1, len(ids) + 1] for ids in job["sequences"]]
    (out / "job.json").write_text(json.dumps({"threads": 2, **job, "sequences": sequences}))
    worker = Path(__file__).parent / "support" / "llama_worker.py"
    verify_dir = str(Path(hubkit.verify.__file__).parent)
    process = subprocess.run(
        [str(LLAMA_PYTHON), "-I", str(worker), str(out / "job.json"), str(out), verify_dir],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    with numpy.load(out / "logits.npz") as logits:
        result["logits"] = [logits[str(i)] for i in range(len(job["sequences"]))]
    return result


def tfrecord(data: bytes, length: int | None = None) -> bytes:
    """A TFRecord as TensorBoard frames one, checksums included (`length`: declare another length)."""
    from google_crc32c import value as crc32c

    def masked(chunk: bytes) -> int:
        crc = crc32c(chunk)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    header = struct.pack("<Q", len(data) if length is None else length)
    return header + struct.pack("<I", masked(header)) + data + struct.pack("<I", masked(data))


def refused_status(call) -> int:
    """The HTTP status of the Hub's refusal of `call()` (which must raise the client's HTTP error)."""
    import pytest
    from huggingface_hub.errors import HfHubHTTPError

    with pytest.raises(HfHubHTTPError) as caught:
        call()
    return caught.value.response.status_code


# A shared local Hub's users: alice (a write and a read-only token, in the org "lab"), bob, carol (in "lab").
TEAM_USERS = f"""
[users.alice]
tokens = ["hf_alice_write"]
read_tokens = ["hf_alice_read"]
orgs = ["lab"]

[users.bob]
tokens = ["sha256:{hashlib.sha256(b"hf_bob_write").hexdigest()}"]

[users.carol]
tokens = ["hf_carol_write"]
orgs = ["lab"]
"""


def team_settings(folder: Path):
    """`HubSettings` of a Hub with `TEAM_USERS` (their file written in `folder`) and the admin `hf_admin`."""
    from hubkit.localhub import HubSettings
    from hubkit.localhub.accounts.access import load_users

    (folder / "users.toml").write_text(TEAM_USERS)
    return HubSettings(token="hf_admin", users=load_users(folder / "users.toml"))


def save_tiny_peft_adapter(out: Path) -> Path:
    """A real adapter in `out`: PEFT's save_pretrained of LoRA on a tiny Qwen3 (adapter files and PEFT's README)."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8,
    )  # fmt: skip
    model = get_peft_model(Qwen3ForCausalLM(config), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    model.save_pretrained(out)
    return out
