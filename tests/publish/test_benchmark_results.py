"""An evaluation on a registered benchmark published as the Hub's own record of it (`.eval_results/`), read
back with huggingface_hub itself; a sample of the benchmark's split stays in the card alone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import push_adapters, run_cli

from hubkit.runs.eval_results import load_eval
from hubkit.runs.manifest import Manifest

HELDOUT = Path(__file__).resolve().parents[1] / "data" / "gsm8k_heldout.jsonl"
BENCHMARK = "hubkit-test/gsm8k-benchmark"
# Its own task id, as its eval.yaml names it: hubkit must read it, not assume one.
TASK_ID = "gsm8k_main_test_standin"


@pytest.fixture(scope="module")
def benchmark(hub_api) -> str:
    """A registered benchmark's stand-in on the local Hub: the held-out rows as the `main` config's test split,
    and an `eval.yaml` naming that split as its one task."""
    import pandas as pd
    from huggingface_hub import CommitOperationAdd

    rows = [json.loads(line) for line in HELDOUT.read_text().splitlines() if line.strip()]
    card = "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: test\n    path: main/test-*\n---\n"
    eval_yaml = (
        "name: GSM8K stand-in\nevaluation_framework: inspect-ai\n"
        f"tasks:\n  - id: {TASK_ID}\n    config: main\n    split: test\n"
    )
    hub_api.create_repo(BENCHMARK, repo_type="dataset", exist_ok=True)
    files = {
        "README.md": card.encode(),
        "eval.yaml": eval_yaml.encode(),
        "main/test-00000-of-00001.parquet": pd.DataFrame(rows).to_parquet(),
    }
    hub_api.create_commit(
        BENCHMARK,
        [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in files.items()],
        commit_message="a benchmark stand-in",
        repo_type="dataset",
    )
    return BENCHMARK


def _evaluated_copy(trl_run_dir: Path, dest: Path, endpoint: str, n: int) -> Path:
    shutil.copytree(
        trl_run_dir, dest, ignore=shutil.ignore_patterns("optimizer.pt", "rng_state.pth", "scheduler.pt")
    )
    Manifest.load(dest).with_updates(run_id=dest.name).save(dest)
    argv = ["eval", "--run-dir", str(dest), "--problems", f"{BENCHMARK}:main", "--split", "test"]
    argv += ["--metric", "gsm8k_correctness", "--steps", "3", "--n", str(n), "--max-new-tokens", "8"]
    assert run_cli([*argv, "--dtype", "float32", "--endpoint", endpoint, "--quiet"]) == 0
    return dest


def test_the_whole_split_is_the_hubs_eval_result_and_a_sample_only_the_cards(
    trl_run_dir: Path, benchmark: str, tmp_path: Path, local_hub, hub_api, make_repo_id
) -> None:
    endpoint = local_hub.endpoint
    whole = _evaluated_copy(trl_run_dir, tmp_path / "whole", endpoint, n=100)
    summary = load_eval(whole).summary
    assert (summary.problems.n, summary.problems.whole, summary.problems.config) == (6, True, "main")
    repo = make_repo_id("whole")
    assert push_adapters(whole, repo, endpoint) == 0

    (entry,) = hub_api.model_info(repo, expand=["evalResults"]).eval_results
    assert (entry.dataset_id, entry.task_id) == (benchmark, TASK_ID)
    assert entry.value == pytest.approx(summary.by_step(3).accuracy, abs=1e-6)
    assert entry.dataset_revision == summary.problems.revision and entry.date == summary.created_at
    assert entry.source_url.endswith(f"{repo}/blob/main/eval/results.json")
    assert "step 3" in entry.notes and "gsm8k_correctness" in entry.notes
    card = Path(hub_api.hf_hub_download(repo, "README.md")).read_text()
    assert "(the whole test split)" in card

    # An unchanged re-push writes the same file: no commit.
    head = hub_api.model_info(repo).sha
    assert push_adapters(whole, repo, endpoint) == 0
    assert hub_api.model_info(repo).sha == head

    # The first two problems are not the benchmark's score: no .eval_results, and the card says so.
    sample = _evaluated_copy(trl_run_dir, tmp_path / "sample", endpoint, n=2)
    assert load_eval(sample).summary.problems.whole is False
    repo = make_repo_id("sample")
    assert push_adapters(sample, repo, endpoint) == 0
    assert not [f for f in hub_api.list_repo_files(repo) if f.startswith(".eval_results/")]
    assert not hub_api.model_info(repo, expand=["evalResults"]).eval_results
    card = Path(hub_api.hf_hub_download(repo, "README.md")).read_text()
    assert (
        "a sample of its test split (the first 2 problems with an answer): not the benchmark's own score"
        in card
    )
