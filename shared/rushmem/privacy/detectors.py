"""Regular-expression detectors for personal data and credentials, each backed by a validator: a
pattern alone flags too much in ordinary memories (years, dates, versions, prices, ids), so every
candidate is checked the way the thing itself is checked (card numbers by Luhn, IBANs by mod 97, ...:
the table in docs/tenant-data.md). What cannot be checked this way (names, street addresses) is left
to a model-based provider (:mod:`rushmem.providers.comprehend`).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import ipaddress
import json
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, model_validator

from rushmem.folding import Folded, fold

# What an operator configures a mode for (one setting per category).
PiiCategory = Literal[
    "email",
    "phone",
    "payment_card",
    "bank_account",
    "government_id",
    "credential",
    "ip_address",
    "name",
    "address",
    "other",
]
PII_CATEGORIES: tuple[PiiCategory, ...] = get_args(PiiCategory)

# The finer type of each finding (what the redaction summary counts) and its category.
TYPE_CATEGORY: dict[str, PiiCategory] = {
    "email": "email",
    "phone": "phone",
    "payment_card": "payment_card",
    "iban": "bank_account",
    "us_ssn": "government_id",
    "government_id": "government_id",
    "aws_access_key_id": "credential",
    "aws_secret_access_key": "credential",
    "bearer_token": "credential",
    "github_token": "credential",
    "slack_token": "credential",
    "slack_webhook": "credential",
    "openai_api_key": "credential",
    "stripe_secret_key": "credential",
    "google_api_key": "credential",
    "private_key": "credential",
    "jwt": "credential",
    "password": "credential",
    "ipv4": "ip_address",
    "ipv6": "ip_address",
    "ip_address": "ip_address",
    "name": "name",
    "address": "address",
    "other": "other",
}

# Amazon Comprehend DetectPiiEntities' entity types -> (finding type, category) (the provider is
# rushmem.providers.comprehend; the settings check the configured types against this).
COMPREHEND_ENTITY_TYPES: dict[str, tuple[str, PiiCategory]] = {
    "NAME": ("name", "name"),
    "ADDRESS": ("address", "address"),
    "EMAIL": ("email", "email"),
    "PHONE": ("phone", "phone"),
    "CREDIT_DEBIT_NUMBER": ("payment_card", "payment_card"),
    "CREDIT_DEBIT_CVV": ("card_cvv", "payment_card"),
    "CREDIT_DEBIT_EXPIRY": ("card_expiry", "payment_card"),
    "PIN": ("pin", "payment_card"),
    "BANK_ACCOUNT_NUMBER": ("bank_account_number", "bank_account"),
    "BANK_ROUTING": ("bank_routing", "bank_account"),
    "INTERNATIONAL_BANK_ACCOUNT_NUMBER": ("iban", "bank_account"),
    "SWIFT_CODE": ("swift_code", "bank_account"),
    "SSN": ("us_ssn", "government_id"),
    "PASSPORT_NUMBER": ("passport_number", "government_id"),
    "DRIVER_ID": ("driver_id", "government_id"),
    "US_INDIVIDUAL_TAX_IDENTIFICATION_NUMBER": ("us_itin", "government_id"),
    "UK_NATIONAL_INSURANCE_NUMBER": ("uk_nino", "government_id"),
    "UK_UNIQUE_TAXPAYER_REFERENCE_NUMBER": ("uk_utr", "government_id"),
    "UK_NATIONAL_HEALTH_SERVICE_NUMBER": ("uk_nhs_number", "government_id"),
    "CA_SOCIAL_INSURANCE_NUMBER": ("ca_sin", "government_id"),
    "CA_HEALTH_NUMBER": ("ca_health_number", "government_id"),
    "IN_AADHAAR": ("in_aadhaar", "government_id"),
    "IN_PERMANENT_ACCOUNT_NUMBER": ("in_pan", "government_id"),
    "IN_NREGA": ("in_nrega", "government_id"),
    "IN_VOTER_NUMBER": ("in_voter_number", "government_id"),
    "AWS_ACCESS_KEY": ("aws_access_key_id", "credential"),
    "AWS_SECRET_KEY": ("aws_secret_access_key", "credential"),
    "PASSWORD": ("password", "credential"),
    "IP_ADDRESS": ("ip_address", "ip_address"),
}

# When two findings overlap, the one whose type ranks higher here is kept (then the longer one).
_PRIORITY: dict[str, int] = {
    "private_key": 100,
    "jwt": 95,
    "aws_secret_access_key": 92,
    "aws_access_key_id": 91,
    "github_token": 90,
    "slack_webhook": 90,
    "slack_token": 90,
    "stripe_secret_key": 90,
    "openai_api_key": 89,
    "google_api_key": 89,
    "bearer_token": 88,
    "password": 87,
    "payment_card": 80,
    "iban": 79,
    "email": 75,
    "us_ssn": 70,
    "government_id": 69,
    "ipv6": 60,
    "ipv4": 60,
    "phone": 50,
    "address": 20,
    "name": 20,
    "other": 10,
}


class Finding(BaseModel):
    """One piece of personal data in a text: its type, category and where it is (never its value).

    ``category`` (what a mode is configured for) follows from ``type`` unless a provider gives it.
    """

    model_config = ConfigDict(frozen=True)

    type: str
    start: int
    end: int
    category: PiiCategory = "other"
    source: str = "regex"
    score: float = 1.0

    @model_validator(mode="before")
    @classmethod
    def _category_of_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("category") is None and "type" in data:
            data = {**data, "category": TYPE_CATEGORY.get(str(data["type"]), "other")}
        return data


class PiiDetector(Protocol):
    """Anything that finds personal data in a text (the regex engine, Amazon Comprehend)."""

    def detect(self, text: str) -> list[Finding]: ...


def _found(kind: str, start: int, end: int) -> Finding:
    """A finding of the regex engine."""
    return Finding(type=kind, start=start, end=end, category=TYPE_CATEGORY[kind])


# ----------------------------------------------------------------------------------------
# validators
# ----------------------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum every payment card number carries (digits of any script)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = unicodedata.decimal(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# IBAN length per country (ISO 13616 registry, SWIFT release of 2024).
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
    "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
    "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
    "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
    "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
    "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
    "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
    "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def iban_valid(iban: str) -> bool:
    """Length for its country and the ISO 7064 mod-97 check (the remainder is 1); digits of any script."""
    iban = "".join(str(unicodedata.decimal(ch)) if ch.isdecimal() else ch for ch in iban).upper()
    if IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban[2:4].isdigit() or not (iban.isascii() and iban.isalnum()):
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def _b64url_json(part: str) -> object:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        return json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return None


# ----------------------------------------------------------------------------------------
# patterns
# ----------------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+-])[\w%+-](?:[\w.%+-]{0,63})@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])"
)

# Digit groups separated by single spaces, dots or dashes, optionally led by + or a
# parenthesised area code; which of them are phone numbers is decided in _phone_ok. The groups are
# one atomic group: a run of digits splits into groups in many ways, and trying each of them where
# the run goes on (35 digits and a comma) made the scan hundreds of times slower than on words.
_PHONE = re.compile(
    r"(?<![\w+./-])(?<!\d[ .-])(?:\+|(?=\()|\b)(?>(?:\(\d{1,5}\)[ .-]?)?\d{1,5}(?:[ .-]?\(?\d{1,5}\)?){1,6})"
    r"(?![\w]|[ .,/-]\d)"
)
_PHONE_WORDS = re.compile(
    r"(?i)\b(?:phone|tel|telephone|mobile|cell(?:phone)?|call|calls|text|sms|whatsapp|signal|fax|"
    r"contact|reach|dial|landline|hotline|ph|mob)\b[^\d\n]{0,25}$"
)
_DATE_LIKE = re.compile(r"^(?:\d{4}[-./ ]\d{1,2}[-./ ]\d{1,2}|\d{1,2}[-./ ]\d{1,2}[-./ ]\d{2,4})$")

_CARD = re.compile(r"(?<![\w.-])(?<!\d[ -])\d(?:[ -]?\d){12,18}(?![\w]|[ -]\d|[.,]\d)")

_SSN = re.compile(r"(?<![\w-])(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?![\w-]|[.,]\d)")

_IBAN_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?=[ ]?[A-Za-z0-9])")
_IBAN_BODY = {n: re.compile(rf"(?:[ ]?[A-Za-z0-9]){{{n - 4}}}(?![A-Za-z0-9])") for n in set(IBAN_LENGTHS.values())}

_AWS_KEY_ID = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])")
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_SECRET_WORDS = re.compile(r"(?i)(?:secret|aws_secret_access_key|secretaccesskey|secret_key)[^\n]{0,30}$")
_BEARER = re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{20,}=*)")
_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])"),
    ),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,250}")),
    ("slack_webhook", re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}")),
    ("stripe_secret_key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("openai_api_key", re.compile(r"(?<![A-Za-z0-9_-])sk-(?:[A-Za-z0-9_-]){20,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
)
# The BEGIN and END lines of a private key, found once each and paired in one pass (a pattern from
# BEGIN to its END read the rest of the text again at every BEGIN without one: quadratic).
_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----")
_PEM_END = re.compile(r"-----END ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----")
# A key pasted without its END line: everything base64-like after BEGIN (over-redacting is the safe side).
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s]*+")
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-])")

_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_VERSION_WORDS = re.compile(r"(?i)\b(?:version|ver|release|build|firmware|v)\.?\s*$")
_IPV6 = re.compile(
    r"(?<![\w:.])(?=[0-9A-Fa-f:.]*[0-9A-Fa-f])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?:\.\d{1,3}){0,3}(?![\w]|:[\w:])"
)


# ----------------------------------------------------------------------------------------
# detectors
# ----------------------------------------------------------------------------------------


def _emails(text: str) -> Iterator[Finding]:
    for m in _EMAIL.finditer(text):
        local = m.group().split("@", 1)[0]
        if ".." in local or local.endswith("."):
            continue
        yield _found("email", m.start(), m.end())


def _phone_ok(text: str, start: int, candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    n = len(digits)
    separators = set(re.findall(r"[ .-]", candidate))
    if _DATE_LIKE.match(candidate) or re.fullmatch(r"\d{1,3}(?:\.\d{1,3}){3}", candidate):
        return False
    if candidate.startswith("+"):
        return 8 <= n <= 15 and digits[0] != "0"
    groups = [len(g) for g in re.split(r"[ .()-]+", candidate) if g]
    if digits.startswith("00") and len(digits) > 2 and digits[2] != "0":
        return 10 <= n <= 17 and bool(separators)
    # North American: (NXX) NXX-XXXX, NXX-NXX-XXXX, 1 NXX NXX XXXX; separated, not a run of digits.
    nanp = digits[1:] if n == 11 and digits[0] == "1" else digits
    shape = groups[1:] if n == 11 and groups and groups[0] == 1 else groups
    if (
        len(nanp) == 10
        and shape == [3, 3, 4]
        and nanp[0] in "23456789"
        and nanp[3] in "23456789"
        and (separators or "(" in candidate)
    ):
        return True
    # National numbers with a trunk 0 (020 7946 0958, 06 12 34 56 78, 030-1234567): one kind of separator.
    if (
        digits[0] == "0"
        and digits[1] != "0"
        and 9 <= n <= 11
        and len(separators) == 1
        and len(groups) >= 2
        and "(" not in candidate
    ):
        return True
    # Anything else only where the text says it is a number to call.
    return 7 <= n <= 15 and bool(_PHONE_WORDS.search(text[max(0, start - 40) : start]))


def _phones(text: str) -> Iterator[Finding]:
    for m in _PHONE.finditer(text):
        if _phone_ok(text, m.start(), m.group()):
            yield _found("phone", m.start(), m.end())


def _cards(text: str) -> Iterator[Finding]:
    for m in _CARD.finditer(text):
        candidate = m.group()
        digits = candidate.replace(" ", "").replace("-", "")
        if len(set(re.findall(r"[ -]", candidate))) > 1:
            continue
        # Major industry identifier 2-6 (Mastercard 2-series, Amex/Diners/JCB, Visa, Mastercard, Discover/UnionPay).
        if digits[0] not in "23456" or len(set(digits)) == 1 or not luhn_valid(digits):
            continue
        yield _found("payment_card", m.start(), m.end())


def _ssns(text: str) -> Iterator[Finding]:
    for m in _SSN.finditer(text):
        yield _found("us_ssn", m.start(), m.end())


def _ibans(text: str) -> Iterator[Finding]:
    for m in _IBAN_START.finditer(text):
        length = IBAN_LENGTHS.get(m.group()[:2].upper())
        if length is None:
            continue
        # Exactly the country's length in letters and digits (single spaces between them), then no
        # more of them: one pattern per length, read by the regex engine rather than a loop here.
        body = _IBAN_BODY[length].match(text, m.end())
        if body is not None and iban_valid(m.group() + body.group().replace(" ", "")):
            yield _found("iban", m.start(), body.end())


def _private_keys(text: str) -> Iterator[Finding]:
    """Each BEGIN line to the first END line after it of the same kind; one without its END (a key
    pasted in part): the BEGIN line and the base64-like text after it (over-redacting is the safe side)."""
    ends: dict[tuple[str, str], list[int]] = {}  # per kind, where its END lines finish, in text order
    end_starts: dict[int, int] = {}  # each END line's end -> its start
    for m in _PEM_END.finditer(text):
        ends.setdefault((m.group(1), m.group(2)), []).append(m.end())
        end_starts[m.end()] = m.start()
    pos = 0
    for m in _PEM_BEGIN.finditer(text):
        if m.start() < pos:  # inside the key found before
            continue
        kind = ends.get((m.group(1), m.group(2)), [])
        i = bisect.bisect_left(kind, m.end())
        while i < len(kind) and end_starts[kind[i]] < m.end():
            i += 1
        body = _PEM_BODY.match(text, m.end())
        pos = kind[i] if i < len(kind) else body.end() if body else m.end()
        yield _found("private_key", m.start(), pos)


def _credentials(text: str) -> Iterator[Finding]:
    yield from _private_keys(text)
    for m in _JWT.finditer(text):
        header_part, payload_part = m.group().split(".")[:2]
        header, payload = _b64url_json(header_part), _b64url_json(payload_part)
        if isinstance(header, dict) and ("alg" in header or "typ" in header) and isinstance(payload, dict):
            yield _found("jwt", m.start(), m.end())
    key_ids = [(m.start(), m.end()) for m in _AWS_KEY_ID.finditer(text)]
    for start, end in key_ids:
        yield _found("aws_access_key_id", start, end)
    key_starts = [start for start, _ in key_ids]
    for m in _AWS_SECRET.finditer(text):
        s = m.group()
        mixed = any(c.islower() for c in s) and any(c.isupper() for c in s) and any(c.isdigit() or c in "/+" for c in s)
        if not mixed:
            continue
        # A key id within 120 characters (ids do not overlap: the nearest ones by start are enough).
        i = bisect.bisect_left(key_starts, m.start())
        near_key = any(
            abs(m.start() - end) <= 120 or abs(start - m.end()) <= 120 for start, end in key_ids[max(0, i - 1) : i + 1]
        )
        if near_key or _AWS_SECRET_WORDS.search(text[max(0, m.start() - 60) : m.start()]):
            yield _found("aws_secret_access_key", m.start(), m.end())
    for m in _BEARER.finditer(text):
        token = m.group(1)
        if any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
            yield _found("bearer_token", m.start(1), m.end(1))
    for kind, pattern in _TOKENS:
        for m in pattern.finditer(text):
            token = m.group()
            if kind == "openai_api_key" and not (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)):
                continue
            yield _found(kind, m.start(), m.end())


def _ips(text: str) -> Iterator[Finding]:
    for m in _IPV4.finditer(text):
        try:
            v4 = ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if v4.is_loopback or v4.is_unspecified:  # 127.0.0.1 and 0.0.0.0 are nobody's address
            continue
        if _VERSION_WORDS.search(text[max(0, m.start() - 12) : m.start()]):
            continue
        yield _found("ipv4", m.start(), m.end())
    for m in _IPV6.finditer(text):
        candidate = m.group()
        if candidate.count(":") < 2:
            continue
        try:
            v6 = ipaddress.IPv6Address(candidate)
        except ValueError:
            continue
        if v6.is_loopback or v6.is_unspecified:
            continue
        yield _found("ipv6", m.start(), m.end())


_DETECTORS: dict[str, Callable[[str], Iterator[Finding]]] = {
    "email": _emails,
    "phone": _phones,
    "payment_card": _cards,
    "bank_account": _ibans,
    "government_id": _ssns,
    "credential": _credentials,
    "ip_address": _ips,
}
REGEX_CATEGORIES: tuple[PiiCategory, ...] = tuple(_DETECTORS)  # type: ignore[arg-type]


# Findings of one detector in one text beyond which the rest of the text is one finding: a field
# holding more personal data than this is redacted from there to its end (fail closed), and
# neither the detectors' time nor the redaction's grows with how many values it holds.
MAX_FINDINGS = 64
# What marks such a finding (it wins every overlap: nothing inside it is left in the clear).
REST_OF_FIELD = "rest_of_field"


class RegexDetector:
    """The built-in engine: pure Python, no model, no network; validated patterns only."""

    def __init__(self, categories: tuple[PiiCategory, ...] | None = None) -> None:
        self.categories = categories if categories is not None else REGEX_CATEGORIES

    def detect(self, text: str) -> list[Finding]:
        """Findings in ``text``: the patterns read its detection form (an invisible character, a
        fullwidth or lookalike letter, a digit of another script hide nothing), the spans are of
        ``text`` as given. A detector's finding past :data:`MAX_FINDINGS` covers the rest of the text."""
        folded = fold(text)
        found: list[Finding] = []
        for category in self.categories:
            detector = _DETECTORS.get(category)
            if detector is None:
                continue
            for count, finding in enumerate(detector(folded.text)):
                if count == MAX_FINDINGS:
                    found.append(finding.model_copy(update={"end": len(folded.text), "source": REST_OF_FIELD}))
                    break  # the generator stops: the rest of the text is not scanned
                found.append(finding)
        return resolve_overlaps(unfolded(found, folded))


