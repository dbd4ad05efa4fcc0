"""Redaction policy and the redaction itself: what a memory looks like before it is embedded and stored.

The policy is one mode per category (off, redact, drop) with a default; it reads from a single
setting such as ``RUSHMEM_PII="redact,credential=drop,ip_address=off"`` (or the same as
JSON). The result says which types were removed and how many, never the values, so it can be
kept with the memory.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from rushmem.privacy.detectors import (
    PII_CATEGORIES,
    Finding,
    PiiCategory,
    PiiDetector,
    RegexDetector,
    detect_pii,
    resolve_overlaps,
)

PiiMode = Literal["off", "redact", "drop"]
PII_MODES: tuple[str, ...] = get_args(PiiMode)
RedactionAction = Literal["kept", "redacted", "dropped"]


class PiiPolicy(BaseModel):
    """A mode for every category: ``default`` unless ``overrides`` names the category."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: PiiMode = "off"
    overrides: dict[PiiCategory, PiiMode] = Field(default_factory=dict)

    def mode_for(self, category: str) -> PiiMode:
        return self.overrides.get(category, self.default)  # type: ignore[call-overload,no-any-return]

    @property
    def enabled(self) -> bool:
        """Whether anything is looked for at all (off everywhere: no detector runs)."""
        return self.default != "off" or any(mode != "off" for mode in self.overrides.values())

    @classmethod
    def parse(cls, value: object) -> PiiPolicy:
        """From a policy, a mode ("redact"), the compact form ("redact,credential=drop,ip_address=off"),
        JSON ('{"default": "redact", "credential": "drop"}') or a mapping of the same."""
        if isinstance(value, PiiPolicy):
            return value
        if value is None:
            return cls()
        if isinstance(value, str):
            text = value.strip()
            if not text:
                return cls()
            if text.startswith("{"):
                try:
                    value = json.loads(text)
                except ValueError as exc:
                    raise ValueError(f"PII policy is not valid JSON: {exc}") from None
            else:
                value = _parse_compact(text)
        if not isinstance(value, Mapping):
            raise ValueError("PII policy must be a mode, 'mode,category=mode,...' or a JSON object")
        data: dict[str, Any] = dict(value)
        default = data.pop("default", "off")
        overrides = dict(data.pop("overrides", {}) or {})
        overrides.update(data)
        unknown = sorted(set(overrides) - set(PII_CATEGORIES))
        if unknown:
            raise ValueError(f"unknown PII categories {unknown}; known: {', '.join(PII_CATEGORIES)}")
        return cls(default=default, overrides=overrides)

    def __str__(self) -> str:
        parts = [self.default, *(f"{k}={v}" for k, v in sorted(self.overrides.items()))]
        return ",".join(parts)

    def keeping_credentials_out(self) -> PiiPolicy:
        """This policy with credentials redacted where it would store them without naming them: access
        keys, tokens and private keys are never stored unless ``credential=off`` says so explicitly,
        whatever the mode of the other categories."""
        if "credential" in self.overrides or self.default != "off":
            return self
        return self.model_copy(update={"overrides": {**self.overrides, "credential": "redact"}})


# What the service applies when RUSHMEM_PII is unset: credentials redacted, other personal data kept.
SAFE_DEFAULT_POLICY = PiiPolicy(overrides={"credential": "redact"})


def parse_setting(value: object) -> PiiPolicy:
    """RUSHMEM_PII: :meth:`PiiPolicy.parse`, with credentials kept out unless named (``off`` turns
    personal data detection off, not credential redaction; ``off,credential=off`` turns both off)."""
    return PiiPolicy.parse(value).keeping_credentials_out()


# The type to annotate a settings field with: parses env strings itself (pydantic-settings must not
# JSON-decode them first, hence NoDecode where the field is declared; see the module docstring).
PiiPolicySetting = Annotated[PiiPolicy, BeforeValidator(parse_setting)]


