"""Personal data redaction: every type found and replaced, validators' negatives kept, ordinary text untouched."""

from __future__ import annotations

import base64
import json
from typing import Annotated

import pytest
from pydantic import ValidationError
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from rushmem.privacy import (
    PiiPolicy,
    PiiPolicySetting,
    RegexDetector,
    detect_pii,
    iban_valid,
    luhn_valid,
    redact,
)


def _b64(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


JWT = f"{_b64({'alg': 'HS256', 'typ': 'JWT'})}.{_b64({'sub': 'u-42', 'name': 'Ann'})}.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----"
)

# (type, a memory holding one value of it, the value)
POSITIVES = [
    ("email", "Her address is jane.doe+memo@mail.example.org, she says.", "jane.doe+memo@mail.example.org"),
    ("phone", "His number is +44 20 7946 0958 for work.", "+44 20 7946 0958"),
    ("phone", "Call the office at (415) 555-0132 tomorrow.", "(415) 555-0132"),
    ("phone", "Her cell is 212-555-0187.", "212-555-0187"),
    ("phone", "Mobile +1.202.555.0143 is the best way.", "+1.202.555.0143"),
    ("phone", "In Paris she answers 06 12 34 56 78 after six.", "06 12 34 56 78"),
    ("phone", "The Berlin desk has 030 1234567.", "030 1234567"),
    ("phone", "Dial 0044 20 7946 0958 from abroad.", "0044 20 7946 0958"),
    ("phone", "Her phone number: 5551234567.", "5551234567"),
    ("payment_card", "Paid with card 4111 1111 1111 1111 last week.", "4111 1111 1111 1111"),
    ("payment_card", "Uses Mastercard 5555-5555-5555-4444 for travel.", "5555-5555-5555-4444"),
    ("payment_card", "Amex 378282246310005 is the company card.", "378282246310005"),
    ("iban", "Salary goes to DE89 3704 0044 0532 0130 00 each month.", "DE89 3704 0044 0532 0130 00"),
    ("iban", "Rent is paid from GB82WEST12345698765432.", "GB82WEST12345698765432"),
    ("iban", "French account FR14 2004 1010 0505 0001 3M02 606 is closed.", "FR14 2004 1010 0505 0001 3M02 606"),
    ("us_ssn", "SSN 123-45-6789 was on the form.", "123-45-6789"),
    ("aws_access_key_id", "Deploys with AKIAIOSFODNN7EXAMPLE from his laptop.", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_access_key_id", "A session key ASIAY34FZKBOKMUTVV7A expired.", "ASIAY34FZKBOKMUTVV7A"),
    (
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in the notes.",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "bearer_token",
        "The script sends Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543a1b2C3 to the API.",
        "8f14e45fceea167a5a36dedd4bea2543a1b2C3",
    ),
    (
        "github_token",
        "CI uses ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789 today.",
        "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    ),
    ("slack_token", "The bot token is xoxb-123456789012-abcdefGHIJKL.", "xoxb-123456789012-abcdefGHIJKL"),
    (
        "openai_api_key",
        "Keeps sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z in a file.",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    ),
    ("google_api_key", "Maps key AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW.", "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"),
    ("jwt", f"Her session token was {JWT} yesterday.", JWT),
    ("private_key", f"He pasted his key {PEM} into the chat.", PEM),
    ("private_key", "Key: " + " ".join(PEM.split()), " ".join(PEM.split())),  # as stored: whitespace collapsed
    ("ipv4", "Her home server is at 203.0.113.77 behind the router.", "203.0.113.77"),
    ("ipv6", "The VPN gives him 2001:db8:85a3::8a2e:370:7334 now.", "2001:db8:85a3::8a2e:370:7334"),
]


@pytest.mark.parametrize(("kind", "text", "value"), POSITIVES, ids=[f"{p[0]}-{i}" for i, p in enumerate(POSITIVES)])
def test_each_type_is_found_and_redacted(kind: str, text: str, value: str) -> None:
    findings = detect_pii(text)
    assert [(f.type, text[f.start : f.end]) for f in findings] == [(kind, value)]
    result = redact(text, "redact")
    assert value not in result.text
    assert result.action == "redacted"
    assert result.removed == {kind: 1}
    assert f"[{findings[0].category.upper()}]" in result.text


def test_a_memory_with_an_email_a_card_and_an_aws_key_keeps_only_its_other_words() -> None:
    memory = (
        "Ann's billing contact is ann@example.com, she pays with 4242 4242 4242 4242 and deploys "
        "with AKIAIOSFODNN7EXAMPLE from the Lisbon office"
    )
    result = redact(memory, "redact")
    assert result.text == (
        "Ann's billing contact is [EMAIL], she pays with [PAYMENT_CARD] and deploys "
        "with [CREDENTIAL] from the Lisbon office"
    )
    assert result.removed == {"aws_access_key_id": 1, "email": 1, "payment_card": 1}
    # The summary holds types and counts only: none of the values, anywhere in the record.
    dumped = result.model_dump_json()
    for value in ("ann@example.com", "4242 4242 4242 4242", "AKIAIOSFODNN7EXAMPLE", "4242"):
        assert value not in dumped


@pytest.mark.parametrize(
    "text",
    [
        "Card 4111 1111 1111 1112 fails the checksum.",  # Luhn off by one
        "The number 1234 5678 9012 3456 is a made-up example.",  # Luhn invalid
        "Serial 7992 7398 7130 0000 0000 belongs to the printer.",  # 20 digits: too long for a card
        "Tracking 9400111899223197428490 is a parcel.",  # starts with 9: not a card issuer
        "Old account DE88 3704 0044 0532 0130 00 was mistyped.",  # IBAN check digits wrong
        "GB82WEST1234569876543 is one character short.",  # IBAN length wrong for GB
        "XX89 3704 0044 0532 0130 00 has no such country.",
        "SSN 000-12-3456 is not issued.",
        "666-12-3456 is not issued.",
        "912-34-5678 is an ITIN range, not an SSN.",
        "123-00-4567 has a zero group.",
        "123-45-0000 has a zero serial.",
        "The address 999.10.10.10 is not an IPv4 address.",
        "They upgraded to version 10.2.0.1 of the firmware.",
        "Commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it.",  # 40 hex chars: not an AWS secret
        "He was the bearer of bad news about the merger.",
        "The header eyJhbGciOiJIUzI1NiJ9 alone is not a token.",
        "A task-list item like sk-learn is not a key.",
        "Loopback 127.0.0.1 and ::1 and 0.0.0.0 are nobody's addresses.",
    ],
)
def test_validator_negatives_are_kept(text: str) -> None:
    assert detect_pii(text) == []
    assert redact(text, "redact").text == text


ORDINARY = [
    "Caroline went to the LGBTQ support group on 2023-05-08 at 13:56.",
    "Melanie ran a charity 5K on 25 May 2023 and finished in 31:05.",
    "The meeting moved from 10/05/2023 to 11.05.2023 at 9:30.",
    "They were married in 1998 and moved house in 2004, 2011 and 2019.",
    "The decade from 1990 2000 2010 saw three moves.",
    "He upgraded Python to 3.11.4 and numpy to 1.26.4 on Tuesday.",
    "The app is at v2.14.3 and the API at version 1.2.3.4.",
    "The flat costs $1,299.99 a month, or 1 250 000 yen a year.",
    "She paid EUR 2.500,00 for the bike and 12.5% tax.",
    "Population 8 336 817 in 2020, area 783.8 km2.",
    "Her marathon best is 3:45:12 and her 10k is 52:30.",
    "Flight BA 0117 leaves at 18:35 from gate 23.",
    "The ISBN is 978-3-16-148410-0 and the order is #123456789.",
    "Room 1204, floor 12, building 7; badge 00731.",
    "Coordinates 48.8584, 2.2945 mark the tower.",
    "He scored 1,024 points in 2 hours and 15 minutes.",
    "Take 2 pills 3 times a day for 10 days.",
    "The recipe needs 250 g flour, 2 eggs and 100 ml milk.",
    "Pi is 3.14159 and e is 2.71828.",
    "Invoice 2023-0042 was paid on 2023-06-30.",
    "Between 2019-2023 she lived in Oslo.",
    "Working hours are 9-5, Monday to Friday.",
    "The ticket number 4815162342 is from the lottery.",
    "Her student id is 20231234 and her locker is 0042.",
    "The zip code is 94103 and the street number is 1600.",
    "She was born on 12 03 1988 in Porto.",
    "The score ended 3-2 after 90 minutes.",
    "They ran 30-60 minutes each day in 2022.",
    "Chapter 11, verse 2-4, page 123-145.",
    "Ratio 16:9 display at 1920x1080 and 60 Hz.",
    "He owes 100 200 300 dollars in three instalments.",
    "C++ code uses std::vector and Foo::bar.",
    "The time is 12:30:45 on the dashboard.",
    "MAC de:ad:be:ef:00:01 is the router's label.",
    "She reads sci-fi and her e-mail habits are chaotic.",
    "Username alice_smith on the forum, no address given.",
]


def test_ordinary_texts_are_untouched() -> None:
    flagged = {text: detect_pii(text) for text in ORDINARY}
    assert {t: f for t, f in flagged.items() if f} == {}
    for text in ORDINARY:
        result = redact(text, "redact")
        assert (result.text, result.action, result.removed) == (text, "kept", {})


def test_a_card_number_is_not_also_a_phone_number() -> None:
    text = "card 5105 1051 0510 5100 and phone +1 415 555 0132"
    assert [(f.type, text[f.start : f.end]) for f in detect_pii(text)] == [
        ("payment_card", "5105 1051 0510 5100"),
        ("phone", "+1 415 555 0132"),
    ]


def test_an_aws_secret_key_needs_a_key_id_or_a_keyword_nearby() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert detect_pii(f"The phrase {secret} alone") == []
    text = f"id AKIAIOSFODNN7EXAMPLE and {secret}"
    assert {f.type for f in detect_pii(text)} == {"aws_access_key_id", "aws_secret_access_key"}


def test_off_keeps_everything_and_runs_nothing() -> None:
    text = "mail ann@example.com"
    assert redact(text, "off").model_dump() == {"text": text, "action": "kept", "removed": {}, "dropped_for": []}


def test_drop_mode_drops_the_whole_memory_and_says_why() -> None:
    text = "Deploy key AKIAIOSFODNN7EXAMPLE and mail ann@example.com"
    result = redact(text, PiiPolicy.parse("redact,credential=drop"))
    assert result.dropped
    assert result.text == ""
    assert result.dropped_for == ["credential"]
    assert result.removed == {"aws_access_key_id": 1, "email": 1}


def test_a_category_switched_off_is_neither_replaced_nor_counted() -> None:
    text = "Ann at ann@example.com, server 203.0.113.9"
    result = redact(text, "redact,ip_address=off")
    assert result.text == "Ann at [EMAIL], server 203.0.113.9"
    assert result.removed == {"email": 1}
    only_ip = redact(text, "off,ip_address=redact")
    assert only_ip.text == "Ann at ann@example.com, server [IP_ADDRESS]"


def test_given_findings_skip_detection() -> None:
    text = "call me maybe"
    found = RegexDetector().detect("ann@example.com")
    assert redact("ann@example.com", "redact", findings=found).text == "[EMAIL]"
    assert redact(text, "redact", findings=[]).action == "kept"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", PiiPolicy()),
        ("redact", PiiPolicy(default="redact")),
        (
            " Redact , credential = drop ,ip_address=off ",
            PiiPolicy(default="redact", overrides={"credential": "drop", "ip_address": "off"}),
        ),
        ("email=redact", PiiPolicy(default="off", overrides={"email": "redact"})),
        ('{"default": "drop", "phone": "off"}', PiiPolicy(default="drop", overrides={"phone": "off"})),
        ({"default": "redact", "overrides": {"name": "drop"}}, PiiPolicy(default="redact", overrides={"name": "drop"})),
    ],
)
def test_policy_forms(raw: object, expected: PiiPolicy) -> None:
    assert PiiPolicy.parse(raw) == expected
    assert PiiPolicy.parse(str(expected)) == expected  # the compact form round-trips


