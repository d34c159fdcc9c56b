"""The tokenizer files a run saves beside its adapter, each read in its own format and written back from
what was read.

    tokenizer.json          `tokenizers`' format: loaded by `tokenizers` and written back by it, so every
                            field it does not know is gone (a Qwen tokenizer comes back byte for byte)
    vocab.json              token → id, ids distinct (a BPE vocabulary)
    merges.txt              an optional ``#version: ...`` line, then one merge per line: two tokens, one space
    added_tokens.json       token → id
    tokenizer_config.json   JSON objects (tokenizer_config's chat_template a string or a list of
    special_tokens_map.json   {"name", "template"})
    chat_template.json      {"chat_template": ...}
    chat_template.jinja     a Jinja template: parsed as transformers parses it, never rendered
    generation_config.json  a JSON object
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from hubkit.errors import FileFormatError
from hubkit.formats.json_file import decode_text, dump_json, parse_json, parse_json_object

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
ADDED_TOKENS = "added_tokens.json"
VOCAB_JSON = "vocab.json"
MERGES_TXT = "merges.txt"
CHAT_TEMPLATE_JINJA = "chat_template.jinja"
CHAT_TEMPLATE_JSON = "chat_template.json"
GENERATION_CONFIG = "generation_config.json"
_MERGES_VERSION_PREFIX = "#version:"


@dataclass(frozen=True)
class TokenizerJson:
    """A tokenizer.json as `tokenizers` writes it after loading it, and that text parsed."""

    data: bytes = field(repr=False)
    value: dict[str, Any] = field(repr=False)


def _load_tokenizer(data: bytes, name: str) -> Any:
    """The `tokenizers.Tokenizer` a tokenizer.json's bytes hold.

    Raises:
        FileFormatError: not UTF-8, or not a tokenizer `tokenizers` loads.
    """
    from tokenizers import Tokenizer  # imported when a tokenizer is vetted (a push of known files vets none)

    text = decode_text(data, name)
    try:
        return Tokenizer.from_str(text)
    # `tokenizers` raises a bare Exception for every defect (serde's message in it): nothing narrower exists.
    except Exception as e:
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise FileFormatError(f"{name}: not a tokenizer the `tokenizers` library loads ({reason})") from e


def read_tokenizer_json(data: bytes, name: str) -> TokenizerJson:
    """Load a tokenizer.json with `tokenizers` and write it back (pretty, as `tokenizers` saves it).

    Raises:
        FileFormatError: as `_load_tokenizer`.
    """
    written = _load_tokenizer(data, name).to_str(pretty=True).encode("utf-8")
    return TokenizerJson(data=written, value=parse_json(written, name))


def token_count(data: bytes, name: str) -> int:
    """How many tokens a tokenizer.json holds, added tokens included (what ``len(tokenizer)`` gives).

    Raises:
        FileFormatError: as `_load_tokenizer`.
    """
    return _load_tokenizer(data, name).get_vocab_size(with_added_tokens=True)


def parse_vocab(data: bytes, name: str) -> dict[str, int]:
    """A vocab.json (or an added_tokens.json): token → id.

    Raises:
        FileFormatError: not a JSON object of distinct non-negative integer ids.
    """
    value = parse_json_object(data, name)
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in value.values()):
        raise FileFormatError(f"{name}: the id of a token is not a non-negative integer")
    if len(set(value.values())) != len(value):
        raise FileFormatError(f"{name}: several tokens share one id")
    return value


parse_added_tokens = parse_vocab


def vocab_bytes(vocab: dict[str, int], name: str) -> bytes:
    """A vocabulary written as vocab.json (compact, in the parsed order)."""
    return dump_json(vocab, name, trailing_newline=False, compact=True)


@dataclass(frozen=True)
class Merges:
    """A merges.txt: its ``#version`` line (None without one) and its merges, in order."""

    version: str | None
    pairs: tuple[tuple[str, str], ...]


