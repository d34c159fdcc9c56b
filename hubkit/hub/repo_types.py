"""The kinds of repos a Hub holds, as the client names them, and the default Hub."""

from typing import Literal

RepoType = Literal["model", "dataset", "space"]

# The public Hub, the default endpoint (`HF_ENDPOINT` or --endpoint say another).
HUB_ENDPOINT = "https://huggingface.co"