@pytest.mark.parametrize("raw", ["erase", "redact,emails=drop", "redact,drop", "redact,phone=hide", "{not json"])
def test_bad_policies_are_refused_with_the_reason(raw: str) -> None:
    with pytest.raises((ValueError, ValidationError)):
        PiiPolicy.parse(raw)


def test_the_proposed_settings_field_reads_the_compact_form_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class _Settings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="AGENT_MEMORY_")
        pii: Annotated[PiiPolicySetting, NoDecode] = PiiPolicy()

    # Credentials are kept out unless the setting names them (a default of all off too).
    assert _Settings().pii == PiiPolicy(overrides={"credential": "redact"})
    monkeypatch.setenv("AGENT_MEMORY_PII", "off")
    assert _Settings().pii == PiiPolicy(overrides={"credential": "redact"})
    monkeypatch.setenv("AGENT_MEMORY_PII", "email=redact")
    assert _Settings().pii == PiiPolicy(overrides={"email": "redact", "credential": "redact"})
    monkeypatch.setenv("AGENT_MEMORY_PII", "off,credential=off")
    assert not _Settings().pii.enabled
    monkeypatch.setenv("AGENT_MEMORY_PII", "drop")
    assert _Settings().pii == PiiPolicy(default="drop")
    monkeypatch.setenv("AGENT_MEMORY_PII", "redact,credential=drop")
    assert _Settings().pii == PiiPolicy(default="redact", overrides={"credential": "drop"})
    monkeypatch.setenv("AGENT_MEMORY_PII", "redact,passwords=drop")
    with pytest.raises(ValidationError, match="unknown PII categories"):
        _Settings()


