"""`make demo`: the whole story on the embedded Hub, run as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from huggingface_hub import HfApi

from hubkit.localhub import LocalHub


@pytest.mark.slow
def test_demo_trains_pushes_and_loads_back(tmp_path):
    root = tmp_path / "demo-hub"
    result = subprocess.run(
        [sys.executable, "-m", "hubkit.demo", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.splitlines()[0].startswith("Local Hub at http://127.0.0.1:")
    assert re.search(r"^Published base model demo/tiny-qwen3 .*model\.safetensors", out, re.M)
    assert "Run demo_tiny_gsm8k_grpo: checkpoint-1, checkpoint-2, checkpoint-3" in out
    assert re.search(r"^demo/tiny-qwen3-grpo-gsm8k: committed \w+ \(steps 1, 2, 3;", out, re.M)
    assert re.search(r"^demo/tiny-qwen3-grpo-gsm8k-merged: committed \w+ \(steps 3;", out, re.M)
    change = re.search(r"largest logit change against the base: (\S+)", out)
    assert change and float(change[1]) > 0

    # The repos outlive the demo: a Hub started again on the same root serves them.
    with LocalHub(root) as hub:
        api = HfApi(endpoint=hub.endpoint, token=False)
        files = set(api.list_repo_files("demo/tiny-qwen3-grpo-gsm8k"))
        assert {f"checkpoints/global_step_{n}/adapter_model.safetensors" for n in (1, 2, 3)} <= files
        assert {"adapter_model.safetensors", "adapter_config.json", "hubkit.json", "README.md"} <= files
        assert "model.safetensors" in api.list_repo_files("demo/tiny-qwen3-grpo-gsm8k-merged")
