"""`make demo` as a user runs it: the model learns, the release is complete, and a second run on the same
Hub works and serves the Space."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from hubkit.demo import problems
from hubkit.demo.steps import BASE_REPO_ID, GRPO_STEPS, RUN_REPO_ID, SAVE_STEPS
from hubkit.localhub import LocalHub
from hubkit.rewards import gsm8k
from hubkit.runs.problem_hashes import problem_hash

MERGED_REPO_ID = RUN_REPO_ID + "-merged"
SPACE_REPO_ID = RUN_REPO_ID + "-demo"
STEPS = tuple(range(SAVE_STEPS, GRPO_STEPS + 1, SAVE_STEPS))
REWARDS_LINE = re.compile(
    r"^Held-out mean reward \((\d+) problems, the run's reward, greedy\): "
    r"base (\d+\.\d+), last checkpoint \(step (\d+)\) (\d+\.\d+)$",
    re.M,
)
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\((assets/[^)]+\.png)\)")


def test_shipped_problems_are_the_generators_and_disjoint() -> None:
    generated = problems.generate()
    assert {part: len(rows) for part, rows in generated.items()} == problems.PARTS
    for part, rows in generated.items():
        assert problems.load(part) == rows, f"{problems.path(part).name} differs from what generate() writes"
    hashes = {part: {problem_hash(p.question) for p in rows} for part, rows in generated.items()}
    assert sum(map(len, hashes.values())) == sum(problems.PARTS.values()), "a question appears twice"
    assert all(p.answer.endswith(f"#### {p.result}") for rows in generated.values() for p in rows)


@dataclass(frozen=True)
class DemoRun:
    root: Path
    stdout: str
    stderr: str


def _command(root: Path) -> list[str]:
    return [sys.executable, "-m", "hubkit.demo", "--root", str(root)]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo on a fresh Hub, without the Space (which would serve until Ctrl-C)."""
    workdir = tmp_path_factory.mktemp("demo")
    root = workdir / "demo-hub"
    result = subprocess.run(
        _command(root), capture_output=True, text=True, timeout=600, cwd=workdir, env=_env(DEMO_SPACE="0")
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return DemoRun(root, result.stdout, result.stderr)


def _rewards(stdout: str) -> tuple[float, int, float]:
    match = REWARDS_LINE.search(stdout)
    assert match, stdout[-3000:]
    assert int(match[1]) == len(problems.load("heldout"))
    return float(match[2]), int(match[3]), float(match[4])


def _mean_reward(samples: list[dict]) -> float:
    """The run's reward (the seed's four GSM8K rewards, weight 1 each), averaged, scored here by hand."""
    answers = [s["answer"] for s in samples]
    references = [s["reference"] for s in samples]
    parts = (
        gsm8k.correctness(answers, references),
        gsm8k.strict_format(answers),
        gsm8k.soft_format(answers),
        gsm8k.number_only(answers),
    )
    return sum(map(sum, parts)) / len(samples)


@pytest.mark.slow
def test_the_model_learns_and_the_release_is_complete(first_run: DemoRun) -> None:
    out = first_run.stdout
    assert first_run.stderr == "", "libraries printed progress bars, warnings or logs"
    assert out.splitlines()[0].startswith("Local Hub at http://127.0.0.1:")
    step_lines = re.findall(rf"^  step +(\d+)/{GRPO_STEPS}: reward \d+\.\d+ \(correct ", out, re.M)
    assert [int(s) for s in step_lines] == list(range(1, GRPO_STEPS + 1)), "one line per training step"

    base, last_step, last = _rewards(out)
    assert last_step == STEPS[-1]
    assert last > base, "the last checkpoint's held-out mean reward is higher than the base's"

    with LocalHub(first_run.root) as hub:
        api = HfApi(endpoint=hub.endpoint, token=False)
        assert {"model.safetensors", "config.json", "tokenizer.json"} <= set(
            api.list_repo_files(BASE_REPO_ID)
        )

        files = set(api.list_repo_files(RUN_REPO_ID))
        for step in STEPS:
            folder = f"checkpoints/global_step_{step}"
            assert {f"{folder}/adapter_model.safetensors", f"{folder}/adapter_config.json"} <= files
        assert {"adapter_model.safetensors", "adapter_config.json", "hubkit.json", "README.md"} <= files

        card = Path(api.hf_hub_download(RUN_REPO_ID, "README.md")).read_text()
        images = set(IMAGE_LINK.findall(card))
        assert images and images <= files, "the card's curves are in the repo"

        assert {"eval/results.json", "eval/samples.jsonl"} <= files
        results = json.loads(Path(api.hf_hub_download(RUN_REPO_ID, "eval/results.json")).read_text())
        assert [m["name"] for m in results["models"]] == ["base", *(f"global_step_{s}" for s in STEPS)]
        samples = [
            json.loads(line)
            for line in Path(api.hf_hub_download(RUN_REPO_ID, "eval/samples.jsonl")).read_text().splitlines()
        ]
        # The printed rewards are those of the published answers, scored again here.
        assert _mean_reward([s for s in samples if s["step"] is None]) == pytest.approx(base, abs=0.005)
        assert _mean_reward([s for s in samples if s["step"] == last_step]) == pytest.approx(last, abs=0.005)

        assert {"model.safetensors", "config.json", "README.md"} <= set(api.list_repo_files(MERGED_REPO_ID))

        space_files = set(api.list_repo_files(SPACE_REPO_ID, repo_type="space"))
        assert {"app.py", "space_config.json", "README.md"} <= space_files
        config = json.loads(
            Path(api.hf_hub_download(SPACE_REPO_ID, "space_config.json", repo_type="space")).read_text()
        )
        assert config["runs"][0]["adapter_repo"] == RUN_REPO_ID and config["base_model"] == BASE_REPO_ID


def _wait_for_page(url: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.mark.slow
def test_a_second_run_updates_the_same_repos_and_serves_the_space(first_run: DemoRun) -> None:
    with LocalHub(first_run.root) as hub:
        base_commits = HfApi(endpoint=hub.endpoint, token=False).list_repo_commits(BASE_REPO_ID)

    # Ctrl-C must reach the demo as KeyboardInterrupt even if this test run ignores SIGINT.
    process = subprocess.Popen(
        _command(first_run.root),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=first_run.root.parent,
        env=_env(DEMO_SPACE="1"),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            url = re.match(r"Space: (http://127\.0\.0\.1:\d+/) ", line)
            if url:
                break
        assert url, "".join(lines)[-3000:]
        assert _wait_for_page(url[1], timeout=180) == 200
        process.send_signal(signal.SIGINT)
        rest, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr[-3000:]
    out = "".join(lines) + rest
    assert "The Hub has stopped" in out
    # The same base model (no new commit) and the same training, so the same held-out rewards.
    assert _rewards(out) == _rewards(first_run.stdout)
    with LocalHub(first_run.root) as hub:
        assert HfApi(endpoint=hub.endpoint, token=False).list_repo_commits(BASE_REPO_ID) == base_commits
