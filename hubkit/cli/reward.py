"""`hubkit reward show REPO_ID`: the reward a published run was trained with, read from its hubkit.json."""

from __future__ import annotations

import json

import click

from hubkit.cli.options import endpoint_option
from hubkit.cli.output import echo


@click.group()
def reward() -> None:
    """Rewards of published runs."""


@reward.command()
@click.argument("repo_id", metavar="OWNER/NAME")
@click.option("--revision", help="A branch, tag or commit of the repo.  [default: main]")
@click.option("--json", "as_json", is_flag=True, help="Print the spec as JSON (the form hubkit.json stores).")
@endpoint_option
def show(repo_id: str, revision: str | None, as_json: bool, endpoint: str) -> None:
    """Print the reward spec of the run published to REPO_ID: formula, components, aggregation.

    \b
    $ hubkit reward show me/qwen3-4b-gdpo
    """
    from hubkit.cards.sections import AGGREGATION_MEANINGS
    from hubkit.release.read import read_release_reward

    spec = read_release_reward(repo_id, revision, endpoint=endpoint)
    if as_json:
        echo(json.dumps(spec.to_dict(), indent=2))
        return
    echo(f"{repo_id}: {spec.formula()}")
    echo(f"aggregation: {spec.aggregation}: {AGGREGATION_MEANINGS[spec.aggregation]}")
    if spec.batch_whiten:
        echo("  the weighted sum is then whitened over the batch")
    echo("components:")
    for component in spec.components:
        params = ", ".join(f"{k}={v}" for k, v in sorted(component.params.items()))
        echo(f"  {component.name:<22} weight {component.weight:g}" + (f"  ({params})" if params else ""))
