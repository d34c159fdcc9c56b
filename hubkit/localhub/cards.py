"""README metadata: the YAML front matter the Hub parses into `cardData` and checks in `validate-yaml`;
and a model's evaluation results (``.eval_results/*.yaml``), which it lists under ``evalResults``.

PyYAML is used when it is installed (huggingface_hub depends on it); without it the metadata is
neither parsed nor checked, and the server still runs on the standard library alone.
"""

from __future__ import annotations

import re
from typing import Any

from hubkit.formats.yaml_file import MAX_CHARS, YAMLError, load_yaml, yaml_available

_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(\n|\Z)", re.DOTALL)
# Metadata is read within the YAML reader's bounds (`hubkit.formats.yaml_file`), far above any card's.
MAX_METADATA_CHARS = MAX_CHARS


# Keys the Hub expects to be a string or a list of strings.
_LIST_KEYS = ("tags", "datasets", "language", "metrics", "base_model", "pipeline_tag", "library_name")


def _metadata(readme: str) -> tuple[Any, str | None]:
    """A README's metadata value and why it cannot be read ((None, None) without metadata or PyYAML)."""
    match = _FRONT_MATTER.match(readme)  # the YAML between the leading `---` lines
    if match is None or not yaml_available():
        return None, None
    try:
        return load_yaml(match.group(1)), None
    except YAMLError as e:
        return None, str(e)


def card_data(readme: str) -> dict[str, Any] | None:
    """The parsed metadata of a README, or None when absent, unparsable, or PyYAML is missing."""
    data, _ = _metadata(readme)
    return data if isinstance(data, dict) else None


def metadata_errors(readme: str) -> list[str]:
    """What the Hub would refuse in a README's metadata (empty when it is fine)."""
    data, error = _metadata(readme)
    if error is not None:
        return [f"Invalid YAML in the README metadata: {error}"]
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


EVAL_RESULTS_DIR = ".eval_results/"


def eval_results_items(filename: str, text: str) -> list[dict[str, Any]]:
    """What the Hub lists under a model's ``evalResults`` for one ``.eval_results/*.yaml`` file: an item per
    entry (``filename``, ``verified``, ``data``), or one item with an ``error`` when the file is not a YAML
    list of entries each naming a dataset id, a task id and a value."""
    if not yaml_available():
        return []
    try:
        data = load_yaml(text)
    except YAMLError as e:
        return [{"filename": filename, "error": f"Invalid YAML: {str(e)[:200]}"}]
    valid = isinstance(data, list) and all(
        isinstance(entry, dict)
        and isinstance(entry.get("dataset"), dict)
        and isinstance(entry["dataset"].get("id"), str)
        and isinstance(entry["dataset"].get("task_id"), str)
        and "value" in entry
        for entry in data
    )
    if not valid:
        return [{"filename": filename, "error": "Each entry needs dataset.id, dataset.task_id and value."}]
    return [{"filename": filename, "verified": False, "data": entry} for entry in data]
