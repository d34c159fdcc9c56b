"""The release's chat template tried before `hubkit space` serves it.

The app renders the adapter repo's chat template for every request; a template that loops or builds a huge
string would hold the app's one-request queue for good. Before the app starts, the tokenizer files at the
repo's root are checked against their kinds' sizes (on the listing, before any download) and the Space's
example prompts are rendered through them by `hubkit.evaluate.chat.render_prompts`, in a process bounded in
time and memory: such a template is one line of error here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.errors import EvalError, SpaceError
from hubkit.evaluate.chat import render_prompts
from hubkit.hub.download import download_repo_file
from hubkit.hub.failures import hub_errors
from hubkit.release.layout import TOKENIZER_FILES
from hubkit.safety import kinds

if TYPE_CHECKING:
    from huggingface_hub import HfApi

    from hubkit.space.config import SpaceConfig

# Rendered when the Space has no examples of its own.
PROBE_PROMPT = "What is 7 + 5?"


def check_chat_template(api: HfApi, config: SpaceConfig) -> None:
    """Refuse a Space whose adapter repo's tokenizer files are oversized or whose template does not render.

    Raises:
        SpaceError: naming the file or what the template did.
    """
    app = config.app
    if app.chat_template != "adapter":
        return  # the base model's own template
    repo, revision = app.runs[0].adapter_repo, app.runs[0].adapter_revision  # the app's tokenizer
    with hub_errors(repo, api.endpoint, revision=revision):
        listed = {e.path: getattr(e, "size", 0) or 0 for e in api.list_repo_tree(repo, revision=revision)}
    present = [name for name in TOKENIZER_FILES if name in listed]
    if "tokenizer_config.json" not in present:
        return  # the app falls back to the base model's tokenizer
    for name in present:
        bound = kinds.max_bytes_of(name)
        if bound is None or listed[name] > bound:
            raise SpaceError(
                f"{repo}: {name} is {listed[name]} bytes, more than such a file may be: not serving it"
            )
    folder: Path | None = None
    for name in present:
        path = download_repo_file(repo, name, revision=revision, endpoint=api.endpoint, token=api.token)
        folder = path.parent if path is not None else folder
    if folder is None:
        return
    prompts = [example.prompt for example in app.examples] or [PROBE_PROMPT]
    try:
        render_prompts(folder, prompts, app.system_prompt)
    except EvalError as e:
        raise SpaceError(f"{repo}: {e}") from e
