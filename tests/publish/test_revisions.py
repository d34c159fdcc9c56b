"""Every published checkpoint as a branch (`step-N`) of the adapter repo: loadable with `revision=`, the same
adapter as its subfolder, no upload for the branch, no commit on any branch for an unchanged re-push."""

from __future__ import annotations

from pathlib import Path

import torch
from helpers import logits, uploaded, write_requests
from peft import PeftModel
from transformers import AutoModelForCausalLM

from hubkit.publish import PushRequest, push_run
from hubkit.publish.describe import describe_dry_run, describe_revisions
from hubkit.release.layout import revision_name
from tests.support.runs import TINY_SHAPES, make_run, write_checkpoint


def _branch_heads(hub_api, repo_id: str) -> dict[str, str]:
    return {branch.name: branch.target_commit for branch in hub_api.list_repo_refs(repo_id).branches}


def test_each_step_is_a_branch_that_loads_as_its_subfolder_and_costs_no_upload(
    tmp_path: Path, tiny_qwen3, local_hub, hub_api, new_repo_id
) -> None:
    run_dir = make_run(tmp_path, (1, 2, 3), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    request = PushRequest(
        run_dir, repo_id=new_repo_id, merged=False, space=False, endpoint=local_hub.endpoint
    )
    start = len(local_hub.uploads)
    report = push_run(request)
    assert [r.revision for r in report.revisions] == ["step-1", "step-2", "step-3"]
    assert all(r.commit_sha for r in report.revisions)
    # Each weights file is sent for the main branch only; the branches' commits reuse the objects.
    sent = uploaded(local_hub, start)
    main_objects = {
        f.lfs.sha256 for f in hub_api.list_repo_tree(new_repo_id, recursive=True) if getattr(f, "lfs", None)
    }
    assert set(sent) == main_objects
    assert (
        describe_revisions(report.revisions)
        == f"{new_repo_id} branches step-1 … step-3 (3): 3 committed, 0 up to date"
    )

    input_ids = torch.tensor([[1, 5, 9, 42, 7, 3]])

    def base():
        return AutoModelForCausalLM.from_pretrained(tiny_qwen3.local_dir).eval()

    base_logits = logits(base(), input_ids)
    for step in (1, 2, 3):
        files = set(hub_api.list_repo_files(new_repo_id, revision=revision_name(step)))
        assert files == {".gitattributes", "README.md", "adapter_config.json", "adapter_model.safetensors"}
        by_revision = PeftModel.from_pretrained(base(), new_repo_id, revision=revision_name(step)).eval()
        by_subfolder = PeftModel.from_pretrained(
            base(), new_repo_id, subfolder=f"checkpoints/global_step_{step}"
        ).eval()
        got = logits(by_revision, input_ids)
        torch.testing.assert_close(got, logits(by_subfolder, input_ids), rtol=0, atol=0)
        assert not torch.allclose(got, base_logits), f"step {step} loads as a no-op"
    card = Path(hub_api.hf_hub_download(new_repo_id, "README.md", revision="step-2")).read_text()
    assert 'revision="step-2"' in card and f"{new_repo_id}@step-2" in card

    # Unchanged: no commit on any branch, nothing sent.
    heads = _branch_heads(hub_api, new_repo_id)
    start = len(local_hub.request_log)
    again = push_run(request)
    assert all(r.unchanged for r in (*again.repos, *again.revisions))
    assert _branch_heads(hub_api, new_repo_id) == heads
    assert write_requests(local_hub.request_log, start) == []

    # A new checkpoint: its branch is made; the others are left as they are.
    write_checkpoint(run_dir, 4, base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)
    added = push_run(
        PushRequest(
            run_dir, repo_id=new_repo_id, steps=(4,), merged=False, space=False, endpoint=local_hub.endpoint
        )
    )
    assert [(r.revision, r.unchanged) for r in added.revisions] == [("step-4", False)]
    after = _branch_heads(hub_api, new_repo_id)
    assert {name: after[name] for name in heads if name != "main"} == {
        n: h for n, h in heads.items() if n != "main"
    }
    assert "step-4" in after


def _outline(plan) -> list[tuple[str, str, str, str]]:
    """Every planned file of every repo and branch, by where it goes and what it holds."""
    return sorted(
        (repo.repo_id, repo.revision, f.path_in_repo, f.hashes.sha256)
        for repo in (*plan.repos, *plan.branches)
        for f in repo.files
    )


def test_the_dry_run_plans_what_the_push_then_does_branches_included(
    tmp_path: Path, tiny_qwen3, local_hub, hub_api, new_repo_id
) -> None:
    """The dry run is the push's own prepare and decide, against the recorded remote: its plan is the plan
    the push then executes, file for file (the base's card, its one input from the Hub, is read from the
    client's cache by the dry run)."""
    run_dir = make_run(tmp_path, (1, 2), base_model=tiny_qwen3.repo_id, shapes=TINY_SHAPES)

    def request(**kwargs) -> PushRequest:
        return PushRequest(run_dir, repo_id=new_repo_id, merged=False, endpoint=local_hub.endpoint, **kwargs)

    dry = push_run(request(dry_run=True))
    assert [b.revision for b in dry.plan.branches] == ["step-1", "step-2"]
    assert {r.repo_type for r in dry.plan.repos} == {"model", "space"}
    pushed = push_run(request())
    assert _outline(dry.plan) == _outline(pushed.plan)
    assert [r.revision for r in pushed.revisions] == ["step-1", "step-2"]

    # Once pushed, the records say so: a dry run then finds every file and branch unchanged.
    again = push_run(request(dry_run=True))
    assert _outline(again.plan) == _outline(pushed.plan)
    listing = describe_dry_run(again)
    assert "  new " not in listing and "  changed " not in listing
    assert f"  step-1       {len(again.plan.branches[0].files)} files, unchanged" in listing
