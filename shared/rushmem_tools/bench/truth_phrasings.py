"""Everyday corrections, ended events and their controls, as people word them (issue 42): each an
earlier statement, a later one, and whether the later one ends the earlier (it then supersedes it,
and the earlier is no longer presented as current) or both hold.

Two sets. ``DEVELOPMENT`` is what the reading of statements (:mod:`rushmem.ingest.facts`) was
written from. ``HELD_OUT`` was written before those rules, in other words and other shapes, and
never used to write or tune them: its figure is the rules' reach on phrasings they were not made
for, and is reported on its own (``rushmem bench truth``, tests/unit/test_ingest_facts.py).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Phrasing:
    earlier: str
    later: str
    ends: bool  # the later statement ends the earlier one
    kind: str  # "correction", "event" (an event a later statement ends), "control"


def _c(earlier: str, later: str) -> Phrasing:
    return Phrasing(earlier, later, True, "correction")


def _e(earlier: str, later: str) -> Phrasing:
    return Phrasing(earlier, later, True, "event")


def _keep(earlier: str, later: str) -> Phrasing:
    return Phrasing(earlier, later, False, "control")


DEVELOPMENT: tuple[Phrasing, ...] = (
    # First person and third person alike, in either order.
    _c("I live in Berlin", "The user lives in Munich"),
    _c("The user lives in Berlin", "I live in Munich now"),
    _c("I'm 31 years old", "I'm 32 years old"),
    _c("The user is 40 years old", "I'm 41"),
    _c("My favourite colour is blue", "My favourite colour is green these days"),
    _c("My dog's name is Rex", "Actually my dog's name is Max"),
    # Moves and switches.
    _c("I live in Berlin", "I moved from Berlin to Munich"),
    _c("I work at Google", "I switched to Microsoft"),
    _c("I use Vim for coding", "I switched from Vim to Emacs"),
    _c("I work as a nurse", "I work as a teacher now"),
    # Ends: not anymore, quit, broke up.
    _c("I'm vegetarian", "I'm not vegetarian anymore"),
    _c("I smoke", "I quit smoking"),
    _c("I have a boyfriend named Tom", "I broke up with Tom"),
    _c("I drink coffee every morning", "I don't drink coffee anymore"),
    _c("I speak French at work", "Since March I speak German at work"),
    # Events a later statement ends.
    _e("The user moved to Berlin.", "The user lives in Munich."),
    _e("I moved to Lisbon", "I live in Porto now"),
    # Controls: both hold.
    _keep("I have a cat named Luna", "I also have a cat named Milo"),
    _keep("I visited Paris", "I visited Rome"),
    _keep("I live in Berlin", "My colleague lives in Paris"),
    _keep("I live in Berlin", "I might move to Munich next year"),
    _keep("I speak English", "I speak Spanish too"),
    _keep("The birthday of the user's friend Ana is on 3 May", "The birthday of the user's friend Rita is on 3 May"),
    _keep("My sister lives in Rome", "I live in Milan"),
)

# Written before the rules, not used to write them.
HELD_OUT: tuple[Phrasing, ...] = (
    _c("I'm based in Amsterdam", "I relocated to Rotterdam last month"),
    _c("I am 27", "I just turned 28"),
    _c("My wife's name is Sara", "My wife is called Lena"),
    _c("I'm a software engineer at Spotify", "I got a new job at Klarna"),
    _c("I'm vegan", "I started eating fish again, so I'm no longer vegan"),
    _c("My favorite band is Muse", "These days my favorite band is Radiohead"),
    _c("I play tennis on weekends", "I stopped playing tennis"),
    _c("I'm dating Marco", "Marco and I split up"),
    _c("My cat is called Whiskers", "Actually, my cat is called Mittens"),
    _c("I drive a Honda Civic", "I sold my Honda and now I drive a Tesla"),
    _c("I write my code in Python", "I've moved on to Rust for all my code"),
    _c("I go to the gym three times a week", "I go to the gym twice a week now"),
    _c("I work for Deloitte", "I left Deloitte in June"),
    _e("The user started a job at Siemens.", "The user works at Bosch now."),
    _e("I adopted a parrot named Kiwi", "Kiwi, my parrot, passed away"),
    _keep("I have two kids", "My brother has three kids"),
    _keep("I've been to Japan", "I've been to Peru as well"),
    _keep("My manager lives in Oslo", "I live in Bergen"),
    _keep("I live in Madrid", "If I ever moved, it would be to Valencia"),
    _keep("I speak Italian", "I'm also fluent in Portuguese"),
    _keep("My friend Jonas works at SAP", "My friend Paul works at SAP"),
    _keep("I own a bike", "I also own a scooter"),
    _keep("I live in Dublin", "I'm thinking about moving to Cork"),
)
