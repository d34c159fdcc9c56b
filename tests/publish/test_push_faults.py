"""A push through a flaky Hub: the local Hub with faults (`tests/support/faults.py`), one at a time, the real
client.

Each case either completes after retries, or fails with the one-line error that says to run the push
again, and that rerun completes. Afterwards every file of the repo equals the local one (sha256), the
repo has exactly the commits a clean push makes, and a rerun has sent no object the Hub already held.
The crash faults kill the Hub's process, so those cases serve it in a process of its own
(`tests/support/serve_faulty.py`).

The push takes the client's default path, Xet: the upload faults (`lfs_503`, `lfs_429`, the cut and the
crash mid-upload) strike its xorb and shard uploads as they strike LFS PUTs. hf_xet retries each request
itself (6 tries; the session shortens its waits, `HF_XET_CLIENT_RETRY_BASE_DELAY`), so small caps keep
these cases fast; hubkit retries a whole upload when the client gives up, and the commit (1, 2, 4 s)
after reading the repo again. The figures of the whole matrix (pushes tried and completed, faults injected, files lost) are
printed at the end of the module (`pytest -s`).
"""

from __future__ import annotations

import hashlib
import json
import signal
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from fixtures_hub import serve_faulty
from helpers import chunks_of, chunks_sent, push_adapters
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download

from hubkit.errors import PublishError
from hubkit.localhub import LocalHub
from hubkit.publish import PushReport, PushRequest, PushSession
from tests.support.faults import FaultPlan, Faults
from tests.support.runs import TINY_SHAPES, make_run

REPO_ID = "faults/run"
CLEAN_PUSH_COMMITS = 2  # the repo's first commit, then the push's one
FIGURES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def matrix_figures() -> Iterator[None]:
    yield
    print(
        f"\nfault matrix: {FIGURES['tried']} pushes tried, {FIGURES['injected']} faults injected, "
        f"{FIGURES['completed']} pushes completed, {FIGURES['files']} files checked, {FIGURES['lost']} lost"
    )


@pytest.fixture
def run_dir(tmp_path: Path, tiny_qwen3) -> Path:
    return make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)


def _publish_base(endpoint: str, tiny_qwen3) -> None:
    """The base model's config.json on this Hub (the push checks adapters against it)."""
    api = HfApi(endpoint=endpoint, token="any")
    api.create_repo(tiny_qwen3.repo_id)
    api.upload_file(
        path_or_fileobj=tiny_qwen3.local_dir / "config.json",
        path_in_repo="config.json",
        repo_id=tiny_qwen3.repo_id,
    )


def _push(run_dir: Path, endpoint: str, tmp_path: Path, *, in_matrix: bool = True) -> PushReport:
    """Push the run; when it completes, check that the repo holds it exactly (while the files it was
    pushed from are still there). `in_matrix`: counted in the fault matrix's figures."""
    FIGURES["tried"] += in_matrix
    request = PushRequest(run_dir, repo_id=REPO_ID, merged=False, space=False, endpoint=endpoint, token="any")
    with PushSession(request) as session:
        report = session.push()
        FIGURES["completed"] += in_matrix
        _assert_repo_is_the_run(report, endpoint, tmp_path, in_matrix)
    return report


def _push_fails_in_one_line(run_dir: Path, endpoint: str, capsys: pytest.CaptureFixture[str]) -> str:
    """`hubkit push` as a user runs it; returns its one-line error."""
    FIGURES["tried"] += 1
    capsys.readouterr()
    assert push_adapters(run_dir, REPO_ID, endpoint) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    assert "run the push again" in lines[0]
    return lines[0]


def _assert_repo_is_the_run(report: PushReport, endpoint: str, tmp_path: Path, in_matrix: bool) -> None:
    """Every planned file is on the Hub with the local bytes; the repo has a clean push's commits."""
    api = HfApi(endpoint=endpoint, token="any")
    (plan,) = report.plan.repos
    cache = Path(tempfile.mkdtemp(prefix="download-", dir=tmp_path))
    for planned in plan.files:
        FIGURES["files"] += in_matrix
        path = Path(hf_hub_download(REPO_ID, planned.path_in_repo, endpoint=endpoint, cache_dir=cache))
        local = planned.read_bytes()
        if hashlib.sha256(path.read_bytes()).hexdigest() != hashlib.sha256(local).hexdigest():
            FIGURES["lost"] += in_matrix
            pytest.fail(f"{planned.path_in_repo} on the Hub differs from the local file")
    assert len(api.list_repo_commits(REPO_ID)) == CLEAN_PUSH_COMMITS


