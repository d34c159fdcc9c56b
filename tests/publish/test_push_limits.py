"""A push within the Hub's limits, through the real client against the local Hub: each refusal named by its
condition in the Hub's words (a 402 for the plan, a 403 for the storage quota, a 429 for a rate), a 429
waited out as the Hub says or ended in one line saying what is left and when to run the push again, a
Space the Hub refuses costing nothing else, and a sweep of mixed base models refused before anything."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers import push_adapters, push_argv, run_cli
from huggingface_hub import HfApi
from test_sweep import _sweep_run

from hubkit.localhub import HubSettings, LocalHub
from hubkit.localhub.accounts.limits import HubLimits
from hubkit.runs.manifest import Manifest, SweepInfo
from tests.support.runs import TINY_SHAPES, make_run

REPO_ID = "limits/run"


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), lines
    return lines[0]


@contextmanager
def _free_hub(root: Path, tiny_qwen3, limits: str = "") -> Iterator[LocalHub]:
    """A local Hub whose callers are on the free plan, with production's limits as `limits` changes them,
    holding the base model's config.json (the push checks the adapters against it)."""
    settings = HubSettings(plan="free", limits=HubLimits().with_settings(limits))
    with LocalHub(root, settings=settings) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        api.create_repo(tiny_qwen3.repo_id, exist_ok=True)
        api.upload_file(
            path_or_fileobj=tiny_qwen3.local_dir / "config.json",
            path_in_repo="config.json",
            repo_id=tiny_qwen3.repo_id,
        )
        yield hub


def _commits_by_branch(api: HfApi, repo_id: str) -> dict[str, int]:
    """Each branch's commits on top of the repo's first (the push's own)."""
    refs = api.list_repo_refs(repo_id)
    return {b.name: len(api.list_repo_commits(repo_id, revision=b.name)) - 1 for b in refs.branches}


# --- each refusal by its condition ------------------------------------------------------------------------


def test_a_private_push_past_the_storage_quota_names_the_quota_in_the_hubs_words(
    tmp_path, tiny_qwen3, capsys
):
    """No empty repo is left behind: the adapter repo the push created, with nothing committed, is removed."""
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _free_hub(tmp_path / "hub", tiny_qwen3, "free.private_storage=1kB") as hub:
        capsys.readouterr()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint, "--private") == 1
        error = _one_error_line(capsys)
        assert not HfApi(endpoint=hub.endpoint, token="any").repo_exists(REPO_ID)
    assert "storage quota" in error and "Private repository storage limit reached" in error, error
    assert "HTTP 403" in error and "without --private" in error
    assert error.endswith(f"removed {REPO_ID}, created by this push with nothing committed")
    assert "HF_TOKEN" not in error and "hf auth login" not in error


@contextmanager
def _space_refused(tmp_path: Path, tiny_qwen3, run_dir: Path, capsys) -> Iterator[tuple[HfApi, str]]:
    """`run_dir` pushed to a free Hub, its Space on cpu-basic (which a free account may not host: 402): it
    exits 0; the client, and the push's one warning line about the Space."""
    with _free_hub(tmp_path / "hub", tiny_qwen3) as hub:
        capsys.readouterr()
        argv = [*push_argv(run_dir, REPO_ID, hub.endpoint), "--no-merged", "--space-hardware", "cpu-basic"]
        assert run_cli(argv) == 0
        out = capsys.readouterr().out
        warnings = [line for line in out.splitlines() if "Space" in line and "not created" in line]
        assert len(warnings) == 1, out
        yield HfApi(endpoint=hub.endpoint, token="any"), warnings[0]


