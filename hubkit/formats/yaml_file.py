"""YAML from outside (a card's metadata, a benchmark's ``eval.yaml``, an ``.eval_results`` file), read within
bounds: PyYAML keeps every node of a document, each with its position marks (some 500 bytes), and aliases
let a few lines stand for an exponentially large value. So a document is read with PyYAML's SafeLoader
(plain values only), no aliases, at most `MAX_NODES` nodes `MAX_DEPTH` deep and `MAX_CHARS` characters,
far above any real card's or benchmark's.

PyYAML is optional here (huggingface_hub depends on it; the local Hub runs without it): `yaml_available`
says whether documents can be read at all.
"""

from __future__ import annotations

from typing import Any

try:
    import yaml
except ImportError:  # the local Hub itself needs only the standard library
    yaml = None

MAX_CHARS = 256 * 1024
MAX_NODES = 50_000
MAX_DEPTH = 64


class YAMLError(ValueError):
    """Invalid YAML, or YAML beyond the bounds; the message says which."""


def yaml_available() -> bool:
    return yaml is not None


if yaml is not None:

    class _BoundedLoader(yaml.SafeLoader):
        """yaml.SafeLoader with no aliases, and at most MAX_NODES nodes MAX_DEPTH deep."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._nodes = 0
            self._depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases (*name) are not accepted")
            self._nodes += 1
            if self._nodes > MAX_NODES or self._depth >= MAX_DEPTH:
                raise yaml.YAMLError(f"too large (at most {MAX_NODES} values, {MAX_DEPTH} levels deep)")
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1


def load_yaml(text: str) -> Any:
    """The document's value (plain values only).

    Raises:
        YAMLError: invalid YAML, beyond the bounds, or PyYAML is not installed.
    """
    if yaml is None:
        raise YAMLError("PyYAML is not installed")
    if len(text) > MAX_CHARS:
        raise YAMLError(f"too large (over {MAX_CHARS} characters)")
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader: builds plain values only
    except yaml.YAMLError as e:
        raise YAMLError(str(e)) from e


def dump_yaml(value: Any) -> str:
    """`value` (plain values) as block YAML, keys in their order, Unicode kept.

    Raises:
        YAMLError: PyYAML is not installed.
    """
    if yaml is None:
        raise YAMLError("PyYAML is not installed")
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True)


def with_front_matter(metadata: Any, body: str) -> str:
    """A Hub repo card: `metadata` as its YAML front matter (what the Hub reads into ``cardData``), then `body`."""
    return "---\n" + dump_yaml(metadata) + "---\n\n" + body
