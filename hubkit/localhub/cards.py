"""README metadata: the YAML front matter the Hub parses into `cardData` and checks in `validate-yaml`.

PyYAML is used when it is installed (huggingface_hub depends on it); without it the metadata is
neither parsed nor checked, and the server still runs on the standard library alone.
"""

from __future__ import annotations

import re
from typing import Any

try:
    import yaml
except ImportError:  # the server itself needs only the standard library
    yaml = None

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.DOTALL)
# PyYAML keeps every node of a document, each with its position marks (some 500 bytes), and aliases
# let a few lines stand for an exponentially large value: metadata is read only within these bounds,
# far above any model card's.
MAX_METADATA_CHARS = 256 * 1024
MAX_METADATA_NODES = 50_000
MAX_METADATA_DEPTH = 64


if yaml is not None:

    class _BoundedLoader(yaml.SafeLoader):
        """yaml.SafeLoader with no aliases, and at most MAX_METADATA_NODES nodes MAX_METADATA_DEPTH deep."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._nodes = 0
            self._depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases (*name) are not accepted in README metadata")
            self._nodes += 1
            if self._nodes > MAX_METADATA_NODES or self._depth >= MAX_METADATA_DEPTH:
                raise yaml.YAMLError(
                    f"README metadata is too large (at most {MAX_METADATA_NODES} values, "
                    f"{MAX_METADATA_DEPTH} levels deep)"
                )
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1


def _load(text: str) -> Any:
    """The metadata's value. Raises yaml.YAMLError for invalid YAML or YAML beyond the bounds."""
    if len(text) > MAX_METADATA_CHARS:
        raise yaml.YAMLError(f"README metadata is too large (over {MAX_METADATA_CHARS} characters)")
    return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader: builds plain values only


# Keys the Hub expects to be a string or a list of strings.
_LIST_KEYS = ("tags", "datasets", "language", "metrics", "base_model", "pipeline_tag", "library_name")


def front_matter(readme: str) -> str | None:
    """The YAML text between the leading `---` lines of a README, or None when there is none."""
    match = _FRONT_MATTER.match(readme)
    return match.group(1) if match else None


def card_data(readme: str) -> dict[str, Any] | None:
    """The parsed metadata of a README, or None when absent, unparsable, or PyYAML is missing."""
    text = front_matter(readme)
    if text is None or yaml is None:
        return None
    try:
        data = _load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def metadata_errors(readme: str) -> list[str]:
    """What the Hub would refuse in a README's metadata (empty when it is fine)."""
    text = front_matter(readme)
    if text is None or yaml is None:
        return []
    try:
        data = _load(text)
    except yaml.YAMLError as e:
        return [f"Invalid YAML in the README metadata: {e}"]
    if data is None:
        return []
    if not isinstance(data, dict):
        return ["The README metadata must be a YAML mapping."]
    problems = []
    for key in _LIST_KEYS:
        value = data.get(key)
        if value is not None and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            problems.append(f'"{key}" must be a string or a list of strings')
    if "license" in data and not isinstance(data["license"], str):
        problems.append('"license" must be a string')
    problems += _model_index_errors(data.get("model-index"))
    return problems


def _model_index_errors(model_index: Any) -> list[str]:
    if model_index is None:
        return []
    if not isinstance(model_index, list):
        return ['"model-index" must be a list']
    problems = []
    for model in model_index:
        if not isinstance(model, dict) or not isinstance(model.get("name"), str):
            problems.append('each "model-index" entry needs a "name"')
            continue
        for result in model.get("results") or []:
            if not isinstance(result, dict) or not isinstance((result.get("task") or {}).get("type"), str):
                problems.append('each "model-index" result needs "task.type"')
            elif not isinstance((result.get("dataset") or {}).get("type"), str):
                problems.append('each "model-index" result needs "dataset.type"')
            elif not all(
                isinstance(m, dict) and "type" in m and "value" in m for m in result.get("metrics") or []
            ):
                problems.append('each "model-index" metric needs "type" and "value"')
    return problems
