"""Secrets in decoded strings: Hugging Face tokens, the token in use, provider API keys, private keys.

The strings scanned are decoded ones: JSON keys and values after parsing (a token written
``"hf\\u005f..."`` is found), safetensors metadata, card and template text. Raw bytes are never
scanned: escapes would hide what a reader of the file gets back.

What is found, and how (each kind in `_PATTERNS`, with the format the field's scanners give it):

- a Hugging Face token: ``hf_`` + at least 30 letters/digits (user tokens are ``hf_`` + 34), and an
  organization API token ``api_org_`` + at least 30, also glued to the word before;
- GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), GitLab (``glpat-`` and its
  other token kinds), Slack (``xoxb-`` and kin, app tokens, webhooks), Google (``AIza`` API keys, ``GOCSPX-``
  OAuth secrets), Stripe live keys, npm and PyPI tokens, Azure storage, SendGrid, Square, Twilio,
  Mailchimp, Telegram, Discord, Artifactory and SoftLayer keys, JSON Web Tokens, any ``Bearer``
  credential, and a password in a URL (``https://user:password@host``);
- the token in use, verbatim, only when it is at least 16 characters long: a short word (the local Hub
  accepts any token, ``HF_TOKEN=test``) occurs in every vocabulary;
- an AWS access key id: ``AKIA``/``ASIA`` (and the rarer prefixes) + 16 capitals/digits;
- an OpenAI key ``sk-...`` (also ``sk-proj-``) and an Anthropic key ``sk-ant-...``: at least 20 more
  characters, with a digit among them (``sk-learn-compatible-wrapper`` is prose);
- a private key block: ``-----BEGIN ... PRIVATE KEY-----`` (RSA, EC, OPENSSH, ENCRYPTED, PGP);
- a W&B API key, or any credential-shaped value, under a credential's name. A W&B key is 40 hex digits,
  exactly like a git commit id, a file's sha1 or a Hub revision, which eval results and configs hold
  under names like ``revision``: so 40 hex digits count as a key only as the value of a JSON key named
  like a credential (``WANDB_API_KEY``, ``api_key``, ``password``, ``secret``, ``access_token``, ...), or
  after such a name on one line of text (``WANDB_API_KEY=...``, ``.netrc``'s ``password ...``). Under
  such a name any value of 16 or more key characters with a letter and a digit counts (an AWS secret
  key under ``aws_secret_access_key``).

Why these patterns and not detect-secrets (1.5.0, from PyPI), measured on the real Qwen3 tokenizer.json
(11.4 MB, 454,676 strings once parsed) on two cores shared with other work: importing it takes 0.07 s,
but its scan of the file takes 64 s, and running its plugins on the decoded strings ~84 s (3.7 s per
20,000 strings, which its entropy plugins flag 21,307 times: in its ad-hoc mode every word looks like a
secret); it scans a file's raw lines, so a JSON-escaped token is not decoded; and it has no detector for
Hugging Face, Anthropic or W&B keys (they were found only by its generic high-entropy plugins, an
``sk-proj-`` key too). The patterns here run as one regular expression over the decoded strings joined:
0.13 s for the same tokenizer, which they pass clean (0.4 s since the formats without a literal prefix,
Telegram's and Mailchimp's, joined).

detect-secrets' detectors are the list these formats are measured against (tests/safety/test_secret_formats.py):
every token its format detectors flag, generated from their own patterns, is found here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The token in use is looked for only from this length on (a real Hub token has 37 characters).
MIN_TOKEN_IN_USE = 16

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ANYWHERE: frozenset[str] = frozenset()
# (pattern, what it finds, characters it must not follow). Each pattern starts with a literal, which
# `re` finds fast; what comes before is checked by hand (a look-behind would be tried at every position).
# Formats as the field's secret scanners define them (gitleaks' rules, GitHub's and GitLab's token
# documentation). A distinctive prefix is found even glued to the word before it ("tokenhf_..."); a short
# one (AKIA, sk-) only at the start of a word, since words end in "sk-" ("task-") more often than keys do.
_FORMATS: tuple[tuple[str, str, frozenset[str]], ...] = (
    (r"hf_[A-Za-z0-9]{30,}", "a Hugging Face token", _ANYWHERE),
    (r"api_org_[A-Za-z0-9]{30,}", "a Hugging Face organization API token", _ANYWHERE),
    (r"gh[pousr]_[A-Za-z0-9_]{36}", "a GitHub token", _ANYWHERE),
    (r"github_pat_[A-Za-z0-9_]{82}", "a GitHub token", _ANYWHERE),
    (r"gl(?:pat|rt|dt|ft|soat|cbt|imt|agent|oas|ptt)-[A-Za-z0-9_-]{20,}", "a GitLab token", _ANYWHERE),
    (r"GR1348941[A-Za-z0-9_-]{20,}", "a GitLab runner registration token", _ANYWHERE),
    (r"xox[abposre]-[A-Za-z0-9-]{10,}", "a Slack token", _ANYWHERE),
    (r"xapp-[0-9]-[A-Za-z0-9-]{10,}", "a Slack token", _ANYWHERE),
    (r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_+/]{8,}", "a Slack webhook", _ANYWHERE),
    (r"AIza[A-Za-z0-9_-]{35}", "a Google API key", _ANYWHERE),
    (r"GOCSPX-[A-Za-z0-9_-]{28}", "a Google OAuth client secret", _ANYWHERE),
    (r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])", "an AWS access key id", _ALNUM),
    (r"AccountKey=[A-Za-z0-9+/=]{88}", "an Azure storage account key", _ANYWHERE),
    (r"sk-ant-[A-Za-z0-9_-]{20,}", "an Anthropic API key", _ALNUM | {"_", "-"}),
    (r"sk-(?!ant-)(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}", "an OpenAI API key", _ALNUM | {"_", "-"}),
    (r"[rs]k_live_[A-Za-z0-9]{20,}", "a Stripe key", _ANYWHERE),
    (r"npm_[A-Za-z0-9]{36}", "an npm token", _ANYWHERE),
    (r":_authToken=\s*(?:npm_|[A-Fa-f0-9-]{36})", "an npm token", _ANYWHERE),
    (r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}", "a PyPI token", _ANYWHERE),
    (r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", "a SendGrid API key", _ANYWHERE),
    (r"sq0(?:csp|atp)-[A-Za-z0-9_\\-]{22,43}", "a Square OAuth secret", _ANYWHERE),
    (r"(?:AC|SK)[a-z0-9]{32}(?![A-Za-z0-9])", "a Twilio API key", _ALNUM),
    (r"[0-9a-z]{32}-us[0-9]{1,2}(?![0-9])", "a Mailchimp API key", _ALNUM),
    (r"[0-9]{8,10}:[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])", "a Telegram bot token", _ALNUM),
    (
        r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}",
        "a Discord bot token",
        _ALNUM | {"_", "-"},
    ),
    (r"AKC[A-Za-z0-9]{10,}", "an Artifactory API key", _ALNUM),
    (r"api.softlayer.com/soap/v3(?:.1)?/[a-z0-9]{64}", "a SoftLayer API key", _ANYWHERE),
    (r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}", "a JSON Web Token", _ANYWHERE),
    # An Authorization header's credential, whatever its format; a password in a URL (user:password@host).
    # A token holds a digit; a model's words after "bearer" ("disciplined.softmaxvertising") need not.
    (r"(?i:bearer)\s+(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{20,}=*", "a bearer token", _ALNUM),
    (r"://[^:/?#\[\]@!$&'()*+,;=\s]+:[^:/?#\[\]@!$&'()*+,;=\s]+@", "a password in a URL", _ANYWHERE),
    (r"BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY|PuTTY-User-Key-File-[0-9]", "a private key block", frozenset()),
)
_PATTERNS = tuple((re.compile(pattern), what, not_after) for pattern, what, not_after in _FORMATS)
# Names a credential is stored under (in a JSON key, or before a value in text), lower case.
_CREDENTIAL_NAME = (
    r"(?:wandb[_-]?api[_-]?key|api[_-]?key|apikey|api[_-]?token|access[_-]?token|auth[_-]?token|"
    r"hf[_-]?token|hub[_-]?token|hugging[_-]?face[_-]?hub[_-]?token|secret(?:[_-]?(?:access[_-]?)?key)?|"
    r"passw(?:or)?d)"
)
_CREDENTIAL_NAME_RE = re.compile(_CREDENTIAL_NAME, re.IGNORECASE)
_CREDENTIAL_VALUE_RE = re.compile(r"[A-Za-z0-9+/=_.-]{16,}")
# NAME=value, NAME: value, "NAME": "value", NAME value (.netrc), on one line; matched in lower-cased
# ASCII bytes (one byte per character, so positions match the text's), faster than an IGNORECASE search.
_NAMED_IN_TEXT = re.compile(
    _CREDENTIAL_NAME.encode() + rb"[\"']?[ \t]*[:=]?[ \t]*[\"']?(?P<value>[a-z0-9+/=_.-]{16,})"
)
_HEX40 = re.compile(r"[0-9a-fA-F]{40}")


def _first(pattern: re.Pattern[str], text: str, not_after: frozenset[str]) -> int:
    """Where the first match of `pattern` not right after one of `not_after` starts, or -1."""
    for match in pattern.finditer(text):
        at = match.start()
        if at == 0 or text[at - 1] not in not_after:
            return at
    return -1


@dataclass(frozen=True)
class Finding:
    """What was found (as messages say it: "a Hugging Face token") and where it starts in the text."""

    what: str
    start: int


def _credential(value: str) -> str | None:
    """What a value stored under a credential's name is, if it is shaped like one."""
    if _HEX40.fullmatch(value):
        return "a W&B API key"
    if _CREDENTIAL_VALUE_RE.fullmatch(value) and re.search("[A-Za-z]", value) and re.search("[0-9]", value):
        return "a credential"
    return None


