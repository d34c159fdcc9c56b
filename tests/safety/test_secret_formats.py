"""hubkit's secret finder measured against a list the field keeps: detect-secrets' detectors.

For every detector that recognises a token by its format, strings are generated from the detector's own
patterns (`rstr`), kept when the detector itself flags them, and must all be found by hubkit. Left out,
with the reason: the heuristics (entropy, keywords; hubkit's credential-name rule is its counterpart),
public IP addresses (not a credential), the patterns keyed on a variable's name (``cl_apikey = ...``,
whose names include bare ``key`` and ``token``, which model configs use for other things), and
Artifactory's ``AP...`` pattern (``AP`` and a hex digit then 8 letters: ordinary capitalised words).
"""

from __future__ import annotations

import base64
import json
import random

import pytest
import rstr
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.settings import default_settings

from hubkit.safety.secrets import SecretFinder

HEURISTICS = {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
SAMPLES_PER_PATTERN = 30


def _keyed_on_a_name(pattern: str) -> bool:
    return "(?:key|pwd" in pattern or "(?:secret[-_]?" in pattern


def _left_out(detector: str, pattern: str) -> bool:
    return _keyed_on_a_name(pattern) or (detector == "ArtifactoryDetector" and "AP[" in pattern)


def _jwt(claims: dict) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{'s' * 43}"


def _corpus() -> dict[str, list[str]]:
    """Lines each detector flags, by detector: generated from its patterns, JWTs built (random strings
    are never valid ones)."""
    generate = rstr.Rstr(random.Random(0))
    found: dict[str, list[str]] = {}
    detectors = get_mapping_from_secret_type_to_class().values()
    with default_settings():
        for detector in sorted(detectors, key=lambda d: d.__name__):
            if detector.__name__ in HEURISTICS:
                continue
            plugin = detector()
            candidates = [
                generate.xeger(pattern)
                for pattern in detector.denylist
                if not _left_out(detector.__name__, pattern.pattern)
                for _ in range(SAMPLES_PER_PATTERN)
            ]
            if not candidates and detector.__name__ != "JwtTokenDetector":
                continue  # every pattern keyed on a name (IBM's)
            if detector.__name__ == "JwtTokenDetector":
                candidates = [
                    _jwt({"sub": str(n), "name": "someone", "iat": 1_700_000_000 + n}) for n in range(5)
                ]
            lines = [f'"value": "{candidate}"' for candidate in candidates]
            found[detector.__name__] = [
                line
                for line in lines
                if list(plugin.analyze_line(filename="x.json", line=line, line_number=1))
            ]
    return found


CORPUS = _corpus()


@pytest.mark.parametrize("detector", sorted(CORPUS))
def test_every_token_a_detector_flags_by_its_format_is_found(detector: str) -> None:
    lines = CORPUS[detector]
    assert lines, f"{detector}: no sample generated"
    finder = SecretFinder()
    missed = [line for line in lines if finder.find(line) is None]
    assert not missed, f"{detector}: {len(missed)}/{len(lines)} missed, e.g. {missed[0]!r}"


def test_the_list_covers_the_formats_the_issue_names() -> None:
    assert {
        "AWSKeyDetector",
        "GitHubTokenDetector",
        "GitLabTokenDetector",
        "SlackDetector",
        "OpenAIDetector",
        "JwtTokenDetector",
        "StripeDetector",
        "PypiTokenDetector",
        "NpmDetector",
    } <= set(CORPUS)


def test_a_models_words_after_bearer_are_no_token() -> None:
    # A random-weight model in a verl run wrote this: a bearer token holds a digit, words need not.
    finder = SecretFinder()
    assert finder.find("the bearer disciplined.softmaxvertising of") is None
    assert finder.find("Authorization: Bearer Qa9Zk3Lm0Pq7Rs2Tu5Vw8Xy1Ab4Cd6") is not None
