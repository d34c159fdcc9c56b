"""Pushing while training: the TRL callback, against a Hub that refuses the first pushes."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fixtures_runs import make_trl_run
from huggingface_hub import HfApi
from transformers import TrainerCallback

from hubkit.integrations.trl import HubkitPushCallback
from hubkit.localhub import LocalHub
from hubkit.publish.auth import hub_client
from hubkit.tiny import publish_model

TOKEN = "hf_hubkit_flaky_hub_token"


class ReopenHub(TrainerCallback):
    """Restarts a stopped Hub (same root, same port) when training saves step `at_step`."""

    def __init__(self, hub: LocalHub, at_step: int) -> None:
        self.hub, self.at_step, self.reopened = hub, at_step, None

    def on_save(self, args, state, control, **_):
        if state.global_step == self.at_step:
            self.reopened = LocalHub(self.hub.root, port=self.hub.port, token=TOKEN).start()


@pytest.mark.slow
def test_training_finishes_while_the_hub_refuses_and_the_end_push_completes_the_repo(
    tmp_path: Path, tiny_qwen3, new_repo_id: str
) -> None:
    hub = LocalHub(tmp_path / "hub", token=TOKEN).start()
    api = hub_client(hub.endpoint, TOKEN)
    publish_model(api, Path(tiny_qwen3.local_dir), tiny_qwen3.repo_id)  # the push checks against its base
    hub.port = urlsplit(hub.endpoint).port
    hub.stop()  # refuses every connection until step 3 is saved
    reopen = ReopenHub(hub, at_step=3)
    push = HubkitPushCallback(new_repo_id, endpoint=hub.endpoint, token=TOKEN)
    try:
        # The Hub comes back before the push callback sees step 3's save.
        run_dir = make_trl_run(
            tmp_path / "runs" / "flaky",
            Path(tiny_qwen3.local_dir),
            tiny_qwen3.repo_id,
            callbacks=[reopen, push],
        )
        assert reopen.reopened is not None, "training finished: all 3 steps were saved"
        assert push.pusher is not None and push.pusher.failures >= 1  # the early pushes were refused
        files = set(HfApi(endpoint=hub.endpoint, token=TOKEN).list_repo_files(new_repo_id))
        assert {f"checkpoints/global_step_{s}/adapter_model.safetensors" for s in (1, 2, 3)} <= files
        assert {"adapter_model.safetensors", "README.md", "hubkit.json"} <= files
        merged = HfApi(endpoint=hub.endpoint, token=TOKEN).list_repo_files(new_repo_id + "-merged")
        assert "model.safetensors" in merged
        assert (run_dir / "hubkit.json").is_file()
    finally:
        if reopen.reopened is not None:
            reopen.reopened.stop()
