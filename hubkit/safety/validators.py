"""One validator per kind of published file: read through the kind's format, checked, written back.

Each takes the file's bytes (already bounded by its kind's size) and returns the bytes to publish,
written from what was read: JSON from its parsed value, a tokenizer by `tokenizers`, merges line by
line, a PNG chunk by chunk. Fields naming the model by its local path become the base's Hub id; every
decoded string is then scanned for secrets and local paths (`hubkit.safety.scan`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from hubkit.errors import FileFormatError, LocalPathInFileError, ManifestError, SecretInFileError
from hubkit.formats import parquet, png, tensorboard, tokenizer
from hubkit.formats.json_file import (
    decode_text,
    dump_json,
    dump_jsonl,
    parse_json,
    parse_json_object,
    parse_jsonl,
)
from hubkit.formats.model_config import parse_model_config
from hubkit.formats.peft import LORA_CONFIG_FIELDS
from hubkit.formats.yaml_file import YAMLError, dump_yaml, load_yaml
from hubkit.runs.manifest import Manifest
from hubkit.safety import kinds
from hubkit.safety.local_paths import mask_homes, rewrite_local_fields
from hubkit.safety.scan import Scanner

_SHARD_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+\.safetensors$")
_HEX_DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")
# A dropped name a note may print: short, plain, and with no long unbroken run (a key could be one).
_SHOWN_NAME_RE = re.compile(r"^(?!.*[A-Za-z0-9]{16})[A-Za-z_][A-Za-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class Vetting:
    """What a validator needs besides the bytes: the file's label, the base's Hub id, the scanner."""

    label: str
    hub_id: str
    scanner: Scanner

    def shown(self, names: Iterable[str]) -> str:
        """Dropped names as a note may print them: plain short names, others only counted."""
        names = sorted(names)
        plain = [n for n in names if _SHOWN_NAME_RE.match(n) and self.scanner.secrets.find(n) is None]
        others = len(names) - len(plain)
        return ", ".join(plain + ([f"{others} other{'s' if others > 1 else ''}"] if others else []))


@dataclass(frozen=True)
class Written:
    """A validator's result: the bytes to publish and what was changed on the way (for the dry run)."""

    data: bytes
    notes: tuple[str, ...] = ()


Validator = Callable[[bytes, Vetting], Written]


def _rewritten(value: Any, vetting: Vetting) -> tuple[str, ...]:
    changed = rewrite_local_fields(value, vetting.hub_id)
    return (f"{changed} field(s) naming the model by its path set to {vetting.hub_id}",) if changed else ()


def _json_document(parse: Callable[[bytes, str], dict[str, Any]]) -> Validator:
    """A validator for a JSON config: parsed by `parse`, path fields rewritten, scanned, written back."""

    def validate(data: bytes, vetting: Vetting) -> Written:
        value = parse(data, vetting.label)
        notes = _rewritten(value, vetting)
        vetting.scanner.check_value(value, vetting.label)
        return Written(dump_json(value, vetting.label), notes)

    return validate


def _adapter_config(data: bytes, vetting: Vetting) -> Written:
    value = parse_json_object(data, vetting.label)
    unknown = set(value) - LORA_CONFIG_FIELDS
    kept = {key: v for key, v in value.items() if key in LORA_CONFIG_FIELDS}
    notes = _rewritten(kept, vetting)
    if unknown:
        notes += (f"dropped what PEFT's LoraConfig does not read: {vetting.shown(unknown)}",)
    vetting.scanner.check_value(kept, vetting.label)
    return Written(dump_json(kept, vetting.label), notes)


def _weights_index(data: bytes, label: str) -> dict[str, Any]:
    value = parse_json_object(data, label)
    weight_map = value.get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(f, str) and _SHARD_NAME_RE.match(f) for f in weight_map.values()
    ):
        raise FileFormatError(f"{label}: weight_map must map tensor names to shard files beside the index")
    return value


def _manifest(data: bytes, label: str) -> dict[str, Any]:
    try:
        return Manifest.from_dict(parse_json(data, label)).to_dict()
    except ManifestError as e:
        raise FileFormatError(f"{label}: {e}") from e


def _tokenizer_json(data: bytes, vetting: Vetting) -> Written:
    read = tokenizer.read_tokenizer_json(data, vetting.label)
    vetting.scanner.check_value(read.value, vetting.label)
    return Written(read.data)


def _vocab(data: bytes, vetting: Vetting) -> Written:
    vocab = tokenizer.parse_vocab(data, vetting.label)
    vetting.scanner.check_value(vocab, vetting.label)
    return Written(tokenizer.vocab_bytes(vocab, vetting.label))


def _added_tokens(data: bytes, vetting: Vetting) -> Written:
    added = tokenizer.parse_added_tokens(data, vetting.label)
    vetting.scanner.check_value(added, vetting.label)
    return Written(dump_json(added, vetting.label))


def _merges(data: bytes, vetting: Vetting) -> Written:
    merges = tokenizer.parse_merges(data, vetting.label)
    vetting.scanner.check_text(decode_text(data, vetting.label), vetting.label)
    return Written(tokenizer.merges_bytes(merges))


def _text_document(read: Callable[[bytes, str], str]) -> Validator:
    """A validator for text: read by `read` (decoded, a template also parsed), scanned, written back."""

    def validate(data: bytes, vetting: Vetting) -> Written:
        text = read(data, vetting.label)
        vetting.scanner.check_text(text, vetting.label)
        return Written(text.encode("utf-8"))

    return validate


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask_homes(value)
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return {k: _masked(v) for k, v in value.items()} if isinstance(value, dict) else value


