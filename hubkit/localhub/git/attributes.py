"""Which files the Hub stores through LFS: the rule `preupload` answers with."""

from __future__ import annotations

import fnmatch

# What huggingface.co puts in every new repository's first commit.
DEFAULT_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in (  # noqa: SIM905 (35 patterns: a line each would fill a page)
        "*.7z *.arrow *.bin *.bz2 *.ckpt *.ftz *.gz *.h5 *.joblib *.lfs.* *.mlmodel *.model *.msgpack *.npy "
        "*.npz *.onnx *.ot *.parquet *.pb *.pickle *.pkl *.pt *.pth *.rar *.safetensors saved_model/**/* "
        "*.tar.* *.tar *.tflite *.tgz *.wasm *.xz *.zip *.zst *tfevents*"
    ).split()
)

# The Hub's threshold: anything this big goes to LFS whatever its name.
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024


def lfs_patterns(gitattributes: str) -> list[str]:
    """The path patterns that a .gitattributes text marks `filter=lfs`."""
    lines = (line.split() for line in gitattributes.splitlines())
    return [f[0] for f in lines if f and not f[0].startswith("#") and "filter=lfs" in f[1:]]


def matches_any(path: str, patterns: list[str]) -> bool:
    """git's rule, approximated with fnmatch: a pattern without "/" matches the file name at any depth."""
    name = path.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(path, p.lstrip("/")) if "/" in p.rstrip("/") else fnmatch.fnmatchcase(name, p)
        for p in patterns
    )


def is_lfs_upload(path: str, size: int, sample: bytes, patterns: list[str]) -> bool:
    """True when the Hub would store this file through LFS: big, binary, or named by .gitattributes."""
    if size == 0:
        return False
    return size >= LFS_SIZE_THRESHOLD or b"\x00" in sample or matches_any(path, patterns)
