"""The GGUF repo (`<repo>-GGUF`, the Hub's convention): the merged model as GGUF files for llama.cpp,
Ollama and LM Studio, one per asked type, beside a card that says which merge they hold.

    RUN-Q8_0.gguf, RUN-BF16.gguf      (`hubkit.export`, written from the merged model)
    base/BASE-Q8_0.gguf, ...          (with --gguf-lora: the base model in the same types)
    lora/RUN-step-N-F16.gguf          (with --gguf-lora: each pushed checkpoint, `hubkit.export.gguf_lora`)
    README.md                         (the GGUF card; its ``hubkit_gguf`` metadata records the merge)

The files follow the merged repo: they are written from the same merge, when the push merges or the
merged repo already holds the newest merge. An export of a 4B model takes a minute and writes 4 to 8 GB
per type, so it is made only when the GGUF repo does not already hold this merge in every asked type
(the record in its card, checked against the files' sha256 on the Hub); then only the card is refreshed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.cards.gguf_record import GGUFFileRecord, GGUFRecord
from hubkit.cards.merge_record import MergeRecord
from hubkit.errors import GGUFExportError
from hubkit.formats import gguf_types
from hubkit.hub.hashing import FileHashCache, FileHashes, FileVersion
from hubkit.hub.remote import RemoteRepo
from hubkit.publish.merge_decision import MergeDecision
from hubkit.publish.merged_repo import use_release_tokenizer
from hubkit.publish.plan import PlannedFile, RepoPlan
from hubkit.publish.vetted import Vetter
from hubkit.safety import kinds

if TYPE_CHECKING:
    from hubkit.adapters.prepare import PreparedAdapter
    from hubkit.cards import BaseModelCard
    from hubkit.export import GGUFExport, GGUFFile, GGUFMetadata
    from hubkit.export.gguf import ProgressCallback
    from hubkit.export.gguf_lora import GGUFLoraPlan
    from hubkit.merge import MergeResult
    from hubkit.publish.adapter_repo import RunFiles
    from hubkit.publish.release_repos import ReleaseRepos
    from hubkit.publish.request import PushRequest
    from hubkit.runs import Run


@dataclass(frozen=True)
class GGUFDecision:
    """What one push does about the GGUF repo.

    Args:
        export: the newest adapter, whose merge this push writes as GGUF; None when it writes none.
        kept: what the GGUF repo holds and keeps (None when it holds nothing of this release, or this
            push replaces it).
        types: the asked types (``Q8_0``), empty when the push was not asked for GGUF files.
        note: why nothing is exported, when the user should know.
        lora: the adapters written as GGUF LoRAs with the export (``--gguf-lora``), oldest first.
    """

    export: PreparedAdapter | None
    kept: GGUFRecord | None
    types: tuple[str, ...] = ()
    note: str | None = None
    lora: tuple[PreparedAdapter, ...] = ()

    @property
    def writes_repo(self) -> bool:
        """Whether this push writes the GGUF repo (new files, or the card of the files it holds)."""
        return bool(self.types) and (self.export is not None or self.kept is not None)


def _holds(record: GGUFRecord, types: Sequence[str], remote: RemoteRepo, lora_steps: Sequence[int]) -> bool:
    """Whether the repo holds a file of every type in `types` (and, for `lora_steps`, the base's file of
    each type and each step's GGUF LoRA), each still the one the record names."""
    wanted = [record.file_of(t) for t in types]
    if lora_steps:
        wanted += [record.base.get(t) for t in types] + [record.lora.get(step) for step in lora_steps]
    for file in wanted:
        found = remote.files.get(file.name) if file is not None else None
        if file is None or found is None or found.lfs_sha256 != file.sha256:
            return False
    return True


def decide_gguf(
    request: PushRequest,
    merging: MergeDecision,
    adapters: Sequence[PreparedAdapter],
    gguf_remote: RemoteRepo | None,
) -> GGUFDecision:
    """The GGUF decision of a push, after its merge decision.

    GGUF files are written when asked for (`types`) and the merged model is current: this push merges the
    newest adapter, or the merged repo already holds that merge. They are not written again when the
    merged repo keeps its merge and the GGUF repo's record says it holds that very merge in every asked
    type. (A push that merges again writes them again; a merge and an export of the same inputs give the
    same bytes, so nothing is uploaded when nothing changed.) With ``--gguf-lora`` each of `adapters`
    (oldest first) is also written as a GGUF LoRA over the base's GGUF files.
    """
    types, newest = request.gguf, adapters[-1]
    lora_adapters = tuple(adapters) if request.gguf_lora else ()
    published = (
        GGUFRecord.from_card_data(gguf_remote.card_data) if gguf_remote and gguf_remote.exists else None
    )
    if published is not None and published.merge.adapter_repo != merging.adapter_repo:
        published = None  # the GGUF repo of another release
    if not types:
        return GGUFDecision(None, kept=published)
    if merging.adapter is None and not merging.card_only:
        return GGUFDecision(None, kept=published, types=types)
    held = merging.kept if merging.card_only else None
    if (
        held is not None
        and published is not None
        and gguf_remote is not None
        and held.is_merge_of(published.merge)
        and _holds(published, types, gguf_remote, [a.step for a in lora_adapters])
    ):
        kept_types = ", ".join(types)
        note = f"{gguf_remote.repo_id} already holds step {newest.step} as {kept_types}: not exported again"
        return GGUFDecision(None, kept=published, types=types, note=note)
    return GGUFDecision(newest, kept=None, types=types, lora=lora_adapters)


def gguf_record(merge: MergeRecord, export: GGUFExport, lora: LoraExport | None = None) -> GGUFRecord:
    """The record of the files an export wrote from `merge` (and the GGUF LoRAs beside them)."""

    def record(file: GGUFFile, folder: str | None = None) -> GGUFFileRecord:
        return GGUFFileRecord(
            f"{folder}/{file.path.name}" if folder else file.path.name, file.size, file.sha256
        )

    if lora is None:
        return GGUFRecord(merge=merge, files={f.file_type: record(f) for f in export.files})
    return GGUFRecord(
        merge=merge,
        files={f.file_type: record(f) for f in export.files},
        base={f.file_type: record(f, gguf_types.BASE_FOLDER) for f in lora.base.files},
        lora={step: record(f, gguf_types.LORA_FOLDER) for step, f in lora.steps.items()},
    )


def plan_gguf_files(
    files: Sequence[GGUFFile], vetter: Vetter, hashes: FileHashCache, step: int, folder: str | None = None
) -> tuple[PlannedFile, ...]:
    """The exported files (in `folder` of the repo, or at its root), each vetted as a GGUF file (its
    header's strings scanned), hashed as written.

    Raises:
        UnsafeFileError: a file whose metadata holds a secret or a local path.
    """
    planned = []
    for file in files:
        # The writer hashed each file as it wrote it: the upload's plan need not read 8 GB again.
        hashes.remember(FileVersion.of(file.path), FileHashes(file.size, file.sha256))
        path_in_repo = f"{folder}/{file.path.name}" if folder else file.path.name
        label = f"the GGUF file {path_in_repo}"
        vetted = vetter.file(file.path, kinds.GGUF_WEIGHTS, path_in_repo=path_in_repo, label=label)
        planned.append(PlannedFile.from_vetted(vetted, hashes, step=step))
    return tuple(planned)


@dataclass(frozen=True)
class LoraExport:
    """The base model's GGUF files and each step's GGUF LoRA over them (``--gguf-lora``)."""

    base: GGUFExport
    steps: dict[int, GGUFFile]


def plan_gguf_repo(
    run: Run,
    repo_id: str,
    files: Sequence[PlannedFile],
    card: Sequence[PlannedFile],
    *,
    private: bool,
) -> RepoPlan:
    """The GGUF repo's desired files: this push's GGUF files (none when it keeps the ones there) and
    the card. Files of other types already there are left as they are: a push never deletes."""
    return RepoPlan(
        repo_id=repo_id,
        files=tuple(sorted((*files, *card), key=lambda f: f.path_in_repo)),
        private=private,
        title=f"hubkit push {run.manifest.run_id} (GGUF)",
    )


def require_gguf_py() -> None:
    """Refuse in one line when llama.cpp's gguf-py, which writes the files, is not installed.

    Raises:
        GGUFExportError: naming the extra that installs it.
    """
    if importlib.util.find_spec("gguf") is None:
        raise GGUFExportError("writing GGUF files needs llama.cpp's gguf-py: pip install 'hubkit[gguf]'")


class SessionExports:
    """The GGUF files one push session wrote, by step and types (a watch exports once per merge).

    Args:
        staging: the session's staging folder (the files live there until the session ends).
    """

    def __init__(self, staging: Path) -> None:
        self.staging = staging
        self._written: dict[tuple[int, tuple[str, ...]], GGUFExport] = {}
        self._base_dir: Path | None = None  # the base model's folder, for --gguf-lora
        self._bases: dict[tuple[str, ...], GGUFExport] = {}
        self._loras: dict[int, GGUFFile] = {}

    def check(
        self, decision: GGUFDecision, model_dir: Path, repos: ReleaseRepos, base: BaseModelCard
    ) -> None:
        """Every check of the export (architecture, tokenizer, tensor names), from the base model's folder
        (the merged model has its architecture and tensors) or a merged one, before any repo is created.

        Raises:
            GGUFExportError: the model cannot be written as llama.cpp reads it.
        """
        require_gguf_py()
        # Imported here: hubkit.export brings torch, numpy and gguf-py (1.9 s), which only --gguf needs.
        from hubkit.export import plan_gguf_export

        plan_gguf_export(model_dir, self.staging / "gguf-check", decision.types, _metadata(repos, base))
        if decision.lora:
            # The first export of a session is planned from the base's folder (the merge is still to be
            # made); later ones of a watch reuse the base's files written then.
            if decision.types not in self._bases:
                self._base_dir = self._base_dir or model_dir
                plan_gguf_export(
                    self._base_dir, self.staging / "gguf-check", decision.types, _base_metadata(base)
                )
            for adapter in decision.lora:
                self._lora_plan(adapter, repos, base)

    def _lora_plan(self, adapter: PreparedAdapter, repos: ReleaseRepos, base: BaseModelCard) -> GGUFLoraPlan:
        from hubkit.export.gguf_lora import LORA_TYPE, plan_gguf_lora
        from hubkit.formats.model_config import CONFIG, read_model_config

        assert self._base_dir is not None
        name = f"{repos.adapter.split('/')[1]}-step-{adapter.step}"
        path = self.staging / "gguf-lora" / f"{name}-{LORA_TYPE}.gguf"
        metadata = replace(_base_metadata(base), name=name)
        config = read_model_config(self._base_dir / CONFIG).values
        return plan_gguf_lora(adapter.dir, config, path, metadata, f"step {adapter.step}")

    def _write_lora(self, decision: GGUFDecision, repos: ReleaseRepos, base: BaseModelCard) -> LoraExport:
        from hubkit.export import export_gguf
        from hubkit.export.gguf_lora import write_gguf_lora

        if decision.types not in self._bases:
            assert self._base_dir is not None
            out_dir = self.staging / "gguf-base"
            self._bases[decision.types] = export_gguf(
                self._base_dir, out_dir, decision.types, _base_metadata(base)
            )
        for adapter in decision.lora:
            if adapter.step not in self._loras:
                self._loras[adapter.step] = write_gguf_lora(self._lora_plan(adapter, repos, base))
        return LoraExport(self._bases[decision.types], {a.step: self._loras[a.step] for a in decision.lora})

    def publish(
        self,
        decision: GGUFDecision,
        merged: MergeResult | None,
        merge: MergeRecord | None,
        *,
        repos: ReleaseRepos,
        base: BaseModelCard,
        run_files: RunFiles,
        vetter: Vetter,
        hashes: FileHashCache,
        progress: ProgressCallback | None,
    ) -> tuple[tuple[PlannedFile, ...], GGUFRecord | None]:
        """The GGUF files of `merged`, the newest merge (written now, or earlier in the session), planned
        for the GGUF repo, with the repo's record after this push; no files and the kept record when nothing
        is exported. The files are named for the adapter repo, their base is the merged repo, the run's
        tokenizer goes into them; `progress` gets (input bytes done, total) while writing.

        Raises:
            GGUFExportError: as `hubkit.export.gguf.write_gguf`.
            UnsafeFileError: a written file whose metadata must not be published.
        """
        if decision.export is None or merged is None or merge is None:
            return (), decision.kept
        from hubkit.export import export_gguf  # see `check`: only --gguf pays for it

        step = decision.export.step
        key = (step, decision.types)
        if key not in self._written:
            use_release_tokenizer(merged.out_dir, run_files)
            out_dir = self.staging / f"gguf-step-{step}"
            self._written[key] = export_gguf(
                merged.out_dir, out_dir, decision.types, _metadata(repos, base), progress=progress
            )
        export = self._written[key]
        planned = plan_gguf_files(export.files, vetter, hashes, step)
        if not decision.lora:
            return planned, gguf_record(merge, export)
        lora = self._write_lora(decision, repos, base)
        planned += plan_gguf_files(lora.base.files, vetter, hashes, step, gguf_types.BASE_FOLDER)
        for lora_step, file in lora.steps.items():
            planned += plan_gguf_files([file], vetter, hashes, lora_step, gguf_types.LORA_FOLDER)
        return planned, gguf_record(merge, export, lora)


def _metadata(repos: ReleaseRepos, base: BaseModelCard) -> GGUFMetadata:
    from hubkit.export import GGUFMetadata  # see `SessionExports.check`

    return GGUFMetadata(name=repos.adapter.split("/")[1], base_model=repos.merged, license=base.license)


def _base_metadata(base: BaseModelCard) -> GGUFMetadata:
    """The base model's GGUF files (and the GGUF LoRAs over them) name the base model, as its own repo."""
    from hubkit.export import GGUFMetadata  # see `SessionExports.check`

    return GGUFMetadata(name=base.repo_id.split("/")[1], base_model=base.repo_id, license=base.license)