def _parse_compact(text: str) -> dict[str, str]:
    data: dict[str, str] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        if "=" in item:
            key, _, mode = item.partition("=")
            data[key.strip().lower()] = mode.strip().lower()
        elif "default" in data:
            raise ValueError(f"PII policy names two default modes ({data['default']!r} and {item!r})")
        else:
            data["default"] = item.lower()
    return data


class Redaction(BaseModel):
    """What redaction did to one text. ``removed`` counts by type (e.g. {"email": 1}), never values."""

    model_config = ConfigDict(frozen=True)

    text: str
    action: RedactionAction
    removed: dict[str, int] = Field(default_factory=dict)
    dropped_for: list[str] = Field(default_factory=list)

    @property
    def dropped(self) -> bool:
        return self.action == "dropped"

    @property
    def changed(self) -> bool:
        return self.action != "kept"


def placeholder(finding: Finding) -> str:
    """The typed marker left in place of a value, e.g. [EMAIL], [CREDENTIAL]."""
    return f"[{finding.category.upper()}]"


def redact(
    text: str,
    mode: PiiPolicy | PiiMode | str = "redact",
    *,
    detectors: Sequence[PiiDetector] | None = None,
    findings: Sequence[Finding] | None = None,
) -> Redaction:
    """``text`` with personal data replaced by typed placeholders, or marked to be dropped.

    ``mode`` is a policy or a mode for every category. ``detectors`` default to the regex
    engine; ``findings`` skips detection (already found, e.g. once for a batch). A category in
    ``drop`` mode that is found makes the whole text dropped (``text`` is then empty); categories
    in ``off`` are neither replaced nor counted.
    """
    policy = PiiPolicy.parse(mode) if not isinstance(mode, PiiPolicy) else mode
    if not policy.enabled or not text:
        return Redaction(text=text, action="kept")
    found = list(findings) if findings is not None else detect_pii(text, detectors)
    acted = [f for f in found if policy.mode_for(f.category) != "off"]
    if not acted:
        return Redaction(text=text, action="kept")
    removed = dict(sorted(Counter(f.type for f in acted).items()))
    dropping = sorted({f.category for f in acted if policy.mode_for(f.category) == "drop"})
    if dropping:
        return Redaction(text="", action="dropped", removed=removed, dropped_for=dropping)
    out: list[str] = []
    pos = 0
    for f in sorted(acted, key=lambda f: f.start):
        if f.start < pos:  # overlapping findings from a caller: keep the first
            continue
        out.append(text[pos : f.start])
        out.append(placeholder(f))
        pos = f.end
    out.append(text[pos:])
    return Redaction(text="".join(out), action="redacted", removed=removed)


def redact_many(
    texts: Sequence[str], mode: PiiPolicy | PiiMode | str = "redact", *, detectors: Sequence[PiiDetector] | None = None
) -> list[Redaction]:
    """:func:`redact` for several texts (one conversation's facts): a detector with a ``detect_many``
    (Comprehend) sees them all in as few requests as it can; the others see each text."""
    policy = PiiPolicy.parse(mode) if not isinstance(mode, PiiPolicy) else mode
    if not policy.enabled:
        return [Redaction(text=text, action="kept") for text in texts]
    found: list[list[Finding]] = [[] for _ in texts]
    detectors = detectors if detectors is not None else (RegexDetector(),)
    for detector in detectors:
        many = getattr(detector, "detect_many", None)
        per_text = many(list(texts)) if callable(many) else [detector.detect(text) for text in texts]
        for bucket, findings in zip(found, per_text, strict=True):
            bucket.extend(findings)
    # The regex engine's findings alone are already without overlaps.
    alone = len(detectors) == 1 and isinstance(detectors[0], RegexDetector)
    resolve = list if alone else resolve_overlaps
    return [redact(text, policy, findings=resolve(f)) for text, f in zip(texts, found, strict=True)]
