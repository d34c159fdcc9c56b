"""The merged-model repo: one checkpoint's adapter merged into the base, planned like any other repo.

model-00001-of-00002.safetensors, ..., model.safetensors.index.json   (or model.safetensors)
config.json, generation_config.json, LICENSE                          (the base's)
tokenizer files, chat template                                        (the run's, else the base's)
README.md                                                             (the merged card)

What the merged repo takes from the base is vetted twice: as the base holds it, once the merge is
planned and before any repo is created (`vet_base_files`), and as the merge wrote it
(`plan_merged_repo`). A base file of no known kind (a SentencePiece ``tokenizer.model``, ``vocab.txt``)
is left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hubkit.hub.hashing import FileHashCache
from hubkit.publish.adapter_repo import RunFiles
from hubkit.publish.plan import PlannedFile, RepoPlan, check_repo_id
from hubkit.publish.vetted import Vetter
from hubkit.runs import Run
from hubkit.safety import Kind, kind_of, kinds
from hubkit.safety.kinds import TOKENIZER_KINDS

if TYPE_CHECKING:
    from hubkit.merge import MergePlan, MergeResult


def published_names(names: Sequence[str], run_files: RunFiles) -> tuple[list[tuple[str, Kind]], list[str]]:
    """Of a merged folder's (or the base's) file names, those the merged repo publishes (with their kind),
    and those of no known kind. Training may have changed the tokenizer or chat template: the run's own
    set replaces the base's whole (mixing the two could pair the base's chat_template.jinja with the
    run's tokenizer)."""
    published, unknown = [], []
    for name in names:
        kind = kind_of(name)
        if run_files.tokenizer and name in TOKENIZER_KINDS:
            continue
        if kind is None:
            unknown.append(name)
        else:
            published.append((name, kind))
    return published, unknown


def use_release_tokenizer(out_dir: Path, run_files: RunFiles) -> None:
    """Make a merged folder hold the tokenizer the merged repo publishes: the run's own set, vetted, in
    place of the base's whole (as `published_names` chooses); the base's stays when the run has none.

    The GGUF export reads the folder: a base file the run's set lacks (a ``chat_template.jinja`` beside the
    run's tokenizer_config.json) would otherwise end up in the files beside the run's tokenizer.
    """
    if not run_files.tokenizer:
        return
    for name in TOKENIZER_KINDS:
        (out_dir / name).unlink(missing_ok=True)  # the merge copied them: no link into the Hub cache
    for planned in run_files.tokenizer:
        (out_dir / planned.path_in_repo).write_bytes(planned.read_bytes())


def vet_base_files(plan: MergePlan, base_model: str, run_files: RunFiles, vetter: Vetter) -> tuple[str, ...]:
    """Vet what the merged repo will take from the base, as the base holds it: every refusal of the merged
    repo happens here, before any repo is created (the plan's shard headers, index and carried files; the
    run's tokenizer replaces the base's). Returns the report's notes: base files left out of the merged repo.

    Raises:
        UnsafeFileError: a base file that must not be published (`hubkit.safety.vet_file`).
    """
    for shard in plan.shards:
        vetter.file(shard.path, kinds.MODEL_WEIGHTS, label=f"{shard.path.name} of base model {base_model}")
    if plan.index is not None:
        vetter.data("model.safetensors.index.json", kinds.WEIGHTS_INDEX, json.dumps(plan.index).encode())
    carried = {path.name: path for path in plan.carried}
    published, unknown = published_names(sorted(carried), run_files)
    for name, kind in published:
        vetter.file(carried[name], kind, label=f"{name} of base model {base_model}")
    if not unknown:
        return ()
    return (
        f"Left out of the merged repo: {', '.join(unknown)} of base model {base_model} (no kind hubkit checks)",
    )


def plan_merged_repo(
    run: Run,
    repo_id: str,
    step: int,
    result: MergeResult,
    card: Sequence[PlannedFile],
    *,
    run_files: RunFiles,
    vetter: Vetter,
    hashes: FileHashCache,
    private: bool = False,
) -> RepoPlan:
    """The merged repo's desired files: the merged folder of `result` (`hubkit.merge.execute_plan`: it must
    live until the push ends), each file vetted as what it is, the run's tokenizer over the base's, the card
    (vetted by `Vetter.generated`). Nothing is read from or sent to the network.

    Raises:
        PublishError: an invalid repo id.
        UnsafeFileError: a file of the merged folder that must not be published.
    """
    check_repo_id(repo_id)
    names, _ = published_names(sorted(p.name for p in result.out_dir.iterdir() if p.is_file()), run_files)
    planned = [
        PlannedFile.from_vetted(
            vetter.file(result.out_dir / name, kind, label=f"the merged model's {name}"), hashes, step=step
        )
        for name, kind in names
    ]
    planned += [replace(f, step=step) for f in run_files.tokenizer]
    planned += [replace(f, step=step) for f in card]
    return RepoPlan(
        repo_id=repo_id,
        files=tuple(sorted(planned, key=lambda f: f.path_in_repo)),
        private=private,
        title=f"hubkit push {run.manifest.run_id} (merged)",  # the commit adds ": steps N"
    )
