"""The kinds of repos a Hub holds, as the client names them, the default Hub, and a repo's page there."""

from typing import Literal

RepoType = Literal["model", "dataset", "space"]

# The public Hub, the default endpoint (`HF_ENDPOINT` or --endpoint say another).
HUB_ENDPOINT = "https://huggingface.co"


def repo_url(repo_id: str, repo_type: RepoType = "model", endpoint: str = HUB_ENDPOINT) -> str:
    """A repo's page on a Hub, as the client prefixes it (``datasets/``, ``spaces/``)."""
    # Imported here: reading a run (which names repo types) imports no Hub client (tests/runs/test_runs.py).
    from huggingface_hub.constants import REPO_TYPES_URL_PREFIXES

    return f"{endpoint.rstrip('/')}/{REPO_TYPES_URL_PREFIXES.get(repo_type, '')}{repo_id}"