def _json_lines(data: bytes, vetting: Vetting, *, model_text: bool = False) -> Written:
    """`model_text`: what a model wrote, published with the homes it names masked (`mask_homes`)."""
    records = parse_jsonl(data, vetting.label)
    if model_text:
        records = _masked(records)
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            raise FileFormatError(f"{vetting.label} record {number}: not a JSON object")
    try:
        vetting.scanner.check_value(records, vetting.label)
    except (SecretInFileError, LocalPathInFileError):
        # One scan of every record at once; on a refusal, the record that holds it is found and named.
        for number, record in enumerate(records, start=1):
            vetting.scanner.check_value(record, f"{vetting.label} record {number}")
        raise
    return Written(dump_jsonl(records, vetting.label))


def _training_events(data: bytes, vetting: Vetting) -> Written:
    history = tensorboard.read_scalars_bytes(data, vetting.label)
    if history.notes:
        raise FileFormatError(history.notes[0])
    vetting.scanner.check_value(sorted(history.points), vetting.label)  # the tags: the only strings it holds
    return Written(tensorboard.write_scalars(history.points))


def _benchmark_results(data: bytes, vetting: Vetting) -> Written:
    from huggingface_hub import eval_result_entries_to_yaml, parse_eval_result_entries

    try:
        entries = load_yaml(decode_text(data, vetting.label))
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise FileFormatError(f"{vetting.label}: not a YAML list of evaluation results")
        parsed = parse_eval_result_entries(entries)
    except (YAMLError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise FileFormatError(f"{vetting.label}: not evaluation results the Hub reads ({e})") from e
    written = eval_result_entries_to_yaml(parsed)
    vetting.scanner.check_value(written, vetting.label)
    return Written(dump_yaml(written).encode("utf-8"))


def _samples_table(data: bytes, vetting: Vetting) -> Written:
    table = parquet.map_strings(parquet.read_table(data, vetting.label), mask_homes)  # what a model wrote
    texts = parquet.string_cells(table)
    scanner = vetting.scanner.for_model_text()
    try:
        scanner.check_value(texts, vetting.label)
    except (SecretInFileError, LocalPathInFileError):
        # One scan of every cell at once; on a refusal, the row that holds it is found and named.
        for number, row in enumerate(parquet.string_rows(table), start=1):
            scanner.check_value(row, f"{vetting.label} row {number}")
        raise
    return Written(parquet.write_table(table))


def _problem_hashes(data: bytes, vetting: Vetting) -> Written:
    lines = [line for line in decode_text(data, vetting.label).split("\n") if line]
    bad = next((n for n, line in enumerate(lines, start=1) if not _HEX_DIGEST_RE.match(line)), None)
    if bad is not None:
        raise FileFormatError(f"{vetting.label}: line {bad} is not a sha256 hex digest")
    return Written("".join(line + "\n" for line in lines).encode("ascii"))


def _png(data: bytes, vetting: Vetting) -> Written:
    image = png.read_png(data, vetting.label)
    notes = (f"dropped PNG chunks: {vetting.shown(image.dropped)}",) if image.dropped else ()
    if image.trailing:
        notes += ("dropped bytes after the PNG image's end",)
    return Written(image.data, notes)


VALIDATORS: dict[kinds.Kind, Validator] = {
    kinds.ADAPTER_CONFIG: _adapter_config,
    kinds.TOKENIZER: _tokenizer_json,
    kinds.TOKENIZER_CONFIG: _json_document(tokenizer.parse_tokenizer_config),
    kinds.SPECIAL_TOKENS_MAP: _json_document(tokenizer.parse_special_tokens_map),
    kinds.ADDED_TOKENS: _added_tokens,
    kinds.VOCAB: _vocab,
    kinds.MERGES: _merges,
    kinds.CHAT_TEMPLATE: _text_document(tokenizer.parse_chat_template),
    kinds.CHAT_TEMPLATE_JSON: _json_document(tokenizer.parse_chat_template_json),
    kinds.GENERATION_CONFIG: _json_document(tokenizer.parse_generation_config),
    kinds.MODEL_CONFIG: _json_document(lambda data, label: parse_model_config(data, label).values),
    kinds.WEIGHTS_INDEX: _json_document(_weights_index),
    kinds.MANIFEST: _json_document(_manifest),
    kinds.METRICS: _json_lines,
    kinds.TRAINING_EVENTS: _training_events,
    kinds.EVAL_RESULTS: _json_document(parse_json_object),
    kinds.EVAL_SAMPLES: lambda data, vetting: _json_lines(
        data, replace(vetting, scanner=vetting.scanner.for_model_text()), model_text=True
    ),
    kinds.BENCHMARK_RESULTS: _benchmark_results,
    kinds.TRAIN_PROBLEM_HASHES: _problem_hashes,
    kinds.CARD: _text_document(decode_text),
    kinds.LICENSE: _text_document(decode_text),
    kinds.IMAGE: _png,
    kinds.SPACE_MODULE: _text_document(decode_text),
    kinds.SPACE_CONFIG: _json_document(parse_json_object),
    kinds.REQUIREMENTS: _text_document(decode_text),
    kinds.SAMPLES_TABLE: _samples_table,
}
