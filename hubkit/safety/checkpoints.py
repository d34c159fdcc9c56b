"""Which checkpoint folders a push may publish from: inside the run, or where the user said, one per step.

A run's ``checkpoints_dir`` is relative to the run directory (the manifest refuses anything else), but
the folder it names, or a ``checkpoint-N`` in it, may be a symlink to another run's: publishing it
would publish that run's adapters under this run's name. A checkpoints tree outside the run directory
is used only when the user named that place themselves (``hubkit push --checkpoints-dir``, for a run
whose checkpoints live on a scratch disk it links to); the dry run says where it points. The run is
read through its ``checkpoints_dir``, so the folder named must be the one it leads to. Two folders for
the same step (``checkpoint-10`` and ``checkpoint-0010``) are refused: which one the user meant cannot
be told.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from hubkit.errors import AmbiguousCheckpointError, ForeignCheckpointsError


@dataclass(frozen=True)
class CheckpointsTree:
    """Where a run's checkpoints really are.

    Attributes:
        path: the folder, resolved.
        outside_run: it lies outside the run directory (the user named it).
        named_as: the checkpoints_dir it was reached by.
    """

    path: Path
    outside_run: bool
    named_as: str

    def describe(self) -> str:
        """One line for the dry run: where the checkpoints are read from."""
        if not self.outside_run:
            inside = "" if self.named_as in ("", ".") else f" {self.named_as.rstrip('/')}/ in"
            return f"checkpoints from{inside} the run directory"
        return f"checkpoints from {self.path} (outside the run directory, as named on the command line)"


def checkpoints_tree(run_dir: Path, checkpoints_dir: str, named: Path | None = None) -> CheckpointsTree:
    """The checkpoints tree a push may read, refused when it leads outside the run unasked.

    Args:
        checkpoints_dir: the manifest's ``checkpoints_dir`` (relative to the run directory).
        named: the checkpoints folder the user named on the command line, if any: it may lie anywhere,
            but must be the folder `checkpoints_dir` leads to.

    Raises:
        ForeignCheckpointsError: the folder resolves outside the run directory (through a symlink) and
            the user did not name that place, or the user named another folder than it leads to.
    """
    real_run = run_dir.resolve()
    real = (run_dir / checkpoints_dir).resolve()
    if named is not None:
        if named.resolve() != real:
            raise ForeignCheckpointsError(
                f"refusing to publish from {named.name}/: it is not the folder {checkpoints_dir}/ of run "
                f"{run_dir.name} leads to, which is where the run's checkpoints are read from; name that one"
            )
        return CheckpointsTree(path=real, outside_run=not real.is_relative_to(real_run), named_as=str(named))
    if real.is_relative_to(real_run):
        return CheckpointsTree(path=real, outside_run=False, named_as=checkpoints_dir)
    raise ForeignCheckpointsError(
        f"refusing to publish from {checkpoints_dir}/ of run {run_dir.name}: it is a symlink to a folder outside "
        "the run directory (another run's checkpoints?); name that folder on the command line to publish from it"
    )


def check_checkpoint_folder(tree: CheckpointsTree, folder: Path) -> None:
    """Refuse a checkpoint folder found in `tree` (``checkpoint-20``) that is a symlink leading out of it.

    Raises:
        ForeignCheckpointsError: the folder resolves outside the tree.
    """
    if not folder.resolve().is_relative_to(tree.path):
        raise ForeignCheckpointsError(
            f"refusing to publish {folder.name}: it is a symlink to a folder outside the run's checkpoints "
            "(another run's?); copy the checkpoint into the run, or name its folder on the command line"
        )


def refuse_duplicate_steps(folders: Iterable[tuple[int, Path]]) -> None:
    """Refuse two checkpoint folders of the same step, before anything is published or created.

    `folders`: (step, folder) of every checkpoint folder of the run, complete or not (what the run reader
    found: ``Run.checkpoints + Run.pending``).

    Raises:
        AmbiguousCheckpointError: naming the step and both folders.
    """
    seen: dict[int, Path] = {}
    for step, folder in sorted(folders, key=lambda item: (item[0], item[1].name)):
        if step in seen:
            raise AmbiguousCheckpointError(
                f"refusing to publish step {step}: both {seen[step].name} and {folder.name} claim it; keep one "
                "of them (move the other out of the run) and push again"
            )
        seen[step] = folder
