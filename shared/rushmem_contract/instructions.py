"""Extraction instructions: what a project's extractor keeps and ignores, and its own categories.

A user's project (or, through ``AGENT_MEMORY_EXTRACTION_INSTRUCTIONS``, the whole deployment) says
what is worth remembering in its conversations, as mem0's custom instructions and categories and
AgentCore's extraction overrides do. The LLM extractors put them in their system prompt; the rules
extractor applies the ``ignore`` phrases and the categories' ``keywords`` (it cannot read prose).
Every change is a new version; the versions stay readable (``GET /instructions/history``).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from rushmem_contract.models import (
    CATEGORIES,
    AwareDatetime,
    ClosedModel,
    ProjectId,
    UserId,
    WireModel,
    WriteId,
    normalize_content,
    text_checks,
)

# The ceilings: instructions go into every extraction prompt, so they stay short.
MAX_INSTRUCTIONS_CHARS = 2_000
MAX_PHRASES = 30
MAX_PHRASE_CHARS = 200
MAX_PROJECT_CATEGORIES = 20
MAX_CATEGORY_DESCRIPTION_CHARS = 300
MAX_KEYWORDS = 20
MAX_INSTRUCTION_VERSIONS = 100
_CATEGORY_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")


def _visible(value: str) -> str:
    value = normalize_content(value)
    if not value:
        raise ValueError("is empty once whitespace is removed")
    return value


Phrase = Annotated[str, *text_checks(MAX_PHRASE_CHARS, _visible)]
Description = Annotated[str, *text_checks(MAX_CATEGORY_DESCRIPTION_CHARS, _visible)]
InstructionsText = Annotated[str, *text_checks(MAX_INSTRUCTIONS_CHARS, _visible)]


def _category_name(value: str) -> str:
    value = value.strip().lower()
    if not _CATEGORY_NAME.match(value):
        raise ValueError("must be 1-40 characters: a lowercase letter, then letters, digits, '_' or '-'")
    return value


class ProjectCategory(ClosedModel):
    """One of a project's own categories. An extracted memory of this category is stored with
    ``metadata.categories: [name]`` (filter with ``metadata={"categories": [name]}``) and, as its
    ``category``, ``kind`` (one of the built-in categories)."""

    name: Annotated[str, StringConstraints(max_length=40), AfterValidator(_category_name)]
    description: Description | None = None
    kind: str = Field(default="other", description=f"The built-in category stored: one of {', '.join(CATEGORIES)}.")
    keywords: list[Phrase] = Field(
        default_factory=list,
        max_length=MAX_KEYWORDS,
        description="Words or phrases that put a memory in this category (the rules extractor matches them; the "
        "LLM extractors read them with the description).",
    )

    @model_validator(mode="after")
    def _known_kind(self) -> ProjectCategory:
        if self.kind not in CATEGORIES:
            raise ValueError(f"kind must be one of {', '.join(CATEGORIES)}")
        return self


class ExtractionInstructions(ClosedModel):
    """What the extractor keeps and ignores in a project's conversations, and its own categories."""

    instructions: InstructionsText | None = Field(
        default=None,
        description="Free text for the LLM extractors' prompt: what this project's memories are for, what to keep.",
    )
    keep: list[Phrase] = Field(
        default_factory=list, max_length=MAX_PHRASES, description="Topics worth keeping (shown to the LLM extractors)."
    )
    ignore: list[Phrase] = Field(
        default_factory=list,
        max_length=MAX_PHRASES,
        description="Topics never to keep: the LLM extractors are told; the rules extractor drops a sentence "
        "that contains one of these phrases (case-insensitive, whole words).",
    )
    categories: list[ProjectCategory] = Field(default_factory=list, max_length=MAX_PROJECT_CATEGORIES)

    @field_validator("categories")
    @classmethod
    def _distinct_categories(cls, value: list[ProjectCategory]) -> list[ProjectCategory]:
        names = [c.name for c in value]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"the category name {name!r} is given twice (at {names.index(name)} and {i})")
        return value

    @property
    def empty(self) -> bool:
        return not (self.instructions or self.keep or self.ignore or self.categories)

    def texts(self) -> list[tuple[str, str]]:
        """(field path, text) of every text in them, for the checks that read text (secrets)."""
        found: list[tuple[str, str]] = []
        if self.instructions:
            found.append(("instructions", self.instructions))
        found += [(f"keep[{i}]", t) for i, t in enumerate(self.keep)]
        found += [(f"ignore[{i}]", t) for i, t in enumerate(self.ignore)]
        for i, c in enumerate(self.categories):
            if c.description:
                found.append((f"categories[{i}].description", c.description))
            found += [(f"categories[{i}].keywords[{j}]", k) for j, k in enumerate(c.keywords)]
        return found


class InstructionsRequest(ExtractionInstructions):
    """``PUT /instructions``: the instructions of one user's project (none: the user's conversations
    without a project), replacing the previous version (kept in the history)."""

    user_id: UserId | None = None
    project_id: ProjectId | None = None


class StoredInstructions(WireModel):
    """One version of a project's extraction instructions (version 0: none stored; the deployment's
    ``AGENT_MEMORY_EXTRACTION_INSTRUCTIONS`` apply, shown here)."""

    user_id: str
    project_id: str | None = None
    version: int = 0
    instructions: ExtractionInstructions
    source: str | None = None
    created_at: AwareDatetime | None = None
    write_id: WriteId = None
    deployment_default: bool = Field(
        default=False, description="True when these are the deployment's instructions (nothing stored for the project)."
    )


class InstructionsHistory(WireModel):
    """Every stored version, oldest first."""

    versions: list[StoredInstructions]
