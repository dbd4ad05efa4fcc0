"""Personal data redaction at write time: detectors, the policy, and the redaction itself.

Applied to a memory before it is embedded, so neither the stored text nor its vector carries
the removed values; the memory records only which types were removed and how many.
"""

from rushmem.privacy.detectors import (
    PII_CATEGORIES,
    TYPE_CATEGORY,
    Finding,
    PiiCategory,
    PiiDetector,
    RegexDetector,
    detect_pii,
    iban_valid,
    luhn_valid,
    resolve_overlaps,
)
from rushmem.privacy.redact import (
    PII_MODES,
    SAFE_DEFAULT_POLICY,
    PiiMode,
    PiiPolicy,
    PiiPolicySetting,
    Redaction,
    placeholder,
    redact,
    redact_many,
)

__all__ = [
    "PII_CATEGORIES",
    "PII_MODES",
    "SAFE_DEFAULT_POLICY",
    "TYPE_CATEGORY",
    "Finding",
    "PiiCategory",
    "PiiDetector",
    "PiiMode",
    "PiiPolicy",
    "PiiPolicySetting",
    "Redaction",
    "RegexDetector",
    "detect_pii",
    "iban_valid",
    "luhn_valid",
    "placeholder",
    "redact",
    "redact_many",
    "resolve_overlaps",
]
