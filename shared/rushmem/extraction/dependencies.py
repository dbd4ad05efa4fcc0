"""What the rules extractor can say about what a fact follows from, without a model: the simple
same-subject case of a place. A fact that names the city of a residence fact of the same answer
("The user's gym is the climbing hall in Berlin Mitte." beside "The user lives in Berlin.") follows
from it, so a later move makes it stale. A fact that follows from the residence without naming it
(a time zone, "my commute is 40 minutes") is not seen: that takes the LLM extractor, or the caller's
``depends_on``. No I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A residence fact as the rules extractor writes it (third person), and the place it names.
_RESIDENCE = re.compile(
    r"^The user (?:now )?(?:lives|is based|is living|resides|has moved|moved|relocated)"
    r"(?: and works)? (?:in|to) (?P<place>[A-Z][\w'-]*(?: [A-Z][\w'-]*)*)"
)


def residence_place(content: str) -> str | None:
    """The city a residence fact names (None: not a residence fact)."""
    found = _RESIDENCE.match(content)
    return found.group("place") if found else None


def place_dependencies(contents: Sequence[str]) -> list[list[int]]:
    """Per fact, the indexes of the residence facts (of ``contents``) whose place it names."""
    places = [(i, place) for i, c in enumerate(contents) if (place := residence_place(c)) is not None]
    out: list[list[int]] = []
    for content in contents:
        if residence_place(content) is not None:
            out.append([])
            continue
        out.append([j for j, place in places if re.search(rf"\b{re.escape(place)}\b", content)])
    return out
