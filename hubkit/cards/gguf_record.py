"""What a GGUF repo holds, recorded in its card's metadata (``hubkit_gguf:``): the merge its files were
written from (a `MergeRecord`) and each file with its type, size and sha256.

A push reads it back from the GGUF repo's state, as it reads the merged repo's ``hubkit_merge``, to tell
whether the repo already holds this merge in every asked type: then it exports nothing and uploads no
GGUF bytes.

    hubkit_gguf:
      merge: {adapter_repo: me/run, step: 200, adapter_sha256: 3c1f..., ...}   (as hubkit_merge)
      files:
        Q8_0: {name: run-Q8_0.gguf, size: 4280404352, sha256: 9d2e...}
      base:                                   (with --gguf-lora: the base model's GGUF files, by type)
        Q8_0: {name: base/Qwen3-4B-Q8_0.gguf, size: ..., sha256: ...}
      lora:                                   (each checkpoint's GGUF LoRA, by step)
        200: {name: lora/run-step-200-F16.gguf, size: ..., sha256: ...}
      verified:                               (each file's check before the push, `hubkit.verify.gguf`)
        Q8_0: {prompts: 3, eos: 151645, checked: llama.cpp, tokens: 72, top1_agreement: 0.986, mean_kl: ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from hubkit.cards.merge_record import SHA256_RE, MergeRecord

METADATA_KEY = "hubkit_gguf"


@dataclass(frozen=True)
class GGUFFileRecord:
    """One GGUF file of the repo: its name at the repo root, its size and sha256."""

    name: str
    size: int
    sha256: str

    def is_valid(self) -> bool:
        return (
            isinstance(self.name, str)
            and isinstance(self.size, int)
            and isinstance(self.sha256, str)
            and SHA256_RE.match(self.sha256) is not None
        )


@dataclass(frozen=True)
class GGUFRecord:
    """The GGUF files of a repo, one per type (``Q8_0``), and the merge they were written from (see the
    module docstring)."""

    merge: MergeRecord
    files: Mapping[str, GGUFFileRecord]
    base: Mapping[str, GGUFFileRecord] = field(default_factory=dict)
    lora: Mapping[int, GGUFFileRecord] = field(default_factory=dict)
    verified: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by type: the file's check

    def to_metadata(self) -> dict[str, Any]:
        """The record as the card's ``hubkit_gguf`` metadata."""
        data: dict[str, Any] = {
            "merge": self.merge.to_metadata(),
            "files": {t: asdict(f) for t, f in self.files.items()},
        }
        if self.lora:
            data["base"] = {t: asdict(f) for t, f in self.base.items()}
            data["lora"] = {step: asdict(f) for step, f in sorted(self.lora.items())}
        if self.verified:
            data["verified"] = {t: dict(v) for t, v in self.verified.items()}
        return data

    @classmethod
    def from_card_data(cls, card_data: Mapping[str, Any] | None) -> GGUFRecord | None:
        """The record in a card's metadata, or None when it has none or not one hubkit wrote."""
        if not isinstance(card_data, Mapping) or not isinstance(card_data.get(METADATA_KEY), Mapping):
            return None
        data = card_data[METADATA_KEY]
        merge = MergeRecord.from_metadata(data.get("merge"))
        files = data.get("files")
        if merge is None or not isinstance(files, Mapping):
            return None
        base, lora = data.get("base") or {}, data.get("lora") or {}
        try:
            records, base_records, lora_records = (_files(files), _files(base), _files(lora))
        except (KeyError, TypeError, AttributeError):
            return None
        # A step is a key: a number in the card's YAML, a string once the Hub has served cardData as JSON.
        if not all(isinstance(step, int | str) and str(step).isdigit() for step in lora_records):
            return None
        lora_records = {int(step): f for step, f in lora_records.items()}
        valid = all(isinstance(t, str) for t in (*records, *base_records))
        valid = valid and all(f.is_valid() for f in (*records.values(), *base_records.values()))
        valid = valid and all(f.is_valid() for f in lora_records.values())
        verified = data.get("verified") or {}
        if not isinstance(verified, Mapping) or not all(
            isinstance(t, str) and isinstance(v, Mapping) for t, v in verified.items()
        ):
            verified = {}
        return cls(merge, records, base_records, lora_records, dict(verified)) if valid else None

    def file_of(self, type_name: str) -> GGUFFileRecord | None:
        """The file of one type (``Q8_0``), if the repo holds one."""
        return self.files.get(type_name)


def _files(data: Mapping[Any, Any]) -> dict[Any, GGUFFileRecord]:
    return {key: GGUFFileRecord(**{k: f[k] for k in ("name", "size", "sha256")}) for key, f in data.items()}
