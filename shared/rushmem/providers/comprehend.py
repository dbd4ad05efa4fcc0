"""Amazon Comprehend ``DetectPiiEntities`` as a PII detector: names and street addresses, which no
pattern finds reliably (with ``RUSHMEM_PII_COMPREHEND``; its findings are merged with the regex
engine's). By default only NAME and ADDRESS are kept, because the regex engine validates the rest
(checksums) and Comprehend's DATE_TIME, AGE or URL would strip ordinary facts from memories.

Limits handled here: a request holds at most 100 KB of UTF-8 (longer texts are split at
whitespace and the offsets shifted back), the languages are English and Spanish, throttling and
server errors are retried under the shared policy (:mod:`rushmem.providers.retry`), and every
failure surfaces as a :class:`~rushmem_contract.errors.ProviderError` named "comprehend".
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from rushmem.config import Settings
from rushmem.folding import Folded, fold, fold_char
from rushmem.privacy import PiiDetector, RegexDetector
from rushmem.privacy.detectors import COMPREHEND_ENTITY_TYPES, Finding, unfolded
from rushmem.providers.aws import aws_client
from rushmem.providers.retry import Retryable, RetryPolicy
from rushmem.usage import record_usage
from rushmem_contract.errors import ConfigurationError, ProviderError

LANGUAGES = ("en", "es")
# The API's limit is 100 KB of UTF-8 per request; a little is kept in reserve.
MAX_TEXT_BYTES = 99_000
DEFAULT_ENTITY_TYPES = frozenset({"NAME", "ADDRESS"})
# Between texts packed into one request: a paragraph break, so no entity runs from one into the next.
_SEPARATOR = "\n\n"

_RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ThrottledException",
        "RequestLimitExceeded",
        "InternalServerException",
        "ServiceUnavailableException",
    }
)


def latin_form(text: str) -> Folded:
    """``text`` for a model of Latin-script languages (English, Spanish): every character that is
    not ASCII nor a Latin letter in its detection form (:func:`rushmem.folding.fold_char`:
    Cyrillic or Greek lookalikes, digits of other scripts, invisible characters), Latin letters
    with their accents kept ("Lucía" stays as written)."""
    return fold(text, lambda ch: ch if ch.isalpha() and "LATIN" in unicodedata.name(ch, "") else fold_char(ch))


def _cut_point(text: str, start: int, end: int) -> int:
    """Where to end a piece in text[start:end]: after a paragraph, line or sentence in its second
    half if there is one (an entity rarely spans those), else at the last space, else at ``end``."""
    half = start + (end - start) // 2
    for separator in ("\n\n", "\n", ". ", "? ", "! ", "; "):
        at = text.rfind(separator, half, end)
        if at > start:
            return at + len(separator)
    at = text.rfind(" ", start + 1, end)
    return at if at > start else end


def chunks(text: str, max_bytes: int = MAX_TEXT_BYTES) -> Iterator[tuple[int, str]]:
    """(offset, piece) pieces of at most ``max_bytes`` UTF-8 bytes, cut between sentences where possible."""
    start = 0
    while start < len(text):
        if len(text[start:].encode()) <= max_bytes:
            yield start, text[start:]
            return
        # Most characters an exact byte budget allows, then back to the last whitespace.
        end, used = start, 0
        while end < len(text):
            size = len(text[end].encode())
            if used + size > max_bytes:
                break
            used += size
            end += 1
        cut = _cut_point(text, start, end)
        yield start, text[start:cut]
        start = cut


class _TooLarge(Exception):
    """Comprehend refused a piece as too large: it is split and sent again."""


class ComprehendPiiDetector:
    """Finds PII with Amazon Comprehend; keeps ``entity_types`` at or above ``min_score``."""

    name = "comprehend"

    def __init__(
        self,
        client: Any | None = None,
        *,
        region: str | None = None,
        language: str = "en",
        entity_types: Collection[str] | None = DEFAULT_ENTITY_TYPES,
        min_score: float = 0.8,
        retry: RetryPolicy | None = None,
        timeout_s: float = 5.0,
        max_text_bytes: int = MAX_TEXT_BYTES,
    ) -> None:
        if language not in LANGUAGES:
            raise ConfigurationError(
                f"Comprehend DetectPiiEntities supports languages {', '.join(LANGUAGES)}, not {language!r}"
            )
        unknown = sorted(set(entity_types or ()) - set(COMPREHEND_ENTITY_TYPES))
        if unknown:
            raise ConfigurationError(f"unknown Comprehend PII entity types: {', '.join(unknown)}")
        self._client = client
        self.region = region
        self.language = language
        self.entity_types = frozenset(entity_types) if entity_types is not None else None
        self.min_score = min_score
        self._retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self.max_text_bytes = max_text_bytes

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> ComprehendPiiDetector:
        """The detector RUSHMEM_PII_COMPREHEND* describe, in the Bedrock region (or the SDK's)."""
        return cls(
            client,
            region=settings.bedrock_region,
            language=settings.pii_comprehend_language,
            entity_types=settings.pii_comprehend_types,
            min_score=settings.pii_comprehend_min_score,
            retry=RetryPolicy.from_settings(settings),
            timeout_s=min(settings.http_timeout_s, 10.0),
        )

    @property
    def client(self) -> Any:
        """The comprehend client; retries are ours (bounded here), so botocore makes one attempt."""
        if self._client is None:
            self._client = aws_client(
                "comprehend", self.region, connect_timeout=min(self.timeout_s, 5), read_timeout=self.timeout_s
            )
        return self._client

    def detect(self, text: str) -> list[Finding]:
        """Findings in ``text``. Comprehend reads it with lookalike letters of other scripts folded
        to the Latin ones they pass for (:func:`latin_form`: a Cyrillic "а" does not hide "Mаria"
        from it), as the regex engine reads the detection form; the spans are of ``text`` as given."""
        folded = latin_form(text)
        findings: list[Finding] = []
        for offset, piece in chunks(folded.text, self.max_text_bytes):
            if not piece.strip():
                continue
            for entity in self._call(piece):
                finding = self._finding(entity, offset, len(piece))
                if finding is not None:
                    findings.append(finding)
        return unfolded(findings, folded)

    def detect_many(self, texts: Sequence[str]) -> list[list[Finding]]:
        """Findings per text, with the texts packed into as few requests as the size limit allows:
        Comprehend bills each request for at least 300 characters, and a memory is often shorter."""
        results: list[list[Finding]] = [[] for _ in texts]
        batch: list[int] = []
        used = 0

        def flush() -> None:
            nonlocal used
            if not batch:
                return
            starts: list[int] = []
            pos = 0
            for i in batch:
                starts.append(pos)
                pos += len(texts[i]) + len(_SEPARATOR)
            joined = _SEPARATOR.join(texts[i] for i in batch)
            for f in self.detect(joined):
                k = bisect.bisect_right(starts, f.start) - 1
                index, base = batch[k], starts[k]
                end = min(f.end, base + len(texts[index]))
                if end > f.start:
                    results[index].append(f.model_copy(update={"start": f.start - base, "end": end - base}))
            batch.clear()
            used = 0

        for i, text in enumerate(texts):
            size = len(text.encode()) + len(_SEPARATOR)
            if size > self.max_text_bytes:
                flush()
                results[i] = self.detect(text)
                continue
            if used + size > self.max_text_bytes:
                flush()
            batch.append(i)
            used += size
        flush()
        return results

    def _finding(self, entity: dict[str, Any], offset: int, length: int) -> Finding | None:
        kind = str(entity.get("Type", ""))
        score = float(entity.get("Score", 0.0))
        if (self.entity_types is not None and kind not in self.entity_types) or score < self.min_score:
            return None
        begin, end = entity.get("BeginOffset"), entity.get("EndOffset")
        if not isinstance(begin, int) or not isinstance(end, int):
            return None
        begin, end = max(0, begin), min(length, end)
        if end <= begin:
            return None
        finding_type, category = COMPREHEND_ENTITY_TYPES.get(kind, (kind.lower() or "other", "other"))
        return Finding(
            type=finding_type,
            category=category,
            start=offset + begin,
            end=offset + end,
            source=self.name,
            score=score,
        )

    def _call(self, piece: str) -> list[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        def attempt() -> list[dict[str, Any]]:
            try:
                response = self.client.detect_pii_entities(Text=piece, LanguageCode=self.language)
            except ClientError as exc:
                error = exc.response.get("Error", {})
                code = str(error.get("Code", "Error"))
                status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
                message = f"{code}: {error.get('Message', '')}".rstrip(": ")
                if code == "TextSizeLimitExceededException" and len(piece) > 1:
                    raise _TooLarge from exc
                if code not in _RETRYABLE_CODES and status < 500:
                    raise ProviderError(self.name, message) from exc
                raise Retryable(message) from exc
            except BotoCoreError as exc:
                raise Retryable(str(exc)) from exc
            # Billed per request: 100-character units, at least three.
            record_usage("pii", self.name, calls=1, characters=len(piece))
            entities = response.get("Entities", [])
            return [e for e in entities if isinstance(e, dict)]

        try:
            return self._retry.call(self.name, attempt)
        except _TooLarge:
            # The byte budget was misjudged: halve the piece and try each half.
            return self._split_call(piece)

    def _split_call(self, piece: str) -> list[dict[str, Any]]:
        half = len(piece) // 2
        cut = piece.rfind(" ", 1, half) if piece.rfind(" ", 1, half) > 0 else half
        left, right = piece[:cut], piece[cut:]
        entities = self._call(left) if left.strip() else []
        shifted: list[dict[str, Any]] = []
        for entity in self._call(right) if right.strip() else []:
            moved = dict(entity)
            for key in ("BeginOffset", "EndOffset"):
                if isinstance(moved.get(key), int):
                    moved[key] += cut
            shifted.append(moved)
        return entities + shifted


def pii_detectors(settings: Settings) -> list[PiiDetector]:
    """The detectors the settings ask for: the regex engine, and Comprehend when a category only it
    finds is acted on (it is billed per character; credentials alone, the default, are the regex
    engine's)."""
    detectors: list[PiiDetector] = [RegexDetector()]
    if settings.pii_comprehend and any(
        settings.pii.mode_for(COMPREHEND_ENTITY_TYPES[name][1]) != "off" for name in settings.pii_comprehend_types
    ):
        detectors.append(ComprehendPiiDetector.from_settings(settings))
    return detectors