def test_checksums() -> None:
    assert luhn_valid("79927398713") and not luhn_valid("79927398710")
    assert iban_valid("GB82WEST12345698765432") and not iban_valid("GB82WEST12345698765433")
    assert iban_valid("NO9386011117947") and not iban_valid("NO938601111794")


def test_a_private_key_without_its_end_line_is_still_removed() -> None:
    text = "key: -----BEGIN PRIVATE KEY----- MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
    result = redact(text, "redact")
    assert result.text == "key: [CREDENTIAL]"
    assert result.removed == {"private_key": 1}


def _numeric_sentences(n: int, seed: int = 7) -> list[str]:
    """Ordinary sentences dense with the numbers memories hold: dates, times, money, versions, scores."""
    import random

    rnd = random.Random(seed)
    months = ["January", "March", "May", "July", "October", "December"]

    def pick() -> str:
        y, m, d = rnd.randint(1950, 2030), rnd.randint(1, 12), rnd.randint(1, 28)
        forms = [
            f"on {y}-{m:02d}-{d:02d}",
            f"on {m}/{d}/{y}",
            f"on {d:02d}.{m:02d}.{y}",
            f"on {d} {rnd.choice(months)} {y}",
            f"at {rnd.randint(0, 23):02d}:{rnd.randint(0, 59):02d}",
            f"for ${rnd.randint(1, 99_999):,}.{rnd.randint(0, 99):02d}",
            f"for EUR {rnd.randint(1, 9999)},{rnd.randint(0, 99):02d}",
            f"{rnd.randint(1, 100)}% of the time",
            f"version {rnd.randint(0, 20)}.{rnd.randint(0, 40)}.{rnd.randint(0, 99)}",
            f"v{rnd.randint(0, 9)}.{rnd.randint(0, 9)}.{rnd.randint(0, 9)}.{rnd.randint(0, 9)}",
            f"in {y}, {y + rnd.randint(1, 9)} and {y + rnd.randint(10, 19)}",
            f"{rnd.randint(1, 999)} km in {rnd.randint(1, 12)} hours",
            f"a score of {rnd.randint(0, 9)}-{rnd.randint(0, 9)}",
            f"pages {rnd.randint(1, 300)}-{rnd.randint(301, 900)}",
            f"order #{rnd.randint(10_000, 99_999_999)}",
            f"room {rnd.randint(100, 9999)}",
            f"{rnd.randint(1, 9)} {rnd.randint(100, 999)} {rnd.randint(100, 999)} people",
            f"lat {rnd.uniform(-90, 90):.4f}, lon {rnd.uniform(-180, 180):.4f}",
            f"{rnd.randint(1, 59)}:{rnd.randint(10, 59)}:{rnd.randint(10, 59)} marathon time",
            f"{rnd.randint(1000, 9999)}x{rnd.randint(1000, 9999)} pixels",
        ]
        return rnd.choice(forms)

    return [f"She mentioned it {pick()} and again {pick()}, {pick()}." for _ in range(n)]


