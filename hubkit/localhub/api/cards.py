"""README metadata: the YAML front matter the Hub parses into `cardData` and checks in `validate-yaml`;
and a model's evaluation results (``.eval_results/*.yaml``), which it lists under ``evalResults``.

PyYAML is used when it is installed (huggingface_hub depends on it); without it the metadata is
neither parsed nor checked, and the server still runs on the standard library alone.
"""

from __future__ import annotations

import re
from typing import Any

from hubkit.formats.yaml_file import MAX_CHARS, YAMLError, load_yaml, yaml_available

# Where a card's metadata is: the YAML between `---` lines, after blank lines if any, as huggingface_hub
# reads it (repocard.REGEX_YAML_BLOCK), so a block after a blank line is checked, not skipped.
_FRONT_MATTER = re.compile(r"\A\s*---(?:\r\n|\r|\n)([\S\s]*?)(?:\r\n|\r|\n)---[ \t]*(?:\r\n|\n|\Z)")
# Metadata is read within the YAML reader's bounds (`hubkit.formats.yaml_file`), far above any card's.
MAX_METADATA_CHARS = MAX_CHARS
# The Hub's warning for a card without metadata (its words, as the client prints them).
NO_METADATA_WARNING = "empty or missing yaml metadata in repo card"

# The licence identifiers the Hub accepts (hub-docs docs/hub/repositories-licenses.md, August 2026).
LICENSES = [
    "apache-2.0",
    "mit",
    "openrail",
    "bigscience-openrail-m",
    "creativeml-openrail-m",
    "bigscience-bloom-rail-1.0",
    "bigcode-openrail-m",
    "afl-3.0",
    "artistic-2.0",
    "bsl-1.0",
    "bsd",
    "bsd-2-clause",
    "bsd-3-clause",
    "bsd-3-clause-clear",
    "c-uda",
    "cc",
    "cc0-1.0",
    "cc-by-2.0",
    "cc-by-2.5",
    "cc-by-3.0",
    "cc-by-4.0",
    "cc-by-sa-3.0",
    "cc-by-sa-4.0",
    "cc-by-nc-2.0",
    "cc-by-nc-3.0",
    "cc-by-nc-4.0",
    "cc-by-nd-4.0",
    "cc-by-nc-nd-3.0",
    "cc-by-nc-nd-4.0",
    "cc-by-nc-sa-2.0",
    "cc-by-nc-sa-3.0",
    "cc-by-nc-sa-4.0",
    "cdla-sharing-1.0",
    "cdla-permissive-1.0",
    "cdla-permissive-2.0",
    "wtfpl",
    "ecl-2.0",
    "epl-1.0",
    "epl-2.0",
    "etalab-2.0",
    "eupl-1.1",
    "eupl-1.2",
    "agpl-3.0",
    "gfdl",
    "gpl",
    "gpl-2.0",
    "gpl-3.0",
    "lgpl",
    "lgpl-2.1",
    "lgpl-3.0",
    "isc",
    "h-research",
    "intel-research",
    "lppl-1.3c",
    "ms-pl",
    "apple-ascl",
    "apple-amlr",
    "mpl-2.0",
    "odc-by",
    "odbl",
    "openmdw-1.0",
    "openmdw-1.1",
    "openrail++",
    "osl-3.0",
    "postgresql",
    "ofl-1.1",
    "ncsa",
    "unlicense",
    "zlib",
    "pddl",
    "lgpl-lr",
    "deepfloyd-if-license",
    "fair-noncommercial-research-license",
    "llama2",
    "llama3",
    "llama3.1",
    "llama3.2",
    "llama3.3",
    "llama4",
    "grok2-community",
    "gemma",
    "unknown",
    "other",
]
# hub-docs docs/hub/model-cards.md: how a model relates to its `base_model`.
BASE_MODEL_RELATIONS = ("adapter", "merge", "quantized", "finetune")
# Keys the Hub expects to be a string or a list of strings.
_LIST_KEYS = ("tags", "datasets", "language", "metrics", "base_model", "license")
_STRING_KEYS = ("pipeline_tag", "library_name", "license_name", "license_link", "base_model_relation")


def _metadata(readme: str) -> tuple[Any, str | None]:
    """A README's metadata value and why it cannot be read ((None, None) without metadata or PyYAML)."""
    match = _FRONT_MATTER.match(readme)
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


def metadata_warnings(readme: str) -> list[str]:
    """What the Hub warns of in a README's metadata, without refusing it: no metadata at all."""
    data, error = _metadata(readme)
    return [NO_METADATA_WARNING] if error is None and not data else []


def metadata_errors(readme: str) -> list[str]:
    """What the Hub would refuse in a README's metadata (empty when it is fine), in its validator's
    words (`"<key>" must be ...`, as Joi writes them)."""
    data, error = _metadata(readme)
    if error is not None:
        return [f"Invalid YAML in the README metadata: {error}"]
    if data is None:
        return []
    if not isinstance(data, dict):
        return ['"value" must be of type object']
    problems = []
    for key in _LIST_KEYS:
        value = data.get(key)
        if value is not None and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            problems.append(f'"{key}" must be a string or an array of strings')
    for key in _STRING_KEYS:
        if data.get(key) is not None and not isinstance(data[key], str):
            problems.append(f'"{key}" must be a string')
    licenses = data.get("license")
    for value in [licenses] if isinstance(licenses, str) else licenses if isinstance(licenses, list) else []:
        if isinstance(value, str) and value not in LICENSES:
            problems.append(f'"license" must be one of [{", ".join(LICENSES)}]')
            break
    relation = data.get("base_model_relation")
    if isinstance(relation, str) and relation not in BASE_MODEL_RELATIONS:
        problems.append(f'"base_model_relation" must be one of [{", ".join(BASE_MODEL_RELATIONS)}]')
    problems += _model_index_errors(data.get("model-index"))
    return problems


def _model_index_errors(model_index: Any) -> list[str]:
    """The shape huggingface_hub's `model_index_to_eval_results` reads: a list of {name, results: [{task:
    {type}, dataset: {type, name}, metrics: [{type, value}]}]}."""
    if model_index is None:
        return []
    if not isinstance(model_index, list):
        return ['"model-index" must be an array']
    problems = []
    for i, model in enumerate(model_index):
        where = f"model-index[{i}]"
        if not isinstance(model, dict):
            problems.append(f'"{where}" must be of type object')
            continue
        if not isinstance(model.get("name"), str):
            problems.append(f'"{where}.name" is required')
        results = model.get("results")
        if not isinstance(results, list):
            problems.append(f'"{where}.results" must be an array')
            continue
        for j, result in enumerate(results):
            problems += _result_errors(f"{where}.results[{j}]", result)
    return problems


def _result_errors(where: str, result: Any) -> list[str]:
    if not isinstance(result, dict):
        return [f'"{where}" must be of type object']
    problems = []
    for part, required in (("task", ("type",)), ("dataset", ("type", "name"))):
        value = result.get(part)
        if not isinstance(value, dict):
            problems.append(f'"{where}.{part}" is required')
            continue
        problems += [
            f'"{where}.{part}.{k}" is required' for k in required if not isinstance(value.get(k), str)
        ]
    metrics = result.get("metrics")
    if not isinstance(metrics, list):
        return [*problems, f'"{where}.metrics" must be an array']
    for k, metric in enumerate(metrics):
        if not isinstance(metric, dict) or not isinstance(metric.get("type"), str) or "value" not in metric:
            problems.append(f'"{where}.metrics[{k}]" needs "type" and "value"')
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
