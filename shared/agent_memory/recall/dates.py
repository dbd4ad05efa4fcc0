"""Dates named in a query ("on 25 May, 2022", "in March 2023", "yesterday") as time windows.

Memories carry the time they were stated; a question that names a day or a month is
usually about what was said then. Recall boosts memories inside such a window. Only
unambiguous forms are read: a bare "May" or "the 3rd" is left alone.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Sequence

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
# Relative phrases: a single day back, or a span ending now.
_RELATIVE_DAYS = {"today": 0, "yesterday": 1}
_RELATIVE_SPANS = {"last week": 7, "last month": 31, "last year": 366}

Window = tuple[dt.datetime, dt.datetime]


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


def query_time_windows(query: str, now: dt.datetime, *, slack_days: int = 1) -> list[Window]:
    """Time windows the query names. A named day keeps ``slack_days`` either side, because
    people (and session timestamps) are often a day off."""
    windows: list[Window] = []
    consumed: list[tuple[int, int]] = []

    def take(match: re.Match[str]) -> bool:
        span = match.span()
        if any(a < span[1] and span[0] < b for a, b in consumed):
            return False
        consumed.append(span)
        return True

    for match in _DAY_MONTH_YEAR.finditer(query):
        if take(match) and (w := _day_window(int(match[3]), _month(match[2]), int(match[1]), slack_days)):
            windows.append(w)
    for match in _MONTH_DAY_YEAR.finditer(query):
        if take(match) and (w := _day_window(int(match[3]), _month(match[1]), int(match[2]), slack_days)):
            windows.append(w)
    for match in _ISO_DAY.finditer(query):
        if take(match) and (w := _day_window(int(match[1]), int(match[2]), int(match[3]), slack_days)):
            windows.append(w)
    for match in _MONTH_YEAR.finditer(query):
        if take(match) and (w := _month_window(int(match[2]), _month(match[1]))):
            windows.append(w)
    lowered = query.lower()
    for phrase, back in _RELATIVE_DAYS.items():
        if re.search(rf"\b{phrase}\b", lowered):
            day = _shift(now, -back).astimezone(dt.UTC)
            if w := _day_window(day.year, day.month, day.day, slack_days):
                windows.append(w)
    for phrase, span in _RELATIVE_SPANS.items():
        if re.search(rf"\b{phrase}\b", lowered):
            windows.append((_shift(now, -(span + slack_days)), now))
    return windows


def in_any_window(timestamps: Sequence[dt.datetime], windows: Sequence[Window]) -> list[bool]:
    return [any(start <= ts < end for start, end in windows) for ts in timestamps]