def test_number_heavy_sentences_are_not_flagged() -> None:
    texts = _numeric_sentences(3000)
    flagged = [(t, [t[f.start : f.end] for f in detect_pii(t)]) for t in texts]
    assert [f for f in flagged if f[1]] == []


# ---- what a reader sees is what the detectors read (issue 23) -------------------------------

# One character changed in each value: the reader (and a model) still reads the value.
DISGUISED = [
    ("email", "ana\u200b.lima@example.com", "zero-width space"),
    ("email", "ana.lima@exam\u00adple.com", "soft hyphen"),
    ("email", "\uff41na.lima@example.com", "fullwidth letter"),
    ("email", "ana.lim\u0430@example.com", "Cyrillic a"),
    ("email", "ana.lima@ex\u034fample.com", "combining grapheme joiner"),
    ("email", "ana.lima\uff20example.com", "fullwidth at sign"),
    ("payment_card", "4111 1111\u200b 1111 1111", "zero-width space"),
    ("payment_card", "\uff14111 1111 1111 1111", "fullwidth digit"),
    (
        "payment_card",
        "\u0664\u0661\u0661\u0661 \u0661\u0661\u0661\u0661 \u0661\u0661\u0661\u0661 \u0661\u0661\u0661\u0661",
        "Arabic-Indic",
    ),
    ("payment_card", "\u096a\u0967\u0967\u0967111111111111", "Devanagari digits"),
    ("aws_access_key_id", "AKIA\u2060IOSFODNN7EXAMPLE", "word joiner"),
    ("aws_access_key_id", "\u0410KIAIOSFODNN7EXAMPLE", "Cyrillic A"),
    ("aws_access_key_id", "\uff21\uff2b\uff29\uff21IOSFODNN7EXAMPLE", "fullwidth letters"),
    ("iban", "DE89 3704 0044 0532 0130 0\u0660", "an Arabic-Indic zero"),
    ("iban", "DE89\u200b3704 0044 0532 0130 00", "zero-width space"),
]
PLACEHOLDER = {
    "email": "[EMAIL]",
    "payment_card": "[PAYMENT_CARD]",
    "aws_access_key_id": "[CREDENTIAL]",
    "iban": "[BANK_ACCOUNT]",
}


