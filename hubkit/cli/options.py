"""Command-line options described once, on the dataclass a command builds (mergekit's options object, with
dataclasses): a field whose metadata has a "help" is an option, ``--field-name``, its click type read from
its annotation and its default the field's. A command made by `command` generates its options from such
dataclasses when they are first needed, so `hubkit --help` imports none of them (hubkit.publish alone costs
0.28 s), and gets them as keyword arguments named for the fields: `PushRequest(run_dir=..., **options)`.

Metadata, beside "help":
    flag: the option's name when it is not --field-name (``--base`` for `include_base`).
    metavar, envvar, required: as click's.
    range: a number's bounds, as click.IntRange / FloatRange take them (``{"min": 1}``).
    path: click.Path's arguments beside `path_type` (``{"file_okay": False}``).
    choices: the values a `str` may take (a `Literal[...]` annotation says them itself).
A `bool` is a flag (``--name/--no-name`` when it defaults to True), a `tuple[T, ...]` comma-separated values
(``--steps 20,40``), an ``X | None`` an X that may be left out.

`Target` is the one option group naming what a command reads (a run, a release, a sweep), with the
combinations it refuses.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import click

from hubkit.hub.repo_types import HUB_ENDPOINT

if TYPE_CHECKING:
    from hubkit.runs import Run

F = TypeVar("F", bound=Callable[..., Any])


def options_of(cls: type, *names: str, **metadata: Mapping[str, Any]) -> list[click.Option]:
    """The options of the dataclass `cls`: its fields with a "help", or only `names` of them, in field order;
    `metadata` overrides a field's (``repo_id={"help": ..., "required": True}``)."""
    hints = get_type_hints(cls)
    return [
        _option(f.name, hints[f.name], f.default, {**f.metadata, **metadata.get(f.name, {})})
        for f in fields(cls)
        if (f.name in names if names else "help" in f.metadata)
    ]


def _option(name: str, annotation: Any, default: Any, metadata: Mapping[str, Any]) -> click.Option:
    flag = metadata.get("flag", _flag(name))
    kwargs = {key: metadata[key] for key in ("help", "metavar", "envvar", "required") if key in metadata}
    if get_origin(annotation) is types.UnionType:  # X | None
        (annotation,) = (arg for arg in get_args(annotation) if arg is not type(None))
    if get_origin(annotation) is tuple:
        kwargs["callback"] = _comma_separated(_click_type(get_args(annotation)[0], metadata), default)
        default = None
    elif annotation is bool:
        flag, kwargs["is_flag"] = (f"{flag}/--no-{flag[2:]}" if default else flag), True
    else:
        kwargs["type"] = _click_type(annotation, metadata)
    default = None if default is MISSING else default
    shown = default is not None and default is not False
    return click.Option([flag, name], default=default, show_default=shown, **kwargs)


def _click_type(annotation: Any, metadata: Mapping[str, Any]) -> click.ParamType | type:
    if get_origin(annotation) is Literal:
        return click.Choice(get_args(annotation))
    if "choices" in metadata:
        return click.Choice(metadata["choices"])
    if annotation is Path:
        return click.Path(path_type=Path, **metadata.get("path", {}))
    if "range" in metadata:
        return (click.IntRange if annotation is int else click.FloatRange)(**metadata["range"])
    return annotation


def _comma_separated(item: click.ParamType | type, default: Any) -> Callable[..., Any]:
    """A click callback reading ``A,B,...`` as a tuple of `item` values (the field's default when not given)."""
    convert = click.types.convert_type(item)

    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
        if value is None:
            return default
        values = tuple(convert(part.strip(), param, ctx) for part in value.split(",") if part.strip())
        if not values:
            raise click.BadParameter(f"expected comma-separated values, got {value!r}")
        return values

    return parse