def test_a_space_the_hub_refuses_for_the_plan_costs_nothing_else(tmp_path, tiny_qwen3, capsys):
    """A free account may not host a Gradio Space on cpu-basic (402): the adapter repo and every step's
    branch are published, the push exits 0 with one warning line, and no card links the Space."""
    run_dir = make_run(tmp_path / "runs", (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _space_refused(tmp_path, tiny_qwen3, run_dir, capsys) as (api, warning):
        assert warning.startswith("Warning: the Space limits/run-demo was not created")
        assert "HTTP 402" in warning and "requires a PRO subscription" in warning
        assert "--no-space" in warning and "--space-hardware zero-a10g" in warning
        assert not api.repo_exists(REPO_ID + "-demo", repo_type="space")
        assert _commits_by_branch(api, REPO_ID) == {"main": 1, "step-1": 1, "step-2": 1}
        for revision in ("main", "step-1", "step-2"):
            card = Path(api.hf_hub_download(REPO_ID, "README.md", revision=revision)).read_text()
            assert "run-demo" not in card and "/spaces/" not in card, revision


def test_a_sweeps_space_the_hub_refuses_for_the_plan_costs_nothing_else(tmp_path, tiny_qwen3, capsys):
    """A run of a sweep has no Space of its own; its sweep's one Space refused (402) is the one warning line,
    the release and the sweep's page are published, and nothing links or lists a Space."""
    run_dir = _sweep_run(tmp_path / "runs", tiny_qwen3.repo_id, "lp sweep", 0.5, 3, 50)
    space, page = "limits/lp-sweep-demo", "limits/lp-sweep-sweep"
    with _space_refused(tmp_path, tiny_qwen3, run_dir, capsys) as (api, warning):
        assert warning.startswith(f"Warning: the Space {space} was not created") and "HTTP 402" in warning
        assert not api.repo_exists(space, repo_type="space")
        assert not api.repo_exists(REPO_ID + "-demo", repo_type="space")
        for repo_id, repo_type in ((REPO_ID, "model"), (REPO_ID + "-samples", "dataset"), (page, "dataset")):
            card = Path(api.hf_hub_download(repo_id, "README.md", repo_type=repo_type)).read_text()
            assert "-demo" not in card and "/spaces/" not in card, repo_id
        (collection,) = api.list_collections(owner="limits")
        assert "space" not in {item.item_type for item in api.get_collection(collection.slug).items}


def test_a_zerogpu_space_past_the_plans_cap_is_a_warning_not_a_token_error(tmp_path, tiny_qwen3, capsys):
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _free_hub(tmp_path / "hub", tiny_qwen3, "free.zero_gpu_spaces=0") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        capsys.readouterr()
        assert run_cli([*push_argv(run_dir, REPO_ID, hub.endpoint), "--no-merged"]) == 0
        captured = capsys.readouterr()
        (warning,) = [line for line in captured.out.splitlines() if "not created" in line]
        assert "HTTP 403" in warning and "the most its plan allows" in warning and "--no-space" in warning
        assert "HF_TOKEN" not in captured.out + captured.err
        assert not api.repo_exists(REPO_ID + "-demo", repo_type="space") and api.repo_exists(REPO_ID)


def test_the_space_is_created_on_zerogpu_which_a_free_account_may_host(tmp_path, tiny_qwen3, capsys):
    run_dir = make_run(tmp_path / "runs", (1,), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _free_hub(tmp_path / "hub", tiny_qwen3) as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        assert run_cli([*push_argv(run_dir, REPO_ID, hub.endpoint), "--no-merged", "-q"]) == 0
        assert api.get_space_runtime(REPO_ID + "-demo").hardware == "zero-a10g"
        card = Path(api.hf_hub_download(REPO_ID, "README.md")).read_text()
        assert "limits/run-demo" in card


# --- the Hub's commit rate ----------------------------------------------------------------------------------


def test_a_push_past_the_commit_rate_waits_until_the_hub_says_and_completes_in_one_invocation(
    tmp_path, tiny_qwen3, caplog
):
    """3 commits per repo per 12 s: the adapter repo's main and 4 step branches wait once. The retries of
    today gave up after 1 + 2 + 4 s; the push waits as the Hub's Retry-After says, saying until when."""
    run_dir = make_run(tmp_path / "runs", (1, 2, 3, 4), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _free_hub(tmp_path / "hub", tiny_qwen3, "commits_per_repo=3,commit_window=12") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        started = time.monotonic()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
        took = time.monotonic() - started
        assert _commits_by_branch(api, REPO_ID) == {"main": 1, **{f"step-{s}": 1 for s in (1, 2, 3, 4)}}
    waits = [r.getMessage() for r in caplog.records if "waiting until" in r.getMessage()]
    assert len(waits) == 1 and re.search(r"waiting until \d\d:\d\d:\d\d UTC \(1[0-2] s\)", waits[0]), waits
    assert "You have exceeded the rate limit for repository commits" in waits[0]
    print(f"\n5 commits at 3 per 12 s: one invocation, {len(waits)} waits, {took:.1f} s")


def test_sixty_checkpoints_at_ten_commits_per_window_end_complete_in_one_invocation(
    tmp_path, tiny_qwen3, caplog
):
    """Main first, then the 60 branches newest first, each committed once, waiting for the Hub's window
    where it must; every checkpoint loads with PEFT from main's subfolder and from its branch."""
    import torch
    from helpers import logits
    from huggingface_hub import snapshot_download
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    steps = tuple(range(1, 61))
    run_dir = make_run(tmp_path / "runs", steps, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    with _free_hub(tmp_path / "hub", tiny_qwen3, "commits_per_repo=10,commit_window=3") as hub:
        api = HfApi(endpoint=hub.endpoint, token="any")
        start = len(hub.request_log)
        started = time.monotonic()
        assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
        took = time.monotonic() - started
        log = hub.request_log[start:]
        committed = [p.rsplit("/", 1)[1] for _m, p, status in log if "/commit/" in p and status == 200]
        refused = sum(1 for _m, p, status in log if "/commit/" in p and status == 429)
        # The repo's first commit, where each branch starts, is read once, not once per branch.
        assert (
            sum(1 for m, p, _s in log if m == "GET" and p.startswith(f"/api/models/{REPO_ID}/commits/")) == 1
        )
        # Main's 127 files in two commits of at most 100 (`hubkit.publish.split`), then each branch once.
        assert committed == ["main", "main", *(f"step-{s}" for s in reversed(steps))]
        assert _commits_by_branch(api, REPO_ID) == {"main": 2, **{f"step-{s}": 1 for s in steps}}
        folders = {p.split("/")[1] for p in api.list_repo_files(REPO_ID) if p.startswith("checkpoints/")}
        assert folders == {f"global_step_{s}" for s in steps}
        ids = torch.tensor([[1, 5, 9, 42, 7, 3]])
        for step in (1, 60):
            by_branch = snapshot_download(
                REPO_ID, revision=f"step-{step}", endpoint=hub.endpoint, cache_dir=tmp_path / "c"
            )
            main = snapshot_download(REPO_ID, endpoint=hub.endpoint, cache_dir=tmp_path / "c")
            models = [
                PeftModel.from_pretrained(
                    AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir), folder
                ).eval()
                for folder in (by_branch, f"{main}/checkpoints/global_step_{step}")
            ]
            torch.testing.assert_close(logits(models[0], ids), logits(models[1], ids), rtol=0, atol=0)
    waits = [r.getMessage() for r in caplog.records if "waiting until" in r.getMessage()]
    assert waits and refused == len(waits)
    print(
        f"\n60 checkpoints at 10 commits per 3 s: 1 invocation, {len(committed)} commits, {refused} answered "
        f"429 and waited out, {took:.1f} s"
    )


def test_a_rate_limit_past_max_wait_stops_in_one_line_and_the_rerun_commits_only_what_is_left(
    tmp_path, tiny_qwen3, capsys
):
    run_dir = make_run(tmp_path / "runs", (1, 2, 3, 4), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    invocations = 0
    with _free_hub(tmp_path / "hub", tiny_qwen3, "commits_per_repo=3,commit_window=3600") as hub:
        capsys.readouterr()
        invocations += 1
        start = len(hub.request_log)
        assert push_adapters(run_dir, REPO_ID, hub.endpoint, "--max-wait", "5") == 1
        error = _one_error_line(capsys)
        api = HfApi(endpoint=hub.endpoint, token="any")
        before = _commits_by_branch(api, REPO_ID)
        commits = [p.rsplit("/", 1)[1] for m, p, status in hub.request_log[start:] if "/commit/" in p]
        committed = [
            p.rsplit("/", 1)[1]
            for m, p, status in hub.request_log[start:]
            if "/commit/" in p and status == 200
        ]
    assert "rate-limited" in error and "You can retry this action in about 60 minutes" in error, error
    assert re.search(
        r"2 of this push's 5 commits are left: run the push again after \d\d:\d\d:\d\d UTC \(it makes only "
        r"those\), or give it --max-wait 3\d\d\d to wait$",
        error,
    )
    assert "HF_TOKEN" not in error
    # Main first (every checkpoint loadable by subfolder), then the branches newest first; step-2's branch
    # was made for its commit and holds only the repo's first commit.
    assert committed == ["main", "step-4", "step-3"] and commits[-1] == "step-2", commits
    assert before == {"main": 1, "step-4": 1, "step-3": 1, "step-2": 0}
    # The same Hub after its window (restarted: its counters start again): the rerun makes the 2 left.
    with _free_hub(tmp_path / "hub", tiny_qwen3, "commits_per_repo=3,commit_window=3600") as hub:
        invocations += 1
        assert push_adapters(run_dir, REPO_ID, hub.endpoint) == 0
        api = HfApi(endpoint=hub.endpoint, token="any")
        assert _commits_by_branch(api, REPO_ID) == {"main": 1, **{f"step-{s}": 1 for s in (1, 2, 3, 4)}}
    print(f"\n5 commits at 3 per hour: {invocations} invocations, each step's branch committed once")


# --- a sweep of two base models ---------------------------------------------------------------------------


def test_a_sweep_of_two_base_models_is_refused_by_the_push_before_anything_is_sent(
    tmp_path, tiny_qwen3, tiny_qwen3_tied, local_hub, hub_api, make_repo_id, capsys
):
    runs, repos = tmp_path / "runs", []
    for value, base in ((0.0, tiny_qwen3), (0.5, tiny_qwen3_tied)):
        run_dir = make_run(runs, (1,), base_model=base.repo_id, shapes=TINY_SHAPES, run_id=f"mixed-{value}")
        repos.append(make_repo_id(f"mixed{value}"))
        sweep = SweepInfo("mixed bases", "length_penalty_weight", value)
        Manifest.load(run_dir).with_updates(sweep=sweep, push_to=repos[-1]).save(run_dir)
    start = len(local_hub.request_log)
    argv = ["push", "--sweep", "mixed bases", "--runs-dir", str(runs), "--endpoint", local_hub.endpoint]
    assert run_cli([*argv, "--no-merged", "--no-space", "--no-samples", "-q"]) == 1
    error = _one_error_line(capsys)
    assert "mixed-0.0" in error and "mixed-0.5" in error and "differ in base model" in error
    assert tiny_qwen3.repo_id in error and tiny_qwen3_tied.repo_id in error
    assert local_hub.request_log[start:] == []  # nothing sent, not even a read
    assert not any(hub_api.repo_exists(r) for r in repos)


# --- the dry run's commit count ----------------------------------------------------------------------------


def test_the_dry_run_says_how_many_commits_the_push_makes_against_the_hubs_hourly_limit(
    tmp_path, tiny_qwen3, capsys
):
    steps = tuple(range(1, 131))
    run_dir = make_run(tmp_path / "runs", steps, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    capsys.readouterr()
    argv = [*push_argv(run_dir, REPO_ID, "http://127.0.0.1:9"), "--no-merged", "--no-space", "--dry-run"]
    assert run_cli(argv) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Commits:")]
    assert line.startswith(f"Commits: 133 ({REPO_ID}: 133), of at most 100 files: {REPO_ID} in 3 (267 files)")
    assert "more than the Hub's 128 commits per repo per hour" in line and "--every N" in line
    assert run_cli([*argv, "--every", "10"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Commits:")]
    assert line == f"Commits: 14 ({REPO_ID}: 14); within the Hub's 128 commits per repo per hour."
