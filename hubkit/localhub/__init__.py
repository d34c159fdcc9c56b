"""A Hub-compatible HTTP server for tests, demos and offline work (standard library only).

Repositories are bare git repositories; large files are Git LFS objects. The real
`huggingface_hub` client, transformers and peft talk to it through `HF_ENDPOINT`
(with `HF_HUB_DISABLE_XET=1`).
"""

from hubkit.localhub.context import HubSettings
from hubkit.localhub.server import LocalHub

__all__ = ["HubSettings", "LocalHub"]
