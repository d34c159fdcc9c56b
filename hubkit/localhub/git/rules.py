"""What git itself refuses in a tree, so that every repository stays `git fsck --strict` clean and clonable
with `transfer.fsckObjects` on, on Linux, macOS and Windows.

Ported from git's own checks (`fsck.c` fsck_tree and fsck_blob, `read-cache.c` verify_path, `path.c`
is_ntfs_dotgit and is_ntfs_dot_generic, `utf8.c` is_hfs_dot_generic, `attr.h`):

- a path component that names `.git` on some file system: in any case (`.GIT`), with the trailing dots
  and spaces or the alternate data stream NTFS drops (`.git.`, `.git `, `.git::$INDEX_ALLOCATION`), its
  8.3 short name (`git~1`), or with the code points HFS+ ignores (`.g\\u200cit`, `\\u200c.git`);
- a `.gitmodules` or `.gitattributes` (spelled in any of those ways) that is a folder, not a file;
- a `.gitattributes` of 100 MiB or more, or with a line of 2048 bytes or more;
- a `.gitmodules` with a dangerous entry (`modules.py`).
"""

from __future__ import annotations

from hubkit.localhub.git.modules import check_gitmodules
from hubkit.localhub.storage.exceptions import InvalidInputError

# Code points HFS+ ignores in file names (utf8.c next_hfs_char): `.g\u200cit` is `.git` there.
HFS_IGNORED = frozenset(
    {0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D}
    | {0x202E, 0x206A, 0x206B, 0x206C, 0x206D, 0x206E, 0x206F, 0xFEFF}
)
# attr.h: git refuses to parse a .gitattributes this large, or with a line this long (fsck errors).
ATTR_MAX_FILE_SIZE = 100 * 1024 * 1024
ATTR_MAX_LINE_LENGTH = 2048


def _is_hfs_dot(name: str, needle: str) -> bool:
    """utf8.c is_hfs_dot_generic: `name` is "." + `needle` (ASCII case ignored) once ignorable code points go."""
    chars = [c for c in name if ord(c) not in HFS_IGNORED]
    if not chars or chars[0] != "." or len(chars) != len(needle) + 1:
        return False
    return all(ord(c) < 128 and c.lower() == n for c, n in zip(chars[1:], needle, strict=True))


def _is_ntfs_dotgit(name: bytes) -> bool:
    """path.c is_ntfs_dotgit: `.git` or `git~1`, then only dots and spaces up to the end, a separator or ':'."""
    if name[:1] == b".":
        if name[1:4].lower() != b"git":
            return False
        rest = name[4:]
    elif name[:3].lower() == b"git" and name[3:5] == b"~1":
        rest = name[5:]
    else:
        return False
    for c in rest:
        if c in b"/\\:":
            return True
        if c not in b". ":
            return False
    return True


def _only_spaces_and_periods(name: bytes, i: int) -> bool:
    for c in name[i:]:
        if c == ord(":"):
            return True
        if c not in b" .":
            return False
    return True


def _is_ntfs_dot_generic(name: bytes, dotgit_name: bytes, shortname_prefix: bytes) -> bool:
    """path.c is_ntfs_dot_generic: `.gitmodules` etc. as NTFS may spell it, 8.3 short names included."""
    length = len(dotgit_name)
    if name[:1] == b"." and name[1 : 1 + length].lower() == dotgit_name:
        return _only_spaces_and_periods(name, length + 1)
    # A regular short name: the first 6 characters, then ~1 to ~4.
    if name[:6].lower() == dotgit_name[:6] and name[6:7] == b"~" and name[7:8] in (b"1", b"2", b"3", b"4"):
        return _only_spaces_and_periods(name, 8)
    # A fall-back short name, from a hash of the long one: `gi7eba~1` for .gitmodules.
    padded = name + b"\0" * 10  # the C code reads up to the string's NUL
    i, saw_tilde = 0, False
    while i < 8:
        c = padded[i]
        if c == 0:
            return False
        if saw_tilde:
            if not ord("0") <= c <= ord("9"):
                return False
        elif c == ord("~"):
            i += 1
            if not ord("1") <= padded[i] <= ord("9"):
                return False
            saw_tilde = True
        elif i >= 6 or c & 0x80 or chr(c).lower() != chr(shortname_prefix[i]):
            return False
        i += 1
    return _only_spaces_and_periods(name, i)


def is_dotgit(name: str) -> bool:
    """Whether git refuses `name` as a path component because some file system reads it as `.git`."""
    raw = name.encode()
    # fsck also reads a backslash as a separator (Windows): each piece after one is checked too.
    return _is_hfs_dot(name, "git") or any(_is_ntfs_dotgit(piece) for piece in raw.split(b"\\"))


def is_gitmodules(name: str) -> bool:
    """Whether git reads a file of this name as `.gitmodules` on some file system."""
    return _is_hfs_dot(name, "gitmodules") or _is_ntfs_dot_generic(name.encode(), b"gitmodules", b"gi7eba")


def is_gitattributes(name: str) -> bool:
    """Whether git reads a file of this name as `.gitattributes` on some file system."""
    return _is_hfs_dot(name, "gitattributes") or _is_ntfs_dot_generic(
        name.encode(), b"gitattributes", b"gi7d29"
    )


def check_component(name: str, is_folder: bool, shown_path: str) -> None:
    """Refuse a path component git refuses. Raises InvalidInputError naming the path (`shown_path`)."""
    if is_dotgit(name):
        raise InvalidInputError(
            f"Invalid path in repo {shown_path}: {name!r} is read as '.git' by git (in some spelling, or on "
            "some file system), which refuses it."
        )
    if is_folder and (is_gitmodules(name) or is_gitattributes(name)):
        raise InvalidInputError(
            f"Invalid path in repo {shown_path}: git needs {name!r} to be a file, not a folder."
        )


def check_special_file(path: str, data: bytes) -> None:
    """Refuse a `.gitmodules` or `.gitattributes` whose content git refuses. Raises InvalidInputError."""
    name = path.rsplit("/", 1)[-1]
    if is_gitmodules(name):
        check_gitmodules(path, data)
    elif is_gitattributes(name):
        if len(data) > ATTR_MAX_FILE_SIZE:
            raise InvalidInputError(f"{path} is too large for git to read (over {ATTR_MAX_FILE_SIZE} bytes).")
        # fsck reads up to the first NUL, and splits lines on \n only.
        longest = max(len(line) for line in data.split(b"\0", 1)[0].split(b"\n"))
        if longest >= ATTR_MAX_LINE_LENGTH:
            raise InvalidInputError(
                f"{path} has a line of {longest} bytes: git reads lines of {ATTR_MAX_LINE_LENGTH - 1} at most."
            )
