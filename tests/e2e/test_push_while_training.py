"""Pushing while training: `hubkit push --watch` on a run whose checkpoints appear one by one, and the TRL
callback against a Hub that refuses the first pushes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fixtures_hub import TEST_NAMESPACE
from fixtures_runs import make_trl_run
from helpers import push_adapters
from huggingface_hub import HfApi
from transformers import TrainerCallback

from hubkit.hub.auth import hub_client
from hubkit.integrations.trl import HubkitPushCallback
from hubkit.localhub import LocalHub
from hubkit.localhub.accounts.access import load_users
from hubkit.localhub.http.context import HubSettings
from tests.support.runs import TINY_SHAPES, finish_run, make_run, write_checkpoint
from tests.support.tiny import publish_model

REPO_ROOT = Path(__file__).resolve().parents[2]
ADMIN = "hf_hubkit_refusing_hub_admin"
TOKEN = "hf_hubkit_refusing_hub_user"


def _hub_settings(tmp_path: Path, can_write: bool) -> HubSettings:
    """The Hub's accounts: the test namespace's user holds TOKEN, a read-only token unless `can_write`."""
    users = tmp_path / f"users-{can_write}.toml"
    kind = "tokens" if can_write else "read_tokens"
    users.write_text(f'[users.{TEST_NAMESPACE}]\n{kind} = ["{TOKEN}"]\n')
    return HubSettings(token=ADMIN, users=load_users(users))


class GrantWrites(TrainerCallback):
    """Restarts the Hub (same root, same port) with TOKEN able to write, when training saves `at_step`."""

    def __init__(self, hub: LocalHub, settings: HubSettings, at_step: int) -> None:
        self.hub, self.settings, self.at_step, self.granted = hub, settings, at_step, False

    def on_save(self, args, state, control, **_):
        if state.global_step == self.at_step:
            self.hub.stop()
            self.hub = LocalHub(self.hub.root, port=self.hub.port, settings=self.settings).start()
            self.granted = True


@pytest.mark.slow
def test_training_finishes_while_the_hub_refuses_and_the_end_push_completes_the_repo(
    tmp_path: Path, tiny_qwen3, new_repo_id: str
) -> None:
    hub = LocalHub(tmp_path / "hub", settings=_hub_settings(tmp_path, can_write=False)).start()
    hub.port = urlsplit(hub.endpoint).port
    publish_model(hub_client(hub.endpoint, ADMIN), Path(tiny_qwen3.local_dir), tiny_qwen3.repo_id)
    # Until step 3 is saved the Hub refuses every write of TOKEN (403): the pushes of steps 1 and 2 fail.
    grant = GrantWrites(hub, _hub_settings(tmp_path, can_write=True), at_step=3)
    push = HubkitPushCallback(new_repo_id, endpoint=hub.endpoint, token=TOKEN)
    try:
        run_dir = make_trl_run(
            tmp_path / "runs" / "refused",
            Path(tiny_qwen3.local_dir),
            tiny_qwen3.repo_id,
            callbacks=[grant, push],
        )
        assert grant.granted, "training finished: all 3 steps were saved"
        assert push.pusher is not None and push.pusher.failures >= 1  # the early pushes were refused
        api = HfApi(endpoint=hub.endpoint, token=TOKEN)
        files = set(api.list_repo_files(new_repo_id))
        assert {f"checkpoints/global_step_{s}/adapter_model.safetensors" for s in (1, 2, 3)} <= files
        assert {"adapter_model.safetensors", "README.md", "hubkit.json"} <= files
        assert "model.safetensors" in api.list_repo_files(new_repo_id + "-merged")
        assert (run_dir / "hubkit.json").is_file()
    finally:
        grant.hub.stop()


def test_watch_pushes_checkpoints_as_they_appear_until_the_run_finishes(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id
):
    run_dir = make_run(tmp_path / "runs", (), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)

    def published(step: int) -> bool:
        return hub_api.file_exists(new_repo_id, f"checkpoints/global_step_{step}/adapter_config.json")

    def train() -> None:
        for step in (1, 2, 3):
            # Wait for the previous checkpoint's push, so that each push holds one new step.
            deadline = time.monotonic() + 60
            while step > 1 and not published(step - 1) and time.monotonic() < deadline:
                time.sleep(0.05)
            if step < 3:
                write_checkpoint(run_dir, step, base_model="x/y", shapes=TINY_SHAPES)
                continue
            # Step 3 is seen half-saved for a while: weights in place, the completion marker not yet.
            path = write_checkpoint(tmp_path / "saving", step, base_model="x/y", shapes=TINY_SHAPES)
            state = json.loads((path / "trainer_state.json").read_text())
            (path / "trainer_state.json").write_text(json.dumps({**state, "global_step": 0}))
            path = path.rename(run_dir / path.name)
            time.sleep(0.6)
            (path / "trainer_state.json").write_text(json.dumps(state))
        finish_run(run_dir)

    trainer = threading.Thread(target=train)
    trainer.start()
    try:
        code = push_adapters(run_dir, new_repo_id, local_hub.endpoint, "--watch", "--watch-interval", "0.2")
    finally:
        trainer.join()
    assert code == 0
    files = hub_api.list_repo_files(new_repo_id)
    assert {f"checkpoints/global_step_{s}/adapter_model.safetensors" for s in (1, 2, 3)} <= set(files)
    titles = [c.title for c in hub_api.list_repo_commits(new_repo_id)]
    # The remote was read once per push, not at every look at the run (a look every 0.2 s): one read per
    # new step, one more after the first push created the repo, and one more when the run's end was seen
    # by a later look than step 3's push.
    reads = [r for r in local_hub.request_log if r[1] == f"/api/models/{new_repo_id}/revision/main"]
    assert 4 <= len(reads) <= 5
    # Each checkpoint went up in its own push, as it became complete.
    assert [t for t in titles if "steps" in t] == [
        "hubkit push synthetic-run: steps 3",
        "hubkit push synthetic-run: steps 2",
        "hubkit push synthetic-run: steps 1",
    ]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_a_watching_push(tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, stop):
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    command = [sys.executable, "-m", "hubkit", "push", "--run-dir", str(run_dir), "--repo-id", new_repo_id]
    options = [
        "--endpoint",
        local_hub.endpoint,
        "--quiet",
        "--no-merged",
        "--no-space",
        "--watch",
        "--watch-interval",
        "0.1",
    ]
    # PYTHONFAULTHANDLER: if the push hangs, SIGABRT makes it print every thread's stack for the report.
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(
        [*command, *options],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # A terminal gives the command the default SIGINT action; a test run started in the background
        # inherits SIGINT ignored (POSIX shells do that to background jobs), and so would the push.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not hub_api.file_exists(new_repo_id, "checkpoints/global_step_1/adapter_model.safetensors"):
            assert time.monotonic() < deadline, "the watching push never published step 1"
            time.sleep(0.1)
        process.send_signal(stop)
        try:
            _, stderr = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            _, stderr = process.communicate(timeout=30)
            pytest.fail(f"the watching push ignored {stop.name} for 60 s; its stacks:\n{stderr[-6000:]}")
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "Aborted."


def test_watch_reports_listed_steps_the_finished_run_never_saved(
    tmp_path, tiny_qwen3, local_hub, hub_api, new_repo_id, capsys
):
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    finish_run(run_dir)
    assert push_adapters(run_dir, new_repo_id, local_hub.endpoint, "--watch", "--steps", "2,9") == 1
    assert "no complete checkpoint at step(s) 9" in capsys.readouterr().err
    files = hub_api.list_repo_files(new_repo_id)
    assert "checkpoints/global_step_2/adapter_model.safetensors" in files
    assert "checkpoints/global_step_1/adapter_model.safetensors" not in files
