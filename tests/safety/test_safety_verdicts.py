"""Vetting remembered by content (`hubkit.safety.verdicts`): bytes that passed are not vetted again in the same
context, and nothing else is taken on trust: other bytes (even at the same size, inode and mtime), another
context, or a remembered rewrite that is not what vetting wrote are vetted again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hubkit.errors import SecretInFileError
from hubkit.runs.state import VETTED_DIR
from hubkit.safety import KnownVerdicts, VetContext, kinds, verdicts, vet_file
from hubkit.safety.validators import VALIDATORS
from tests.planted import HF_TOKEN

CONFIG = {"model_max_length": 64, "eos_token": "<|im_end|>", "tokenizer_class": "PreTrainedTokenizerFast"}


def _validated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kind of each file a validator reads from now on (every validator wrapped, still run)."""
    calls: list[str] = []
    for kind, validator in list(VALIDATORS.items()):

        def counted(data, vetting, validator=validator, kind=kind):
            calls.append(kind.name)
            return validator(data, vetting)

        monkeypatch.setitem(VALIDATORS, kind, counted)
    return calls


def _vet(path: Path, run_dir: Path, token: str | None = None):
    context = VetContext.for_run(run_dir, "me/base", token)
    return vet_file(path, kinds.TOKENIZER_CONFIG, context, known=KnownVerdicts.in_run(run_dir, context.key()))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "checkpoint-1" / "tokenizer_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**CONFIG, "note": "x" * 60}, indent=2))
    return path


def test_bytes_that_passed_are_not_vetted_again_and_give_what_vetting_wrote(config_file, monkeypatch):
    run_dir = config_file.parents[1]
    validated = _validated(monkeypatch)
    first = _vet(config_file, run_dir)
    assert validated == ["tokenizer config"]
    assert first.data != config_file.read_bytes()  # written from what was read (compact JSON)
    again = _vet(config_file, run_dir)
    assert validated == ["tokenizer config"]  # not vetted again
    assert (again.data, again.sha256, again.notes) == (first.data, first.sha256, first.notes)
    assert list((run_dir / VETTED_DIR).glob("*.json"))


def test_a_file_changed_at_the_same_size_inode_and_mtime_is_vetted_again(config_file, monkeypatch):
    run_dir = config_file.parents[1]
    _vet(config_file, run_dir)
    before = config_file.stat()
    planted = json.dumps({**CONFIG, "note": HF_TOKEN})
    config_file.write_text(planted.ljust(before.st_size))  # JSON may end in spaces: the same size
    os.utime(config_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = config_file.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    validated = _validated(monkeypatch)
    with pytest.raises(SecretInFileError, match="a Hugging Face token"):
        _vet(config_file, run_dir)
    assert validated == ["tokenizer config"]


def test_the_same_bytes_in_another_context_are_vetted_again(config_file, monkeypatch):
    run_dir = config_file.parents[1]
    in_use = "plain-words-that-are-a-token-now"
    config_file.write_text(json.dumps({**CONFIG, "note": in_use}))
    _vet(config_file, run_dir, token=None)  # passes: no token in use to look for
    validated = _validated(monkeypatch)
    with pytest.raises(SecretInFileError, match="the Hugging Face token in use"):
        _vet(config_file, run_dir, token=in_use)
    assert validated == ["tokenizer config"]


def test_a_remembered_rewrite_that_is_not_what_vetting_wrote_is_vetted_again(config_file, monkeypatch):
    run_dir = config_file.parents[1]
    first = _vet(config_file, run_dir)
    (kept,) = (run_dir / VETTED_DIR).glob("*.bin")
    kept.write_bytes(json.dumps({**CONFIG, "note": HF_TOKEN}).encode())  # not the sha256 it was kept with
    validated = _validated(monkeypatch)
    again = _vet(config_file, run_dir)
    assert validated == ["tokenizer config"] and again.data == first.data


def test_the_folder_keeps_the_newest_verdicts(tmp_path, monkeypatch):
    monkeypatch.setattr(verdicts, "KEPT_VERDICTS", 2)
    folder = tmp_path / "vetted"
    for number in range(4):  # each a session that vets something new, a second older than the next
        seen = set(folder.glob("*.json"))
        KnownVerdicts(folder, "context").put(kinds.CARD, f"sha-{number}", b"x" if number == 0 else None, ())
        (entry,) = set(folder.glob("*.json")) - seen
        os.utime(entry, ns=(number * 10**9, number * 10**9))
    known = KnownVerdicts(folder, "context")
    known.put(kinds.CARD, "sha-4", None, ())
    kept = [number for number in range(5) if known.get(kinds.CARD, f"sha-{number}") is not None]
    assert kept == [3, 4] and not list(folder.glob("*.bin"))
