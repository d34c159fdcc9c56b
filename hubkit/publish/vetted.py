"""Vetting for one push session: every file a push plans is vetted here (or, for adapters, while they
are prepared) before it becomes a `PlannedFile`.

    vetter = Vetter(VetContext.for_run(run.run_dir, run.manifest.base_model, token))
    vetted = vetter.file(tokenizer_dir / "tokenizer.json", kinds.TOKENIZER)
    card = vetter.generated({"README.md": readme}, "model", hashes)   # planned files

A session pushes the same run again and again (`push --watch`, the TRL callback at every save): a file
it has vetted is not read again while its version (device, inode, size, mtime) is the same, whatever
path reaches it (a prepared adapter's weights are a hard link to the saved file). Across sessions
(each `hubkit push` a new process), bytes that passed vetting in the same context are known by their
content (`hubkit.safety.KnownVerdicts`, in the run's ``.hubkit/vetted/``): read and hashed, not vetted
again. Vetting the real Qwen3 tokenizer costs about half a second of CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from hubkit.errors import PublishError
from hubkit.hub.hashing import FileHashCache, FileVersion
from hubkit.hub.repo_types import RepoType
from hubkit.publish.plan import PlannedFile
from hubkit.safety import Kind, KnownVerdicts, VetContext, VettedFile, kind_of, vet_bytes, vet_file


class Vetter:
    """Vets files for one `VetContext`, each version of a file read once.

    Args:
        context: the push's context (its base model's Hub id, run directory, caches, token).
    """

    def __init__(self, context: VetContext) -> None:
        self.context = context
        self._known = KnownVerdicts.in_run(context.run_dir, context.key())
        self._files: dict[tuple[FileVersion, Kind, str | None], VettedFile] = {}

    def file(
        self, path: Path, kind: Kind, *, path_in_repo: str | None = None, label: str | None = None
    ) -> VettedFile:
        """`hubkit.safety.vet_file` of `path` as `kind`, unless this version of it was vetted already;
        `path_in_repo` defaults to its name, `label` (how a refusal names it) to its path in the run
        directory, else its name.

        Raises:
            UnsafeFileError: as `vet_file` (a secret, a local path, a bad link, too large, not of its kind).
        """
        try:
            key = (FileVersion.of(path), kind, path_in_repo)
        except OSError:  # dangling or unreadable: vet_file says which, in its one line
            return vet_file(path, kind, self.context, path_in_repo=path_in_repo, label=label)
        vetted = self._files.get(key)
        if vetted is None:
            vetted = vet_file(
                path, kind, self.context, path_in_repo=path_in_repo, label=label, known=self._known
            )
            self._files[key] = vetted
        return vetted

    def generated(
        self,
        files: Mapping[str, bytes],
        repo_type: RepoType,
        hashes: FileHashCache,
        *,
        step: int | None = None,
    ) -> tuple[PlannedFile, ...]:
        """Files a push writes itself (cards, their images, the Space), each vetted as the kind its place
        in the repo holds, sorted by path.

        Raises:
            PublishError: a path no known kind goes to.
            UnsafeFileError: as `hubkit.safety.vet_bytes`.
        """
        planned = []
        for path, content in sorted(files.items()):
            kind = kind_of(path, repo_type)
            if kind is None:
                raise PublishError(f"{path} is not a kind of file hubkit publishes to a {repo_type} repo")
            planned.append(
                PlannedFile.from_vetted(
                    vet_bytes(path, kind, content, self.context, known=self._known), hashes, step=step
                )
            )
        return tuple(planned)

    def data(self, path_in_repo: str, kind: Kind, content: bytes, *, label: str | None = None) -> VettedFile:
        """Content the push makes from the run (the manifest, the metrics), vetted as `kind`; a refusal
        names it by `label` (default: `path_in_repo`).

        Raises:
            UnsafeFileError: as `hubkit.safety.vet_bytes`.
        """
        return vet_bytes(path_in_repo, kind, content, self.context, label=label, known=self._known)
