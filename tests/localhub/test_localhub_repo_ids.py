"""Repo ids, revisions and listings as the Hub reads and answers them, through the real client: ids in any
case, without a namespace, short commit ids, a folder delete without its slash, `expand`'s last commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import HfHubHTTPError


def test_a_repo_id_in_another_case_reaches_the_same_repo(hub_api, new_repo_id, tmp_path):
    namespace, name = new_repo_id.split("/")
    mixed = f"{namespace}/Case-{name}"
    hub_api.create_repo(mixed)
    lower, upper = mixed.lower(), f"{namespace.upper()}/{mixed.split('/')[1].upper()}"
    hub_api.upload_file(path_or_fileobj=b"one", path_in_repo="a.txt", repo_id=lower)
    info = hub_api.model_info(upper)
    assert info.id == mixed  # the repository's own spelling
    assert [s.rfilename for s in info.siblings] == [".gitattributes", "a.txt"]
    assert Path(hf_hub_download(upper, "a.txt", cache_dir=tmp_path)).read_text() == "one"
    with pytest.raises(HfHubHTTPError) as caught:
        hub_api.create_repo(lower)  # the same repository: it exists
    assert caught.value.response.status_code == 409
    assert hub_api.create_repo(lower, exist_ok=True).repo_id == lower
    assert [r.id for r in hub_api.list_models(author=namespace, search=f"case-{name}")] == [mixed]
    hub_api.delete_repo(upper)
    assert not hub_api.repo_exists(mixed)


def test_an_id_without_a_namespace_is_a_missing_repo_and_answers_name_their_request(local_hub, hub_api):
    from huggingface_hub import get_session
    from huggingface_hub.errors import RepositoryNotFoundError

    assert hub_api.repo_exists("gpt2") is False  # no namespace: RepoNotFound, as from the Hub
    with pytest.raises(RepositoryNotFoundError) as caught:
        next(iter(hub_api.list_repo_tree("gpt2")))
    assert "Request ID: Root=1-" in str(caught.value)
    ids = {get_session().get(f"{local_hub.endpoint}/api/whoami-v2").headers["X-Request-Id"] for _ in range(2)}
    assert len(ids) == 2


def test_a_short_commit_id_names_its_commit_for_tags_and_reads(hub_api, new_repo_id):
    hub_api.create_repo(new_repo_id)
    first = hub_api.upload_file(path_or_fileobj=b"1", path_in_repo="n.txt", repo_id=new_repo_id).oid
    hub_api.upload_file(path_or_fileobj=b"2", path_in_repo="n.txt", repo_id=new_repo_id)
    hub_api.create_tag(new_repo_id, tag="v1", revision=first[:7])
    refs = hub_api.list_repo_refs(new_repo_id)
    assert [(t.name, t.target_commit) for t in refs.tags] == [("v1", first)]
    assert hub_api.model_info(new_repo_id, revision=first[:10]).sha == first


def test_a_delete_without_a_trailing_slash_deletes_the_folder_as_on_the_hub(hub_api, new_repo_id):
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    hub_api.create_repo(new_repo_id)
    adds = [CommitOperationAdd(p, b"data") for p in ("1/file_1.md", "1/2/file_2.md", "2/file_3.md")]
    hub_api.create_commit(new_repo_id, adds, commit_message="init")
    hub_api.create_commit(new_repo_id, [CommitOperationDelete("1")], commit_message="delete folder 1")
    assert sorted(hub_api.list_repo_files(new_repo_id)) == [".gitattributes", "2/file_3.md"]


def test_trees_and_paths_info_carry_the_last_commit_with_expand(hub_api, new_repo_id):
    from huggingface_hub import CommitOperationAdd

    hub_api.create_repo(new_repo_id)
    first = hub_api.create_commit(
        new_repo_id, [CommitOperationAdd(p, b"1") for p in ("a.txt", "d/b.txt")], commit_message="first"
    )
    second = hub_api.create_commit(
        new_repo_id, [CommitOperationAdd("d/c.txt", b"2")], commit_message="second"
    )
    tree = {e.path: e.last_commit for e in hub_api.list_repo_tree(new_repo_id, expand=True)}
    assert (tree["a.txt"].oid, tree["a.txt"].title) == (first.oid, "first")
    assert (tree["d"].oid, tree["d"].title) == (second.oid, "second")  # a folder: its newest change
    info = {
        e.path: e.last_commit
        for e in hub_api.get_paths_info(new_repo_id, ["d/b.txt", "d/c.txt"], expand=True)
    }
    assert (info["d/b.txt"].oid, info["d/c.txt"].oid) == (first.oid, second.oid)
    assert all(e.last_commit is None for e in hub_api.list_repo_tree(new_repo_id))  # only when asked
