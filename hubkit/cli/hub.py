"""`hubkit hub`: the local Hub, a Hub-compatible server for tests, demos and offline work."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click


@click.group()
def hub() -> None:
    """A local Hugging Face Hub (git repositories, large files through Xet or LFS), for you or a team.

    \b
        $ hubkit hub serve --root ./hub
        http://127.0.0.1:43117
        $ HF_ENDPOINT=http://127.0.0.1:43117 HF_TOKEN=any hf upload me/model ./model
        $ hubkit hub serve --root ./hub --host 0.0.0.0 --port 8080 --users users.toml --allowed-host hub.lab

    Writes need a token even on the open Hub, where any token will do (a web page cannot send one).
    """


@hub.command()
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Storage directory; restarting on the same root serves the same repos.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; any but loopback needs --token or --users (0.0.0.0: every interface).",
)
@click.option(
    "--port", default=0, type=click.IntRange(0, 65535), help="Port to listen on (0: any free port)."
)
@click.option(
    "--token",
    envvar="HUBKIT_HUB_TOKEN",
    help=(
        "An administrator's token: it reads and writes every namespace; other callers need a token from "
        "--users to write.  [default: $HUBKIT_HUB_TOKEN; with neither, any token is accepted on loopback]"
    ),
)
@click.option(
    "--users",
    "users_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help=(
        "TOML file of users: [users.NAME] with tokens = [...] (write), read_tokens = [...] (read-only), "
        'orgs = [...] and plan = "free" (default), "pro", "team" or "enterprise" (its quotas: --limit); '
        "a token may be written as sha256:HEX. A user writes under their own name and their orgs only, "
        "and sees private repos there only."
    ),
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help=(
        "A name clients reach the Hub by, besides the address it listens on (repeatable); requests naming "
        "any other host are refused, as a web page's DNS rebinding would."
    ),
)
@click.option(
    "--max-lfs-size",
    default="50GB",
    show_default=True,
    metavar="SIZE",
    help="The largest file accepted (LFS or Xet): bytes, or with a unit (MB, GB, TB; MiB, GiB, TiB).",
)
@click.option("--no-cdn", is_flag=True, help="Serve LFS files directly instead of redirecting to 127.0.0.2.")
@click.option(
    "--plan",
    type=click.Choice(["unlimited", "free", "pro", "team", "enterprise"]),
    default="unlimited",
    show_default=True,
    help=(
        "The plan whose quotas apply to the administrator (--token), to every caller of an open Hub, and "
        "to organizations (unlimited: the operator, no quota, only commits_per_repo); a user of --users "
        'has the plan = "..." of the file (default free).'
    ),
)
@click.option(
    "--limit",
    "limit_settings",
    multiple=True,
    metavar="NAME=VALUE",
    help=(
        "Change one of huggingface.co's limits, which the Hub enforces by default (repeatable, or "
        "comma-separated; `off` turns a count off). Rate limits: PLAN.api_calls / PLAN.resolver_calls "
        "per api_window=300 s, fixed window, answers carry RateLimit and RateLimit-Policy headers, 429 "
        "past it (free 1000/5000, pro 2500/12000, team 3000/20000, enterprise 6000/50000; "
        "anonymous_api_calls=500, anonymous_resolver_calls=3000 per IP; hub-docs rate-limits.md); "
        'commits_per_repo=256 per commit_window=3600 s, 429 with Retry-After and "You can retry this '
        "action in about N ...\" (undocumented: the number of the Hub's 2026 messages, 128 in 2025); "
        "PLAN.repo_creations=100 per repo_creation_window=3600 s per account (undocumented on the Hub: this "
        "server's choice). Quotas: PLAN.private_storage (free 100GB, others 1TB; 403 \"Private "
        'repository storage limit reached"; storage-limits.md); PLAN.paid_spaces (free false: a non-static '
        "Space on cpu-basic is refused 402 as the Hub does since 2026-07), PLAN.zero_gpu_spaces (free 2, "
        "pro 10, team/enterprise 50; spaces-zerogpu.md); commit_files_warning=100 (the Hub's recommended "
        "files per commit: more are logged as a warning). "
        "Example: --limit commits_per_repo=3,commit_window=60 --limit free.api_calls=off"
    ),
)
@click.option("--no-limits", is_flag=True, help="Enforce none of huggingface.co's limits (a team's own Hub).")
def serve(
    root: Path,
    host: str,
    port: int,
    token: str | None,
    users_file: Path | None,
    allowed_hosts: tuple[str, ...],
    max_lfs_size: str,
    no_cdn: bool,
    plan: str,
    limit_settings: tuple[str, ...],
    no_limits: bool,
) -> None:
    """Serve a local Hub until stopped; the first line printed is its endpoint URL."""
    from hubkit.errors import LocalHubError
    from hubkit.localhub import HubSettings, LocalHub
    from hubkit.localhub.accounts.access import load_users
    from hubkit.localhub.accounts.limits import HubLimits, parse_size

    try:
        users = load_users(users_file) if users_file else ()
        limits = HubLimits.off() if no_limits else HubLimits()
        limits = limits.with_settings(",".join(limit_settings))
        settings = HubSettings(
            token=token or None,
            users=users,
            allowed_hosts=allowed_hosts,
            max_lfs_size=parse_size(max_lfs_size),
            plan=plan,
            limits=limits,
        )
    except ValueError as e:
        raise LocalHubError(str(e)) from None
    server = LocalHub(root, host=host, port=port, cdn=not no_cdn, settings=settings)
    try:
        server.start()
    except OSError as e:
        raise click.ClickException(
            f"Cannot listen on {host}:{port} ({e.strerror}): choose another --port."
        ) from e
    click.echo(server.endpoint)
    click.echo(
        f"Serving {root}. Clients: HF_ENDPOINT={server.endpoint}. Stop with Ctrl-C.",
        err=True,
    )
    stopped = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopped.set())
    stopped.wait()
    server.stop()