@dataclass(frozen=True)
class Target:
    """What a command reads: a run (--run-id under --runs-dir, or --run-dir), a release (--repo-id), or every
    run of a sweep (--sweep without a run). A command takes some of these options; --repo-id and --sweep say
    what they mean for it in their help. `check` refuses the combinations `EXCLUSIONS` names."""

    run_id: str | None = field(default=None, metadata={"help": "The run's id: a directory under --runs-dir."})
    runs_dir: Path | None = field(
        default=None,
        metadata={
            "help": "Where runs live.  [default: $HUBKIT_RUNS_DIR or runs/]",
            "envvar": "HUBKIT_RUNS_DIR",
            "path": {"file_okay": False},
        },
    )
    run_dir: Path | None = field(
        default=None,
        metadata={"help": "The run directory itself, instead of --run-id.", "path": {"file_okay": False}},
    )
    base_model: str | None = field(
        default=None,
        metadata={
            "help": "The base model's Hub id, for runs without hubkit.json whose adapters do not name one.",
            "metavar": "ORG/NAME",
        },
    )
    repo_id: str | None = field(default=None, metadata={"metavar": "OWNER/NAME"})  # its help: the command's
    sweep: str | None = field(default=None, metadata={"metavar": "NAME"})

    @property
    def run_given(self) -> bool:
        return bool(self.run_id or self.run_dir)

    @property
    def whole_sweep(self) -> bool:
        """--sweep NAME without a run: every run of the sweep under --runs-dir."""
        return self.sweep is not None and not self.run_given

    def find(self, must_exist: bool = True) -> Path:
        """The run directory (`hubkit.runs.find_run_dir`)."""
        from hubkit.runs import find_run_dir

        return find_run_dir(self.run_id, self.runs_dir, self.run_dir, must_exist=must_exist)

    def load(self, steps: Collection[int] | None = None) -> Run:
        """The run, read (`hubkit.runs.load_run`)."""
        from hubkit.runs import load_run

        return load_run(self.find(), base_model=self.base_model, steps=steps)

    def check(self, reads: Collection[str]) -> None:
        """Refuse, in one line, an option that cannot go with one of `reads` (the options that name what the
        command reads instead of a run: ``repo_id``, ``sweep``)."""
        for name in reads:
            excluded, why = EXCLUSIONS[name]
            given = [_flag(other) for other in excluded if getattr(self, name) and getattr(self, other)]
            if given:
                raise click.UsageError(f"{' and '.join(given)} cannot go with {_flag(name)}: {why}")


# What a release (--repo-id) or a sweep (--sweep) read instead of a run cannot go with, and why.
EXCLUSIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "repo_id": (
        ("run_id", "run_dir", "base_model"),
        "a release names its own base model and checkpoints (drop --repo-id to read a run directory)",
    ),
    "sweep": (("run_id", "run_dir", "repo_id"), "--sweep reads every run of the sweep under --runs-dir"),
}

RUN = ("run_id", "runs_dir", "run_dir", "base_model")  # the options naming a run


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


class FormCommand(click.Command):
    """A command whose options are the `Target` ones it takes, then those `options` makes (importing the
    dataclasses they come from, on first use), then its own decorators'; its function gets a `Target`."""

    def __init__(
        self,
        *args: Any,
        target: Mapping[str, Mapping[str, Any]],
        options: Callable[[], list[click.Option]],
        **kwargs: Any,
    ) -> None:
        self._target, self._options = target, options
        self._generated: list[click.Parameter] | None = None
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def params(self) -> list[click.Parameter]:
        if self._generated is None:
            target = options_of(Target, *self._target, **self._target) if self._target else []
            self._generated = [*target, *self._options(), *self._own]
        return self._generated

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._own = value

    def invoke(self, ctx: click.Context) -> Any:
        given = {name: ctx.params.pop(name) for name in self._target}
        ctx.params["target"] = Target(**given)
        return super().invoke(ctx)


def command(
    name: str | None = None,
    *,
    target: Collection[str] = RUN,
    options: Callable[[], list[click.Option]] = list,
    **metadata: str | Mapping[str, Any],
) -> Callable[[F], click.Command]:
    """A command taking the `Target` options `target` (with `metadata`: a help, or a field's metadata
    overridden, as for `options_of`) and the options `options` returns.

        @command(target=(*RUN, "repo_id"), repo_id="The adapter repo.", options=lambda: options_of(Form))
        def run(target: Target, **form): ...
    """
    overrides = {k: {"help": v} if isinstance(v, str) else v for k, v in metadata.items()}
    taken = {name: overrides.get(name, {}) for name in target}
    return click.command(name, cls=FormCommand, target=taken, options=options)  # type: ignore[return-value]


def endpoint_option(command: F) -> F:
    """`--endpoint`: the Hub to talk to (`HF_ENDPOINT`, else huggingface.co)."""
    return click.option(
        "--endpoint",
        envvar="HF_ENDPOINT",
        default=HUB_ENDPOINT,
        show_default=True,
        help="The Hub URL (also read from HF_ENDPOINT), e.g. a local `hubkit hub serve`.",
    )(command)


def quiet_option(command: F) -> F:
    """`--quiet`: no progress bars or summaries, only errors."""
    return click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")(command)
