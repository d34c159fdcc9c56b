"""`make demo`: `python -m hubkit.demo [--root demo-hub]` (see `hubkit.demo`)."""

from __future__ import annotations

from pathlib import Path

import click

from hubkit.demo.steps import run_demo

DEFAULT_ROOT = Path("demo-hub")


@click.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_ROOT,
    show_default=True,
    help="The local Hub's storage (kept: a second run finds the same repos).",
)
def main(root: Path) -> None:
    """Train a tiny model that visibly learns, publish it as a full release on a local Hub, and serve its
    Space (DEMO_SPACE=0 skips the Space)."""
    run_demo(root, click.echo)
    click.echo(
        f"The Hub has stopped; its repos stay under {root}. Serve them again: hubkit hub serve --root {root}"
    )


if __name__ == "__main__":
    main()
