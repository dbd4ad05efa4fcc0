"""A project's extraction instructions applied to what an extractor returned (pure steps).

The LLM extractors read the instructions in their prompt (:mod:`.prompt`); every extractor's
answer then goes through :func:`apply_categories` (a project category the extractor named becomes
its ``label`` and the built-in category its ``kind`` says). The rules extractor, which reads no
prose, also uses :func:`mentions` for the ``ignore`` phrases and the categories' keywords.
"""

from __future__ import annotations

import functools
import re

from rushmem.extraction.records import Extraction
from rushmem_contract.instructions import ExtractionInstructions, ProjectCategory


@functools.lru_cache(maxsize=512)
def _phrase(phrase: str) -> re.Pattern[str]:
    # Whole words, case-insensitive: "tv" does not match "tvOS", "work" does not match "works".
    return re.compile(rf"(?<!\w){re.escape(phrase.casefold())}(?!\w)")


def mentions(text: str, phrases: list[str]) -> bool:
    """Whether ``text`` contains one of ``phrases`` as whole words (case-insensitive)."""
    folded = text.casefold()
    return any(_phrase(p).search(folded) for p in phrases)


def category_for(text: str, instructions: ExtractionInstructions) -> ProjectCategory | None:
    """The first project category whose name or a keyword ``text`` mentions."""
    for category in instructions.categories:
        if mentions(text, [category.name.replace("_", " "), category.name, *category.keywords]):
            return category
    return None


def apply_categories(extraction: Extraction, instructions: ExtractionInstructions | None) -> Extraction:
    """A memory whose category the extractor named as one of the project's becomes that category's
    ``label``, stored with the built-in ``kind``; the others keep what they had."""
    if instructions is None or not instructions.categories:
        return extraction
    by_name = {c.name: c for c in instructions.categories}
    for index, memory in enumerate(extraction.memories):
        chosen = by_name.get(memory.label or memory.named_category or "")
        if chosen is not None:
            extraction.memories[index] = memory.model_copy(update={"label": chosen.name, "category": chosen.kind})
    return extraction
