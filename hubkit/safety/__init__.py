"""What a push may publish from a run directory, which is untrusted input: known kinds only, each read
through its format, checked, and written out from what was read.

    context = VetContext.for_run(run.run_dir, run.manifest.base_model, token)
    files, left_out = vet_checkpoint(checkpoint.path, context)
    card = vet_bytes("README.md", kinds.CARD, readme, context)

kinds.py      the known kinds, their size bounds, which files of a checkpoint folder are of one
vet.py        the entry points (`vet_file`, `vet_bytes`, `vet_checkpoint`) and their frozen results
validators.py one validator per kind (through `hubkit.formats`)
weights.py    safetensors headers: metadata cut to known keys, header written from what was read
scan.py       every decoded string checked; secrets.py and local_paths.py say what is found
verdicts.py   passing vettings remembered by content (a push of files vetted before vets none again)
links.py      symlinks followed only to regular files; checkpoints.py: checkpoint trees and steps
"""

from hubkit.safety import kinds
from hubkit.safety.checkpoints import (
    CheckpointsTree,
    check_checkpoint_folder,
    checkpoints_tree,
    refuse_duplicate_steps,
)
from hubkit.safety.kinds import Kind, LeftOut, kind_of
from hubkit.safety.verdicts import KnownVerdicts
from hubkit.safety.vet import VetContext, VettedFile, WeightsSource, vet_bytes, vet_checkpoint, vet_file

__all__ = [
    "CheckpointsTree",
    "Kind",
    "KnownVerdicts",
    "LeftOut",
    "VetContext",
    "VettedFile",
    "WeightsSource",
    "check_checkpoint_folder",
    "checkpoints_tree",
    "kind_of",
    "kinds",
    "refuse_duplicate_steps",
    "vet_bytes",
    "vet_checkpoint",
    "vet_file",
]
