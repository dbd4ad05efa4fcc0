"""Dates named in a query ("on 25 May, 2022", "in March 2023", "yesterday") as time windows.

Memories carry the time they were stated; a question that names a day or a month is
usually about what was said then. Recall boosts memories inside such a window (and, with
the date leg, fetches them as candidates). Only unambiguous forms are read: a bare "May" or
"the 3rd" is left alone.

Ranges: a year ("in 2023"), a season of a year ("summer 2021", northern seasons), "N days /
weeks / months ago" (a window around that day), and ordering around a named day: "before
16 May 2023" and "the week before ..." end at that day, "after ..." starts there, each
reaching ``ORDER_SPAN_DAYS`` (questions about "the week before" a date are about that date's
neighbourhood, not the whole past).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable, Sequence

from rushmem.records import Window

_MONTHS = {
    name: number
    for number in range(1, 13)
    for name in (calendar.month_name[number].lower(), calendar.month_abbr[number].lower())
}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"

_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_SEASON_YEAR = re.compile(rf"\b(spring|summer|fall|autumn|winter)\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_YEAR_ONLY = re.compile(rf"\b(?:in|during|of|throughout)\s+(?:early\s+|late\s+|mid-?)?{_YEAR}\b", re.IGNORECASE)
_AGO = re.compile(
    r"\b(\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(day|week|month|year)s?\s+ago\b",
    re.IGNORECASE,
)
_BEFORE = re.compile(r"\b(before|prior to|until|by)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"\b(after|since|following)\s*$", re.IGNORECASE)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
            "nine": 9, "ten": 10}  # fmt: skip
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
# First month and length in months of each (northern) season; winter starts in December.
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "fall": (9, 3), "autumn": (9, 3), "winter": (12, 3)}
ORDER_SPAN_DAYS = 31
# Relative phrases: a single day back, or a span ending now.
_RELATIVE_DAYS = {"today": 0, "yesterday": 1}
_RELATIVE_SPANS = {"last week": 7, "last month": 31, "last year": 366}

# A query names any date it likes ("March 0000", "31 December 9999"), and recall runs "as of"
# any time: windows are clamped to the calendar datetime can hold, and a date it cannot hold
# at all is no window (never an error: the query is the user's text).
_FIRST = dt.datetime.min.replace(tzinfo=dt.UTC)
_LAST = dt.datetime.max.replace(tzinfo=dt.UTC)


def _shift(moment: dt.datetime, days: float) -> dt.datetime:
    try:
        return moment + dt.timedelta(days=days)
    except OverflowError:
        return _LAST if days > 0 else _FIRST


def _day_window(year: int, month: int, day: int, slack_days: int) -> Window | None:
    try:
        start = dt.datetime(year, month, day, tzinfo=dt.UTC)
    except ValueError:  # year 0, month 13, 31 February
        return None
    return _shift(start, -slack_days), _shift(start, 1 + slack_days)


def _month_window(year: int, month: int) -> Window | None:
    try:
        start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    except ValueError:
        return None
    return start, _shift(start, calendar.monthrange(year, month)[1])


def _month(token: str) -> int:
    key = token.lower().rstrip(".")
    return _MONTHS.get(key) or _MONTHS[key[:3]]  # "sept" is "sep"


def _season_window(year: int, season: str) -> Window | None:
    first, months = _SEASONS[season]
    end_month = first + months
    try:
        start = dt.datetime(year, first, 1, tzinfo=dt.UTC)
        end = dt.datetime(year + (end_month - 1) // 12, (end_month - 1) % 12 + 1, 1, tzinfo=dt.UTC)
    except ValueError:  # year 0, or winter of 9999
        return None
    return start, end


# A form: its pattern, what it names from its match (``slack_days`` either side of a named day;
# ``now`` for "ago"), and whether "before" / "after" just ahead of it widens it.
_Form = tuple[re.Pattern[str], Callable[[re.Match[str], int, dt.datetime], Window | None], bool]


def _year_only(match: re.Match[str], slack_days: int, now: dt.datetime) -> Window | None:
    year = int(match[1])
    if not 1900 <= year <= 9998:
        return None
    return dt.datetime(year, 1, 1, tzinfo=dt.UTC), dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC)


def _ago(match: re.Match[str], slack_days: int, now: dt.datetime) -> Window | None:
    count = _NUMBERS.get(match[1].lower()) or int(match[1])
    unit = _UNIT_DAYS[match[2].lower()]
    middle = _shift(now, -count * unit)
    half = max(slack_days, unit // 2)
    return _shift(middle, -half), _shift(middle, half)


# The forms in the order they claim the query's text (a longer form first: "25 May 2022" is not
# read again as "May 2022").
_NAMED: tuple[_Form, ...] = (
    (_DAY_MONTH_YEAR, lambda m, slack, now: _day_window(int(m[3]), _month(m[2]), int(m[1]), slack), True),
    (_MONTH_DAY_YEAR, lambda m, slack, now: _day_window(int(m[3]), _month(m[1]), int(m[2]), slack), True),
    (_ISO_DAY, lambda m, slack, now: _day_window(int(m[1]), int(m[2]), int(m[3]), slack), True),
    (_SEASON_YEAR, lambda m, slack, now: _season_window(int(m[2]), m[1].lower()), False),
    (_MONTH_YEAR, lambda m, slack, now: _month_window(int(m[2]), _month(m[1])), True),
)
_RANGES: tuple[_Form, ...] = ((_YEAR_ONLY, _year_only, False), (_AGO, _ago, False))


def _ordered(query: str, match: re.Match[str], window: Window) -> Window:
    """A named day or month, widened into the span before or after it when the query says so."""
    head = query[: match.start()]
    if _BEFORE.search(head):
        return _shift(window[0], -ORDER_SPAN_DAYS), window[1]
    if _AFTER.search(head):
        return window[0], _shift(window[1], ORDER_SPAN_DAYS)
    return window


def _relative_windows(lowered: str, now: dt.datetime, slack_days: int) -> list[Window]:
    windows: list[Window] = []
    for phrase, back in _RELATIVE_DAYS.items():
        if re.search(rf"\b{phrase}\b", lowered):
            day = _shift(now, -back).astimezone(dt.UTC)
            if w := _day_window(day.year, day.month, day.day, slack_days):
                windows.append(w)
    for phrase, span in _RELATIVE_SPANS.items():
        if re.search(rf"\b{phrase}\b", lowered):
            windows.append((_shift(now, -(span + slack_days)), now))
    return windows


def query_time_windows(query: str, now: dt.datetime, *, slack_days: int = 1, ranges: bool = True) -> list[Window]:
    """Time windows the query names. A named day keeps ``slack_days`` either side, because
    people (and session timestamps) are often a day off. ``ranges``: years and "N ... ago" too."""
    windows: list[Window] = []
    consumed: list[tuple[int, int]] = []
    for pattern, window_of, orderable in _NAMED + (_RANGES if ranges else ()):
        for match in pattern.finditer(query):
            if any(a < match.end() and match.start() < b for a, b in consumed):
                continue  # part of a form read already
            consumed.append(match.span())
            window = window_of(match, slack_days, now)
            if window is not None:
                windows.append(_ordered(query, match, window) if orderable else window)
    windows.extend(_relative_windows(query.lower(), now, slack_days))
    return windows


def in_any_window(timestamps: Sequence[dt.datetime], windows: Sequence[Window]) -> list[bool]:
    return [any(start <= ts < end for start, end in windows) for ts in timestamps]
