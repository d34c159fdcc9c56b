"""What a merged repo holds, recorded in its card's metadata (``hubkit_merge:``): which adapter was merged
into which base, at which revision, and what the merge made.

A push reads it back from the merged repo's state (the Hub parses a card's metadata into the repo's
``cardData``, which the push's one read of the repo returns) to tell whether the merged repo already holds
the merge of this adapter; the adapter card reads it to keep linking the merged model while it exists.

    hubkit_merge:
      adapter_repo: me/qwen3-4b-grpo
      step: 200
      adapter_sha256: 3c1f...            (adapter_model.safetensors as published)
      adapter_config_sha256: 9a0b...     (adapter_config.json as published)
      base_model: Qwen/Qwen3-4B
      base_revision: 1cfa9a7...          (the commit the base was read at)
      dtype: bfloat16
      merged_modules: 252
      verified: {artifact: ..., prompts: 3, tokens: 72, max_abs_logit_diff: 7.5e-07, bound: 3.6e-06, ...}
                                         (the check against the adapter, `hubkit.verify`; absent unchecked)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

METADATA_KEY = "hubkit_merge"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")  # a sha256 as the Hub names LFS files: 64 lowercase hex digits


@dataclass(frozen=True)
class MergeRecord:
    """One merge, as the merged repo's card records it (the module docstring says each field);
    `verified` is `MergedCheck.to_dict`."""

    adapter_repo: str
    step: int
    adapter_sha256: str
    adapter_config_sha256: str
    base_model: str
    base_revision: str | None
    dtype: str
    merged_modules: int
    verified: Mapping[str, Any] | None = None

    def to_metadata(self) -> dict[str, Any]:
        """The record as the card's ``hubkit_merge`` metadata (without `verified` when unchecked)."""
        data = asdict(self)
        if self.verified is None:
            del data["verified"]
        return data

    @classmethod
    def from_card_data(cls, card_data: Mapping[str, Any] | None) -> MergeRecord | None:
        """The record in a card's metadata (`cardData`), or None when it has none or it is not one hubkit
        wrote (a merged repo made by hand, or by an older hubkit)."""
        if not isinstance(card_data, Mapping):
            return None
        return cls.from_metadata(card_data.get(METADATA_KEY))

    @classmethod
    def from_metadata(cls, data: object) -> MergeRecord | None:
        """The record from its own metadata (``hubkit_merge``'s value, or a GGUF record's ``merge``), or
        None when it is not one hubkit wrote."""
        if not isinstance(data, Mapping):
            return None
        try:
            verified = data.get("verified")
            fields = (name for name in cls.__dataclass_fields__ if name != "verified")
            record = cls(**{name: data[name] for name in fields}, verified=verified)
        except (KeyError, TypeError):
            return None
        valid = (
            isinstance(record.step, int)
            and isinstance(record.merged_modules, int)
            and all(isinstance(v, str) for v in (record.adapter_repo, record.base_model, record.dtype))
            and all(
                isinstance(v, str) and SHA256_RE.match(v)
                for v in (record.adapter_sha256, record.adapter_config_sha256)
            )
            and (record.base_revision is None or isinstance(record.base_revision, str))
            and (record.verified is None or isinstance(record.verified, Mapping))
        )
        return record if valid else None

    def is_merge_of(self, other: MergeRecord) -> bool:
        """Whether both record the same adapter (weights and config) merged into the same base revision.

        An unknown base revision never matches: the base's branch may have moved since.
        """
        return (
            self.adapter_sha256 == other.adapter_sha256
            and self.adapter_config_sha256 == other.adapter_config_sha256
            and self.base_model == other.base_model
            and self.base_revision is not None
            and self.base_revision == other.base_revision
        )