def unfolded(findings: list[Finding], folded: Folded) -> list[Finding]:
    """Findings in ``folded``'s text with the spans of the text it was folded from."""
    if folded.origin is None:
        return findings
    return [
        f.model_copy(update=dict(zip(("start", "end"), folded.span(f.start, f.end), strict=True))) for f in findings
    ]


def resolve_overlaps(findings: list[Finding]) -> list[Finding]:
    """Non-overlapping findings in text order: where two overlap, the rest of a field past the
    cap wins, then the higher-priority type, then the longer span (a card number is not also a
    phone number). n log n in the findings (each is placed among those kept by bisection)."""
    ranked = sorted(
        findings, key=lambda f: (f.source != REST_OF_FIELD, -_PRIORITY.get(f.type, 0), -(f.end - f.start), f.start)
    )
    starts: list[int] = []  # the kept findings' starts and ends, in text order (they never overlap)
    ends: list[int] = []
    kept: list[Finding] = []
    for f in ranked:
        if f.end <= f.start:
            continue
        i = bisect.bisect_right(starts, f.start)
        if (i > 0 and ends[i - 1] > f.start) or (i < len(starts) and starts[i] < f.end):
            continue
        starts.insert(i, f.start)
        ends.insert(i, f.end)
        kept.insert(i, f)
    return kept


def detect_pii(text: str, detectors: Sequence[PiiDetector] | None = None) -> list[Finding]:
    """Findings of all detectors (the regex engine when none are given), merged without overlaps."""
    if detectors is None:
        return RegexDetector().detect(text)
    found: list[Finding] = []
    for detector in detectors:
        found.extend(detector.detect(text))
    return resolve_overlaps(found)