@pytest.mark.parametrize(("kind", "value", "how"), DISGUISED, ids=[f"{k}-{h}" for k, _, h in DISGUISED])
def test_one_invisible_fullwidth_or_lookalike_character_does_not_hide_a_value(kind: str, value: str, how: str) -> None:
    result = redact(f"Saved {value} for later")
    assert result.removed == {kind: 1}, how
    assert result.text == f"Saved {PLACEHOLDER[kind]} for later"


def test_the_spans_found_are_of_the_text_as_given() -> None:
    text = "x \uff41na@example.com\u200b y"
    (finding,) = RegexDetector().detect(text)
    assert text[finding.start : finding.end] == "\uff41na@example.com"


def test_number_checks_read_digits_of_any_script() -> None:
    assert luhn_valid("\u0664" + "\u0661" * 15)  # 4111 1111 1111 1111
    assert not luhn_valid("\u0664" + "\u0661" * 14 + "\u0662")
    assert iban_valid("DE\u0668\u0669370400440532013000")
    assert not iban_valid("DE89370400440532013\u00e9\u00e9")  # letters that are not A-Z: not an IBAN, no error


def test_text_of_other_scripts_is_not_flagged_for_its_lookalike_letters() -> None:
    # Cyrillic, Greek and accented words fold to Latin lookalikes for matching only.
    for text in (
        "\u041c\u043e\u0441\u043a\u0432\u0430 \u0438 \u041a\u0438\u0435\u0432",
        "\u0391\u03b8\u03ae\u03bd\u03b1",
        "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e",
    ):
        assert redact(text).action == "kept"


def test_a_jwt_lookalike_nested_past_the_json_parser_is_no_error() -> None:
    deep = base64.urlsafe_b64encode(b'{"a":' * 3000 + b"1" + b"}" * 3000).decode().rstrip("=")
    text = f"token {deep}.{_b64({'sub': 'x'})}.c2ln kept"
    assert redact(text).text.endswith("kept")
