"""A gated repository, as the Hub serves one, through the real client: everyone sees it, only the
authorized list (here: its namespace's members) downloads its files; others get the Hub's GatedRepo."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import team_settings
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import GatedRepoError

from hubkit.localhub import LocalHub


def test_a_gated_repo_refuses_another_users_download_with_the_hubs_403(tmp_path):
    with LocalHub(tmp_path / "hub", settings=team_settings(tmp_path)) as hub:
        alice, bob = (HfApi(endpoint=hub.endpoint, token=t) for t in ("hf_alice_write", "hf_bob_write"))
        alice.create_repo("alice/base")
        alice.upload_file(path_or_fileobj=b"{}", path_in_repo="config.json", repo_id="alice/base")
        alice.update_repo_settings("alice/base", gated="auto")
        assert bob.model_info("alice/base").gated == "auto"  # seen by all, as on the Hub
        with pytest.raises(GatedRepoError) as caught:
            hf_hub_download(
                "alice/base",
                "config.json",
                endpoint=hub.endpoint,
                token="hf_bob_write",
                cache_dir=tmp_path / "bob",
            )
        assert caught.value.response.status_code == 403
        assert "Access to model alice/base is restricted and you are not in the authorized list" in str(
            caught.value
        )
        with pytest.raises(GatedRepoError) as anonymous:
            hf_hub_download(
                "alice/base", "config.json", endpoint=hub.endpoint, token=False, cache_dir=tmp_path / "anon"
            )
        assert anonymous.value.response.status_code == 401 and "Please log in" in str(anonymous.value)
        with pytest.raises(GatedRepoError):
            bob.auth_check("alice/base")
        alice.auth_check("alice/base")
        path = hf_hub_download(
            "alice/base",
            "config.json",
            endpoint=hub.endpoint,
            token="hf_alice_write",
            cache_dir=tmp_path / "a",
        )
        assert Path(path).read_text() == "{}"
        alice.update_repo_settings("alice/base", gated=False)
        hf_hub_download(
            "alice/base",
            "config.json",
            endpoint=hub.endpoint,
            token="hf_bob_write",
            cache_dir=tmp_path / "bob",
        )
