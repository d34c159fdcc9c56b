"""README metadata checked as huggingface.co checks it, at `POST /api/validate-yaml` and at commit, through
the real client: the Hub's licence list, `model-index`'s shape, a front matter after blank lines, and the
Hub's warning for a card without metadata."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, RepoCard

# huggingface_hub's own test card (tests/test_hf_api.py): the front matter follows a blank line.
INVALID_MODELCARD = "\n---\nmodel-index: foo\n---\n\nThis is a modelcard with an invalid metadata section.\n"


def _commit_readme(hub_api, repo_id: str, readme: str) -> None:
    hub_api.create_commit(
        repo_id,
        [CommitOperationAdd("README.md", readme.encode()), CommitOperationAdd("lfs.bin", b"\0" * 100)],
        commit_message="card",
    )


def test_validate_yaml_refuses_a_licence_not_in_the_hubs_list(hub_api):
    with pytest.raises(ValueError, match=r'- Error: "license" must be one of \[apache-2.0, mit, openrail'):
        RepoCard("---\nlicense: asdf\n---\n# Card\n").validate()
    RepoCard("---\nlicense: llama3.1\n---\n# Card\n").validate()  # on the list of August 2026
    RepoCard("---\nlicense: [mit, apache-2.0]\n---\n# Card\n").validate()


def test_a_refused_card_stops_the_client_before_any_upload(local_hub, hub_api, new_repo_id):
    hub_api.create_repo(new_repo_id)
    start = len(local_hub.request_log)
    for readme, words in [
        ("---\nlicense: asdf\n---\n", '"license" must be one of ['),
        (INVALID_MODELCARD, '"model-index" must be an array'),
        ("---\nmodel-index:\n- name: m\n  results:\n  - task: {type: t}\n---\n", '.dataset" is required'),
        ("---\nbase_model: a/b\nbase_model_relation: fork\n---\n", '"base_model_relation" must be one of'),
    ]:
        with pytest.raises(ValueError, match=r"Invalid metadata in README\.md") as caught:
            _commit_readme(hub_api, new_repo_id, readme)
        assert words in str(caught.value)
    paths = [path for _, path, _ in local_hub.request_log[start:]]
    assert paths and all(path == "/api/validate-yaml" for path in paths)
    assert [c.title for c in hub_api.list_repo_commits(new_repo_id)] == ["initial commit"]


def test_the_commit_itself_refuses_a_card_the_hub_would_refuse(local_hub, hub_api, new_repo_id):
    """A client that skips validate-yaml (git, an old client) meets the same check at the commit."""
    hub_api.create_repo(new_repo_id)
    head = hub_api.model_info(new_repo_id).sha
    lines = [
        {"key": "header", "value": {"summary": "card"}},
        {
            "key": "file",
            "value": {
                "path": "README.md",
                "encoding": "base64",
                "content": base64.b64encode(INVALID_MODELCARD.encode()).decode(),
            },
        },
    ]
    answer = httpx.post(
        f"{local_hub.endpoint}/api/models/{new_repo_id}/commit/main",
        content="\n".join(json.dumps(line) for line in lines).encode(),
        headers={"Authorization": f"Bearer {local_hub.token}", "Content-Type": "application/x-ndjson"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == (
        "Sorry, your push was rejected during YAML metadata verification:\n"
        ' - Error: "model-index" must be an array'
    )
    assert hub_api.model_info(new_repo_id).sha == head


def test_a_card_without_metadata_gets_the_hubs_warning_and_is_committed(hub_api, new_repo_id):
    hub_api.create_repo(new_repo_id)
    with pytest.warns(UserWarning, match="empty or missing yaml metadata in repo card"):
        _commit_readme(hub_api, new_repo_id, "This is a modelcard without metadata")
    assert hub_api.list_repo_commits(new_repo_id)[0].title == "card"
