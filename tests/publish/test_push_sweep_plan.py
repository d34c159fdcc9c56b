"""Every commit of a sweep run's push is in its plan: the comparison page, the sweep's one Space and each
sibling run's card are repo plans committed by the push's one commit path, recorded in the run directory
and named by a dry run; the sweep's Collection is read once a push. Through huggingface_hub against the
local Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_sweep import ADAPTERS_ONLY, _sweep_run

from hubkit.publish import PushRequest, push_run
from hubkit.publish.push_record import load_record
from hubkit.release.companions import SPACE, SWEEP_PAGE
from hubkit.space.config import app_config_module


def _push(run_dir, repo_id, local_hub, **options):
    hub = {"endpoint": local_hub.endpoint, "token": local_hub.token}
    return push_run(PushRequest(run_dir, repo_id=repo_id, **{**ADAPTERS_ONLY, **options}, **hub))


def _collection_reads(local_hub, since: int) -> list:
    """The requests since `since` that read one Collection whole (a listing by owner reads none)."""
    return [
        r for r in local_hub.request_log[since:] if r[0] == "GET" and r[1].startswith("/api/collections/")
    ]


@pytest.fixture
def sweep_name(new_repo_id: str) -> str:
    return "plan " + new_repo_id.split("/")[1][-30:]


def test_a_sweep_runs_page_and_sibling_cards_are_commits_of_its_plan(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, sweep_name
):
    runs = {v: _sweep_run(tmp_path / str(v), tiny_qwen3.repo_id, sweep_name, v, 3, 50) for v in (0.0, 1.0)}
    repos = {v: make_repo_id(f"lp{v}") for v in runs}
    page = SWEEP_PAGE.sweep_repo_id(repos[0.0].split("/")[0], sweep_name)
    first = _push(runs[0.0], repos[0.0], local_hub)
    assert page in first.plan.sweep_repos and page in {r.repo_id for r in first.repos}

    since = len(local_hub.request_log)
    second = _push(runs[1.0], repos[1.0], local_hub)
    assert len(_collection_reads(local_hub, since)) == 1  # the read stage's, and no other
    # The page and the first run's card, rewritten to list the second, are repos of the second's plan, in
    # the plan's order after the release's, each committed once by the push's commit path.
    assert second.plan.sweep_repos == (page, repos[0.0])
    assert [r.repo_id for r in second.plan.repos][-2:] == [page, repos[0.0]]
    committed = {r.repo_id: r for r in second.repos}
    for repo_id, repo_type, title in (
        (page, "dataset", "hubkit sweep"),
        (repos[0.0], "model", "hubkit sweep: the"),
    ):
        report = committed[repo_id]
        assert report.commit_sha == hub_api.repo_info(repo_id, repo_type=repo_type).sha
        (last, *_) = hub_api.list_repo_commits(repo_id, repo_type=repo_type)
        assert last.commit_id == report.commit_sha and last.title.startswith(title)
    assert "| 1.0 |" in Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    # Recorded in the run directory as every repo of the push is.
    card = load_record(runs[1.0], local_hub.endpoint, repos[0.0])
    assert card is not None and card.commit_sha == committed[repos[0.0]].commit_sha
    assert set(card.files) == {"README.md"}
    recorded_page = load_record(runs[1.0], local_hub.endpoint, page)
    assert recorded_page is not None and "eval/answers.parquet" in recorded_page.files
    # The Collection's changes were decided in the plan: the second run's repos added, after the commits.
    added = {i.repo_id for i in second.plan.collection_items}
    assert added == {repos[1.0], repos[1.0] + "-samples"}

    # A dry run names the commits the push would plan from the Collection: the page and the sibling's card.
    dry = push_run(
        PushRequest(runs[1.0], repo_id=repos[1.0], dry_run=True, endpoint=local_hub.endpoint, **ADAPTERS_ONLY)
    )
    (planned,) = [n for n in dry.notes if "comparison page" in n]
    assert page in planned and repos[0.0] in planned and "at most 2 commits" in planned

    # Pushed again unchanged: the Collection read once, nothing committed, nothing written.
    since = len(local_hub.request_log)
    again = _push(runs[1.0], repos[1.0], local_hub)
    assert all(r.unchanged for r in again.repos) and again.plan.collection_items == ()
    assert len(_collection_reads(local_hub, since)) == 1


def test_a_sweep_of_three_runs_has_one_space_listing_every_run(
    tmp_path, tiny_qwen3, local_hub, hub_api, make_repo_id, sweep_name
):
    runs = {
        v: _sweep_run(tmp_path / str(v), tiny_qwen3.repo_id, sweep_name, v, 3, 50) for v in (1.0, 0.0, 0.5)
    }
    repos = {v: make_repo_id(f"lp{v}") for v in runs}
    owner = repos[0.0].split("/")[0]
    space, page = SPACE.sweep_repo_id(owner, sweep_name), SWEEP_PAGE.sweep_repo_id(owner, sweep_name)
    for value, run_dir in runs.items():
        report = _push(run_dir, repos[value], local_hub, space=True)
        # The sweep's Space, in the sweep's part of the plan after its page, committed and recorded.
        assert report.plan.sweep_repos[:2] == (page, space)
        assert {r.repo_id for r in report.repos if r.repo_type == "space"} == {space}
        assert load_record(run_dir, local_hub.endpoint, space) is not None

    # One Space for the sweep: none of the runs has one of its own.
    spaces_dir = Path(local_hub.root) / "repos" / "spaces" / owner
    names = {r.split("/")[1] for r in repos.values()} | {space.split("/")[1]}
    made = sorted(
        p.name.removesuffix(".git") for p in spaces_dir.glob("*.git") if p.name.startswith(tuple(names))
    )
    assert made == [space.split("/")[1]]
    assert hub_api.get_space_runtime(space).hardware == "zero-a10g"
    # Its configuration lists the three runs by value, each with its repo and the checkpoints it holds.
    config_path = hub_api.hf_hub_download(space, "space_config.json", repo_type="space")
    app = app_config_module().AppConfig.load(Path(config_path))
    assert app.title == sweep_name
    listed = [(r.name, r.adapter_repo, r.checkpoints) for r in app.runs]
    steps = ("checkpoints/global_step_1", "checkpoints/global_step_2", "")
    assert listed == [(f"length_penalty_weight={v}", repos[v], steps) for v in (0.0, 0.5, 1.0)]
    assert json.loads(Path(config_path).read_text())["schema_version"] == 2
    # Every run's card links it, and no Space of its own.
    for value, repo_id in repos.items():
        card = Path(hub_api.hf_hub_download(repo_id, "README.md")).read_text()
        assert f"spaces/{space}" in card and f"{repo_id}-demo" not in card, value
    # So does the comparison page.
    page_card = Path(hub_api.hf_hub_download(page, "README.md", repo_type="dataset")).read_text()
    assert f"[{space}](https://huggingface.co/spaces/{space})" in page_card
    # The Collection lists it once, beside the page, before the runs.
    (found,) = [c for c in hub_api.list_collections(owner=owner) if c.title == sweep_name]
    items = [(i.item_id, i.item_type) for i in hub_api.get_collection(found.slug).items]
    assert items[:2] == [(page, "dataset"), (space, "space")] and items.count((space, "space")) == 1

    # A dry run names it among the sweep's commits.
    dry = push_run(
        PushRequest(runs[0.5], repo_id=repos[0.5], dry_run=True, endpoint=local_hub.endpoint, **ADAPTERS_ONLY)
    )
    assert not any(space in n for n in dry.notes), dry.notes  # --no-space: the push plans no Space
    dry = push_run(PushRequest(runs[0.5], repo_id=repos[0.5], dry_run=True, endpoint=local_hub.endpoint))
    (planned,) = [n for n in dry.notes if "comparison page" in n]
    assert f"its Space {space}" in planned and "at most 4 commits" in planned
    # Pushed again unchanged: nothing committed to the Space (or anywhere).
    commits = len(hub_api.list_repo_commits(space, repo_type="space"))
    again = _push(runs[0.5], repos[0.5], local_hub, space=True)
    assert space in again.plan.sweep_repos and all(r.unchanged for r in again.repos)
    assert len(hub_api.list_repo_commits(space, repo_type="space")) == commits
