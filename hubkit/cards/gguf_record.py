"""What a GGUF repo holds, recorded in its card's metadata (``hubkit_gguf:``): the merge its files were
written from (a `MergeRecord`) and each file with its type, size and sha256.

A push reads it back from the GGUF repo's state, as it reads the merged repo's ``hubkit_merge``, to tell
whether the repo already holds this merge in every asked type: then it exports nothing and uploads no
GGUF bytes.

    hubkit_gguf:
      merge: {adapter_repo: me/run, step: 200, adapter_sha256: 3c1f..., ...}   (as hubkit_merge)
      files:
      - {name: run-Q8_0.gguf, type: Q8_0, size: 4280404352, sha256: 9d2e...}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hubkit.cards import merge_record
from hubkit.cards.merge_record import MergeRecord

METADATA_KEY = "hubkit_gguf"
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class GGUFFileRecord:
    """One GGUF file of the repo: its name at the repo root, its type (``Q8_0``), size and sha256."""

    name: str
    type: str
    size: int
    sha256: str


@dataclass(frozen=True)
class GGUFRecord:
    """The GGUF files of a repo and the merge they were written from (see the module docstring)."""

    merge: MergeRecord
    files: tuple[GGUFFileRecord, ...]

    def to_metadata(self) -> dict[str, Any]:
        """The record as the card's ``hubkit_gguf`` metadata."""
        return {"merge": self.merge.to_metadata(), "files": [asdict(f) for f in self.files]}

    @classmethod
    def from_card_data(cls, card_data: Mapping[str, Any] | None) -> GGUFRecord | None:
        """The record in a card's metadata, or None when it has none or not one hubkit wrote."""
        if not isinstance(card_data, Mapping) or not isinstance(card_data.get(METADATA_KEY), Mapping):
            return None
        data = card_data[METADATA_KEY]
        merge = MergeRecord.from_card_data({merge_record.METADATA_KEY: data.get("merge")})
        files = data.get("files")
        if merge is None or not isinstance(files, list):
            return None
        try:
            records = tuple(
                GGUFFileRecord(**{k: f[k] for k in ("name", "type", "size", "sha256")}) for f in files
            )
        except (KeyError, TypeError):
            return None
        valid = all(
            isinstance(f.name, str)
            and isinstance(f.type, str)
            and isinstance(f.size, int)
            and isinstance(f.sha256, str)
            and _SHA256_RE.match(f.sha256)
            for f in records
        )
        return cls(merge, records) if valid else None

    def file_of(self, type_name: str) -> GGUFFileRecord | None:
        """The file of one type (``Q8_0``), if the repo holds one."""
        return next((f for f in self.files if f.type == type_name), None)
