"""The bytes a push adds to the Hub's storage, known before the first byte is sent.

The Hub stores a file through LFS (Xet) when it is big (10 MiB), binary (a NUL in its first 512 bytes, the
sample the client sends), or named by the repo's ``.gitattributes`` (huggingface.co's default patterns:
``*.safetensors``, ``*.gguf``, ``*tfevents*``, ...); each LFS object is stored once per repo, named by its
sha256. What a push adds is the objects of its plan (main and every checkpoint branch) whose sha256 the repo
does not hold yet, counted once each: a step branch's adapter is the same object as main's folder, and the
root adapter the newest checkpoint's. Regular files (configs, cards) travel inside the commit and are not
counted.

`new_objects` is that figure for one repo, against the remote as read (a push) or as last recorded (a dry
run); `hubkit.publish.describe.describe_storage` is the line both print before anything is uploaded.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from hubkit.hub.remote import RemoteRepo
from hubkit.publish.plan import PlannedFile, PushPlan, RepoPlan

# The Hub's threshold, whatever the file's name, and the client's sample of a file's start.
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
_SAMPLE_BYTES = 512
# huggingface.co's .gitattributes for a new repo (hubkit never commits its own), and GGUF files (binary).
_LFS_PATTERNS = (  # noqa: SIM905 (35 patterns: a line each would fill a page)
    "*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gz *.h5 *.joblib *.lfs.* *.mlmodel *.model *.msgpack *.npy "
    "*.npz *.onnx *.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar *.safetensors *.tar.* *.tar *.tflite "
    "*.tgz *.wasm *.xz *.zip *.zst *tfevents* *.gguf"
).split()


def is_lfs(planned: PlannedFile) -> bool:
    """Whether the Hub stores `planned` as an LFS object (its rule, as `preupload` answers it)."""
    if planned.size == 0:
        return False
    if planned.size >= LFS_SIZE_THRESHOLD:
        return True
    name = planned.path_in_repo.rsplit("/", 1)[-1]
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in _LFS_PATTERNS):
        return True
    if planned.content is not None:
        sample = planned.content[:_SAMPLE_BYTES]
    else:
        with planned.local_path.open("rb") as f:  # type: ignore[union-attr]
            sample = f.read(_SAMPLE_BYTES)
    return b"\x00" in sample


def held_objects(remotes: Iterable[RemoteRepo]) -> set[str]:
    """The sha256 of every LFS object the repo's branches (as read, or as recorded) hold."""
    return {f.lfs_sha256 for remote in remotes for f in remote.files.values() if f.lfs_sha256 is not None}


def new_objects(plans: Iterable[RepoPlan], held: set[str]) -> dict[str, int]:
    """The LFS objects (sha256 to size) of `plans` (one repo's main and branches) that `held` lacks."""
    new: dict[str, int] = {}
    for plan in plans:
        for planned in plan.files:
            sha256 = planned.hashes.sha256
            if sha256 not in held and sha256 not in new and is_lfs(planned):
                new[sha256] = planned.size
    return new


def storage_by_repo(plan: PushPlan, held: dict[str, set[str]]) -> dict[str, int]:
    """The bytes each repo of `plan` gets that the Hub does not hold yet, by repo id (`held`: each repo's
    objects, as `held_objects` reads them)."""
    by_repo: dict[str, list[RepoPlan]] = {}
    for repo in (*plan.repos, *plan.branches):
        by_repo.setdefault(repo.repo_id, []).append(repo)
    return {
        repo_id: sum(new_objects(plans, held.get(repo_id, set())).values())
        for repo_id, plans in by_repo.items()
    }
