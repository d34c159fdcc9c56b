"""`hubkit` command line. This package only wires: each command group lives in its own module and
calls the library; user errors (`HubkitError`) become one line on stderr and exit status 1.

    $ hubkit hub serve --root ./hub            # a local Hub on 127.0.0.1
    $ hubkit push --run-id RUN --repo-id me/qwen3-4b-gdpo
"""

from __future__ import annotations

import os
import sys

import click

from hubkit.cli.card import card
from hubkit.cli.eval import eval_command
from hubkit.cli.gguf import gguf
from hubkit.cli.hub import hub
from hubkit.cli.merge import merge
from hubkit.cli.output import echo, log_visibly
from hubkit.cli.push import push
from hubkit.cli.reward import reward
from hubkit.cli.space import space
from hubkit.cli.verify import verify
from hubkit.errors import HubkitError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hubkit")
def cli() -> None:
    """Publish GRPO training runs (TRL, verl) to the Hugging Face Hub."""


# Each command module imports the library inside its command: importing hubkit.publish costs 0.28 s and
# hubkit.evaluate 0.18 s (huggingface_hub, numpy), and `hubkit --help` or `hubkit hub serve` need neither.
for command in (hub, push, merge, gguf, card, reward, space, eval_command, verify):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the CLI, mapping user errors to one line and exit status 1."""
    log_visibly()
    try:
        cli.main(args=argv, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except HubkitError as e:
        if os.environ.get("HUBKIT_DEBUG") == "1":
            raise
        echo(f"Error: {e}", err=True, one_line=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