# --- faults of a Hub in this process ------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "lfs_503=1:2",
        "lfs_429=1:2,retry_after=0",
        "commit_500_after_lfs=1:1",
        "drop_mid_upload=1:2",
    ],
    ids=["lfs-503", "lfs-429-retry-after", "commit-500-after-lfs", "connection-dropped-mid-upload"],
)
def test_a_push_completes_through_transient_faults(spec, run_dir, tiny_qwen3, tmp_path):
    name = spec.split("=")[0]
    faults = Faults(FaultPlan.parse(spec))
    with LocalHub(tmp_path / "hub", hooks=faults) as hub:
        _publish_base(hub.endpoint, tiny_qwen3)
        _push(run_dir, hub.endpoint, tmp_path)
        injected = faults.injected[name]
        FIGURES["injected"] += injected
        assert injected == int(spec.split(":")[1].split(",")[0])


def test_an_upload_failing_past_the_clients_own_retries_is_retried_by_the_push(
    tiny_qwen3, tmp_path, monkeypatch, caplog
):
    """Seven 503s in a row on a one-checkpoint run's upload: the client gives up after six tries, the push
    tries again. (The client's waits between its tries are skipped: 23 s each round otherwise.)"""
    import huggingface_hub.utils._http as client_http

    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    monkeypatch.setattr(client_http, "time", SimpleNamespace(sleep=lambda _seconds: None))
    faults = Faults(FaultPlan.parse("lfs_503=1:7"))
    with LocalHub(tmp_path / "hub", hooks=faults) as hub:
        _publish_base(hub.endpoint, tiny_qwen3)
        _push(run_dir, hub.endpoint, tmp_path)
        FIGURES["injected"] += faults.injected["lfs_503"]
        assert faults.injected["lfs_503"] == 7
    retried = [r.getMessage() for r in caplog.records if r.name == "hubkit.hub.retry"]
    assert retried == [
        "uploading checkpoints/global_step_1/adapter_model.safetensors to faults/run failed (HTTP 503); "
        "retrying in 1 s"
    ]


def test_a_commit_failing_past_the_retries_stops_in_one_line_and_the_rerun_sends_no_object_again(
    run_dir, tiny_qwen3, tmp_path, capsys
):
    # hubkit tries a commit 4 times: 4 failures exhaust them, and the rerun's commit goes through.
    faults = Faults(FaultPlan.parse("commit_500_after_lfs=1:4"))
    with LocalHub(tmp_path / "hub", hooks=faults) as hub:
        _publish_base(hub.endpoint, tiny_qwen3)
        error = _push_fails_in_one_line(run_dir, hub.endpoint, capsys)
        assert "HTTP 500, 4 tries" in error
        api = HfApi(endpoint=hub.endpoint, token="any")
        assert len(api.list_repo_commits(REPO_ID)) == CLEAN_PUSH_COMMITS - 1  # nothing committed
        assert len(hub.uploads) >= 2  # both adapters arrived before the commit failed
        failed_push_end = len(hub.request_log)
        _push(run_dir, hub.endpoint, tmp_path)
        arrived = {sha256 for _repo, sha256, _protocol in hub.uploads}
        assert not chunks_of(hub, arrived) & chunks_sent(hub, failed_push_end)  # none of their bytes again
        FIGURES["injected"] += faults.injected["commit_500_after_lfs"]
        assert faults.injected["commit_500_after_lfs"] == 4


def test_a_commit_whose_answer_is_lost_is_not_sent_twice(run_dir, tiny_qwen3, tmp_path, monkeypatch):
    """The Hub applies the commit, the answer never arrives: the push finds its commit and makes no other."""
    import httpx2
    from huggingface_hub import HfApi as Client

    create_commit = Client.create_commit

    def applied_then_lost(self, *args, **kwargs):
        create_commit(self, *args, **kwargs)
        raise httpx2.ReadError("the answer was lost")

    with LocalHub(tmp_path / "hub") as hub:
        _publish_base(hub.endpoint, tiny_qwen3)
        monkeypatch.setattr(Client, "create_commit", applied_then_lost)
        report = _push(run_dir, hub.endpoint, tmp_path, in_matrix=False)
        (repo,) = report.repos
        assert repo.commit_sha == HfApi(endpoint=hub.endpoint, token="any").repo_info(REPO_ID).sha


# --- a Hub process killed mid-push, and restarted -------------------------------------------------------