def parse_merges(data: bytes, name: str) -> Merges:
    """A merges.txt (lines may end with CRLF, as some tokenizers save them).

    Raises:
        FileFormatError: not UTF-8, or a line that is not two tokens separated by one space.
    """
    lines = decode_text(data, name).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    version = None
    if lines and lines[0].startswith(_MERGES_VERSION_PREFIX):
        version = lines[0].removesuffix("\r")[len(_MERGES_VERSION_PREFIX) :].strip()
    pairs = []
    for number, line in enumerate(lines[1:] if version is not None else lines, start=2 if version else 1):
        parts = line.removesuffix("\r").split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise FileFormatError(f"{name}: line {number} is not a merge (two tokens separated by one space)")
        pairs.append((parts[0], parts[1]))
    return Merges(version=version, pairs=tuple(pairs))


def merges_bytes(merges: Merges) -> bytes:
    """Merges written as merges.txt: the version line if any, one merge per line, LF line ends."""
    lines = [f"{_MERGES_VERSION_PREFIX} {merges.version}"] if merges.version is not None else []
    lines += [f"{a} {b}" for a, b in merges.pairs]
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _check_chat_template(config: dict[str, Any], name: str) -> None:
    template = config.get("chat_template")
    named = isinstance(template, list) and all(
        isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str)
        for t in template
    )
    if not (template is None or isinstance(template, str) or named):
        raise FileFormatError(f"{name}: chat_template is neither a template nor a list of named templates")
    for text in [template] if isinstance(template, str) else [t["template"] for t in template or []]:
        _parse_template(text, f"{name} chat_template")


def parse_tokenizer_config(data: bytes, name: str) -> dict[str, Any]:
    """A tokenizer_config.json.

    Raises:
        FileFormatError: not a JSON object, or a chat_template that is neither a template nor a list of
            named templates, or one that does not parse.
    """
    config = parse_json_object(data, name)
    _check_chat_template(config, name)
    return config


def parse_special_tokens_map(data: bytes, name: str) -> dict[str, Any]:
    """A special_tokens_map.json: names → a token, a token's settings, or a list of them.

    Raises:
        FileFormatError: not a JSON object of strings, objects or lists.
    """
    value = parse_json_object(data, name)
    if not all(isinstance(v, str | dict | list) for v in value.values()):
        raise FileFormatError(f"{name}: a special token is neither a string, an object nor a list")
    return value


def parse_chat_template_json(data: bytes, name: str) -> dict[str, Any]:
    """A chat_template.json: ``{"chat_template": template or list of named templates}``.

    Raises:
        FileFormatError: no chat_template, or one that does not parse.
    """
    value = parse_json_object(data, name)
    if "chat_template" not in value:
        raise FileFormatError(f"{name}: no chat_template")
    _check_chat_template(value, name)
    return value


parse_generation_config = parse_json_object  # a generation_config.json: any JSON object


class _GenerationTag(jinja2.ext.Extension):
    """transformers' ``{% generation %}...{% endgeneration %}`` (assistant-token tracking), parsed only."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 reads the class attribute)

    def parse(self, parser: jinja2.parser.Parser) -> list[jinja2.nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


# As transformers compiles chat templates (utils/chat_template_utils.py), so a template it accepts parses.
_JINJA = ImmutableSandboxedEnvironment(
    trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols]
)


def _parse_template(text: str, name: str) -> None:
    try:
        _JINJA.parse(text)
    except jinja2.TemplateSyntaxError as e:
        raise FileFormatError(f"{name}: not a Jinja template (line {e.lineno}: {e.message})") from e


def parse_chat_template(data: bytes, name: str) -> str:
    """A chat_template.jinja: its text, checked to parse as a Jinja template (it is never rendered).

    Raises:
        FileFormatError: not UTF-8, or not a template.
    """
    text = decode_text(data, name)
    _parse_template(text, name)
    return text
