"""The reward of a published run, read back from its Hub repo: the ``hubkit.json`` the push publishes
holds the `RewardSpec` as data, and this rebuilds it exactly (nothing from the repo is executed).

Imports huggingface_hub when called (the rest of `hubkit.rewards` does not need it).
"""

from __future__ import annotations

import json

from hubkit.errors import RewardSpecError
from hubkit.hub_files import download_repo_file
from hubkit.manifest import MANIFEST_NAME, SCHEMA_VERSION, Manifest
from hubkit.rewards.spec import RewardSpec


def reward_spec_from_hub(
    repo_id: str, revision: str | None = None, *, endpoint: str | None = None, token: str | None = None
) -> RewardSpec:
    """The reward spec a run published to `repo_id` was trained with.

    Args:
        repo_id: the adapter (or merged) repo a hubkit push wrote, "owner/name".
        revision: a branch, tag or commit; default the main branch.
        endpoint: the Hub; default ``HF_ENDPOINT``, else huggingface.co.
        token: for a private repo.

    Returns:
        The spec, equal to the run's own.

    Raises:
        RewardSpecError: the repo, revision or ``hubkit.json`` is missing, the manifest comes from a newer
            hubkit, or it records no reward.
    """
    where = f"{repo_id}" + (f" at revision {revision}" if revision else "")
    path = download_repo_file(
        repo_id, MANIFEST_NAME, revision=revision, endpoint=endpoint, token=token, error=RewardSpecError
    )
    if path is None:
        raise RewardSpecError(f"{where} has no {MANIFEST_NAME}: it was not published by hubkit")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RewardSpecError(f"{where}'s {MANIFEST_NAME} is not valid JSON") from e
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise RewardSpecError(
            f"{where}'s {MANIFEST_NAME} has schema {version}, newer than this hubkit reads ({SCHEMA_VERSION}): "
            "upgrade hubkit"
        )
    reward = Manifest.from_dict(data).reward
    if reward is None:
        raise RewardSpecError(f"{where}'s {MANIFEST_NAME} records no reward spec")
    return reward