class ServedHub:
    """A Hub in a process of its own (`serve_faulty`) on one root and port, restartable after its process
    is killed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process, self.endpoint = serve_faulty(self.root, "--port", "0")
        self.port = self.endpoint.rsplit(":", 1)[1]

    def restart(self, faults: str = "") -> None:
        """Serve the same root on the same port again, with these faults (each crash fault strikes once)."""
        self.stop()
        self.process = serve_faulty(self.root, "--port", self.port, "--faults", faults)[0]

    def killed(self) -> bool:
        """Wait for the process to die; whether it was killed (SIGKILL: the crash fault)."""
        return self.process.wait(120) == -signal.SIGKILL

    def uploads(self) -> int:
        """Stop the Hub: the uploads of file bytes (xorbs, LFS PUTs) its last process received (each was
        eligible for the 503 fault), from the counters it prints as it stops."""
        self.stop()
        assert self.process.returncode == 0
        return json.loads(self.process.stdout.read().splitlines()[-1])["eligible"]["lfs_503"]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(30)


@pytest.fixture
def served(tmp_path: Path, tiny_qwen3, request: pytest.FixtureRequest) -> Iterator[ServedHub]:
    """A Hub process holding the base model, restarted with the fault `request.param`."""
    hub = ServedHub(tmp_path / "hub")
    try:
        _publish_base(hub.endpoint, tiny_qwen3)
        hub.restart(request.param)
        yield hub
    finally:
        hub.stop()


@pytest.mark.parametrize(
    "served",
    ["crash_mid_upload=1:1", "crash_mid_commit=1:1"],
    ids=["mid-upload", "mid-commit"],
    indirect=True,
)
def test_a_push_completes_when_the_killed_hub_comes_back(served: ServedHub, run_dir, tmp_path):
    killed = []

    def restart_when_killed() -> None:
        killed.append(served.killed())
        served.restart()

    watcher = threading.Thread(target=restart_when_killed)
    watcher.start()
    try:
        _push(run_dir, served.endpoint, tmp_path)
    finally:
        watcher.join(120)
    assert killed == [True]
    FIGURES["injected"] += 1


@pytest.mark.parametrize("served", ["crash_mid_commit=1:1"], ids=["mid-commit"], indirect=True)
def test_a_push_outlasted_by_a_killed_hub_stops_in_one_line_and_the_rerun_completes(
    served: ServedHub, run_dir, tmp_path, capsys
):
    error = _push_fails_in_one_line(run_dir, served.endpoint, capsys)
    assert served.killed() and "ConnectError" in error
    FIGURES["injected"] += 1
    served.restart()
    _push(run_dir, served.endpoint, tmp_path)
    assert served.uploads() == 0  # the objects arrived before the kill: none sent again


def test_a_repo_moved_by_someone_else_is_not_mistaken_for_an_applied_commit(
    run_dir, tiny_qwen3, tmp_path, monkeypatch
):
    """After a failed commit the repo moved, but not by this push: refused, the other commit kept."""
    import httpx2
    from huggingface_hub import HfApi as Client

    create_commit = Client.create_commit

    def someone_else_first(self, repo_id, *args, **kwargs):
        notes = [CommitOperationAdd(path_in_repo="NOTES.md", path_or_fileobj=b"someone else's")]
        create_commit(self, repo_id, *args, **{**kwargs, "operations": notes, "commit_message": "notes"})
        raise httpx2.ReadError("the connection dropped")

    with LocalHub(tmp_path / "hub") as hub:
        _publish_base(hub.endpoint, tiny_qwen3)
        monkeypatch.setattr(Client, "create_commit", someone_else_first)
        with pytest.raises(PublishError, match="changed on the Hub while pushing"):
            _push(run_dir, hub.endpoint, tmp_path, in_matrix=False)
        titles = [c.title for c in HfApi(endpoint=hub.endpoint, token="any").list_repo_commits(REPO_ID)]
        assert titles[0] == "notes" and len(titles) == CLEAN_PUSH_COMMITS


def test_a_xet_upload_hf_xet_gives_up_on_stops_the_push_in_one_line_and_the_rerun_completes(
    run_dir, tiny_qwen3, tmp_path, capsys
):
    """Every xorb upload answers 503: hf_xet tries each 6 times, then raises a builtin ConnectionError in
    its own words; the push retries the upload, then stops with hubkit's one line, not a traceback."""
    faults = Faults(FaultPlan.parse("lfs_503=1"))
    with LocalHub(tmp_path / "hub", hooks=faults) as hub:
        _publish_base(hub.endpoint, tiny_qwen3)
        error = _push_fails_in_one_line(run_dir, hub.endpoint, capsys)
        assert "HTTP 503, 4 tries" in error
        assert [p for m, p, s in hub.request_log if "/xet/v1/xorbs/" in p][0:1]  # it was the Xet path
        FIGURES["injected"] += faults.injected["lfs_503"]
    with LocalHub(tmp_path / "hub") as hub:  # the same storage, the faults gone
        _push(run_dir, hub.endpoint, tmp_path)