@dataclass(frozen=True)
class SecretFinder:
    """Finds secrets in decoded strings.

    Args:
        token: the Hugging Face token in use, looked for verbatim when it is long enough.
    """

    token: str | None = None

    def find(self, text: str) -> Finding | None:
        """The first secret in `text` (several strings may be joined with newlines), or None."""
        found = []
        for pattern, what, not_after in _PATTERNS:
            at = _first(pattern, text, not_after)
            if at >= 0:
                found.append(Finding(what, at))
        if self.token is not None and len(self.token) >= MIN_TOKEN_IN_USE:
            at = text.find(self.token)
            if at >= 0:
                found.append(Finding("the Hugging Face token in use", at))
        lowered = text.encode("ascii", "replace").lower()
        for named in _NAMED_IN_TEXT.finditer(lowered):
            at = named.start()
            what = _credential(named["value"].decode())
            if what is not None and (at == 0 or chr(lowered[at - 1]) not in _ALNUM):
                found.append(Finding(what, at))
                break
        return min(found, key=lambda f: f.start) if found else None

    def find_named(self, name: str, value: str) -> str | None:
        """What `value` is when it is a credential stored under the key `name`, else None."""
        if not _CREDENTIAL_NAME_RE.search(name):
            return None
        return _credential(value)
