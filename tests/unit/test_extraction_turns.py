"""LLM-extracted facts carry their message's time and turn, as the rules extractor's do (issue 42
item 6): the conversation's write orders corrections by them and dates each fact by its message."""

from __future__ import annotations

import datetime as dt
import json

from rushmem.extraction.llm import LLMExtractor
from rushmem.extraction.rules import RulesExtractor
from rushmem_contract.models import ChatMessage

T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)


class Answering(LLMExtractor):
    """A chat model that answers with the given memories, worded as models word them."""

    provider = "stand-in"

    def __init__(self, *memories: str) -> None:
        super().__init__("stand-in-model")
        self.answer = json.dumps([{"content": m, "category": "identity"} for m in memories])

    def _complete(self, system: str, user: str) -> str:
        return self.answer


def conversation(*texts: str) -> list[ChatMessage]:
    roles = ["user", "assistant"]
    return [
        ChatMessage(role=roles[i % 2], content=t, created_at=T0 + dt.timedelta(minutes=5 * i))
        for i, t in enumerate(texts)
    ]


def test_each_llm_fact_carries_the_turn_and_time_of_the_message_that_said_it() -> None:
    """Before: turn and stated_at were None for every LLM fact (the conversation's end dated all)."""
    messages = conversation(
        "My daughter is 6.",
        "That's a lovely age!",
        "She loves drawing horses.",
        "Nice.",
        "Actually, my daughter is 7.",
    )
    extractor = Answering(
        "User's daughter is 6 years old", "The user's daughter loves drawing horses", "User's daughter is 7"
    )
    got = [(m.turn, m.stated_at) for m in extractor.extract(messages).memories]
    assert got == [(0, T0), (2, T0 + dt.timedelta(minutes=10)), (4, T0 + dt.timedelta(minutes=20))]
    rules = RulesExtractor().extract(messages).memories
    assert [m.turn for m in rules][:1] == [0]


def test_a_fact_no_user_message_said_is_left_to_the_conversations_end() -> None:
    messages = conversation("Hello!", "Hi, how can I help?")
    (memory,) = Answering("The assistant greeted the user warmly").extract(messages).memories
    assert memory.turn is None and memory.stated_at is None


def test_a_fact_said_twice_is_placed_at_the_last_message_that_said_it() -> None:
    messages = conversation("I live in Munich", "Ok", "As I said, I live in Munich")
    (memory,) = Answering("User lives in Munich").extract(messages).memories
    assert memory.turn == 2
