"""Repo ids as the Hub reads them, through the real client: case-insensitive, one repository whatever the
case of its namespace or name."""

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
