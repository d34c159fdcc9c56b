"""`make demo`: the publishing story on a local Hub, no account or network needed.

    $ python -m hubkit.demo [--root demo-hub]

It starts the local Hub (repos under ./demo-hub), builds the tiny Qwen3 and publishes it as the
base-model repo, then says how to load it. Each part of the story is a step, a function of
`DemoContext`; extend the demo by adding to `STEPS`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from hubkit.localhub import LocalHub
from hubkit.localhub.client_env import use_local_hub

if TYPE_CHECKING:
    from huggingface_hub import HfApi

DEFAULT_ROOT = Path("demo-hub")
BASE_REPO_ID = "demo/tiny-qwen3"


@dataclass
class DemoContext:
    """What the steps share: the running Hub, a client bound to it, scratch space, and where to report."""

    hub: LocalHub
    api: HfApi
    workdir: Path
    say: Callable[[str], None]
    published: dict[str, str] = field(default_factory=dict)  # role -> repo id, filled in by the steps


def publish_base_model(ctx: DemoContext) -> None:
    """Build the tiny Qwen3 and publish it as the base-model repo (a no-op commit if it is already there)."""
    from hubkit.tiny import build_tiny_qwen3, publish_model

    local_dir = build_tiny_qwen3(ctx.workdir / "tiny-qwen3")
    publish_model(ctx.api, local_dir, BASE_REPO_ID)
    files = sorted(ctx.api.list_repo_files(BASE_REPO_ID))
    ctx.published["base"] = BASE_REPO_ID
    ctx.say(f"Published base model {BASE_REPO_ID} ({len(files)} files: {', '.join(files)})")


STEPS: list[Callable[[DemoContext], None]] = [publish_base_model]


def run_demo(
    root: Path, say: Callable[[str], None], steps: list[Callable[[DemoContext], None]] | None = None
) -> dict[str, str]:
    """Start a local Hub on `root`, run the demo steps against it, stop it.

    Args:
        root: the Hub's storage directory (kept, so a second run finds the same repos).
        say: where progress lines go.
        steps: the steps to run (default: `STEPS`).

    Returns:
        The published repo ids by role.
    """
    with LocalHub(root) as hub, tempfile.TemporaryDirectory(prefix="hubkit-demo-") as scratch:
        say(f"Local Hub at {hub.endpoint} (repos under {root}/repos)")
        use_local_hub(hub.endpoint, str(Path(scratch) / "hf_home"))
        from huggingface_hub import HfApi  # after use_local_hub: the client reads its settings on import

        ctx = DemoContext(hub, HfApi(endpoint=hub.endpoint), Path(scratch), say)
        for step in steps if steps is not None else STEPS:
            step(ctx)
    return ctx.published


@click.command()
@click.option(
    "--root", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_ROOT, show_default=True
)
def main(root: Path) -> None:
    """Run the demo and explain how to use what it published."""
    published = run_demo(root, click.echo)
    click.echo(
        "\nThe Hub has stopped; its repos stay in place. To load the base model:\n"
        f"  hubkit hub serve --root {root}        # prints ENDPOINT\n"
        "  HF_ENDPOINT=ENDPOINT HF_HUB_DISABLE_XET=1 python -c \\\n"
        '    "from transformers import AutoModelForCausalLM; '
        f"print(AutoModelForCausalLM.from_pretrained('{published['base']}'))\""
    )


if __name__ == "__main__":
    main()
