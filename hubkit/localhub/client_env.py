"""Point the huggingface_hub client (and transformers, peft, gradio) at a local Hub.

The client reads HF_ENDPOINT and HF_HOME into module constants when it is
first imported, so the environment must be set before that import. When it was imported already,
its constants are patched instead (without this module importing it).
"""

from __future__ import annotations

import logging
import os
import sys

logger = logging.getLogger(__name__)
# An open local Hub takes any token, and writes only with one (a web page's request cannot carry it).
OPEN_HUB_TOKEN = "hf_local_open_hub"


def client_environment(endpoint: str, hf_home: str, token: str | None = OPEN_HUB_TOKEN) -> dict[str, str]:
    """The environment variables that make the clients use the local Hub at `endpoint` (with `token`
    as HF_TOKEN, unless None)."""
    env = {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": hf_home,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }
    if token:
        env["HF_TOKEN"] = token
    return env


def use_local_hub(endpoint: str, hf_home: str, token: str | None = OPEN_HUB_TOKEN) -> None:
    """Set this process's environment for the local Hub, patching an already imported client.

    `hf_home` holds the client's cache and token files (keeping the user's own cache clean). `token` is
    exported as HF_TOKEN: the default is a placeholder, which an open Hub (no --token, no --users)
    accepts; None exports none, and the clients then read only, anonymously.
    """
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", *(["HF_TOKEN"] if token is None else [])):
        os.environ.pop(name, None)
    os.environ.update(client_environment(endpoint, hf_home, token))
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is None:
        return
    logger.warning(
        "huggingface_hub was imported before the local Hub was configured; patching its constants."
    )
    hub_cache = os.path.join(hf_home, "hub")
    patched = {
        "ENDPOINT": endpoint,
        "HUGGINGFACE_CO_URL_TEMPLATE": endpoint + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_DISABLE_TELEMETRY": True,
        "HF_HUB_OFFLINE": False,
        "HF_HOME": hf_home,
        "HF_HUB_CACHE": hub_cache,
        "HUGGINGFACE_HUB_CACHE": hub_cache,
        "HF_ASSETS_CACHE": os.path.join(hf_home, "assets"),
        "HF_XET_CACHE": os.path.join(hf_home, "xet"),
        "HF_TOKEN_PATH": os.path.join(hf_home, "token"),
        "HF_STORED_TOKENS_PATH": os.path.join(hf_home, "stored_tokens"),
    }
    for name, value in patched.items():
        setattr(constants, name, value)
