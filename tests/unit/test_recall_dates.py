"""Dates named in queries."""

from __future__ import annotations

import datetime as dt

import pytest

from rushmem.recall.dates import in_any_window, query_time_windows

NOW = dt.datetime(2023, 10, 23, 12, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "query",
    [
        "What did Nate do for Joanna on 25 May, 2022?",
        "what happened on May 25th, 2022",
        "the 25th of May 2022",
        "notes from 2022-05-25",
    ],
)
def test_a_named_day_is_a_window_around_that_day(query: str) -> None:
    windows = query_time_windows(query, NOW, slack_days=1)
    assert len(windows) == 1
    inside = dt.datetime(2022, 5, 25, 18, tzinfo=dt.UTC)
    day_after = dt.datetime(2022, 5, 26, 9, tzinfo=dt.UTC)
    far = dt.datetime(2022, 5, 29, tzinfo=dt.UTC)
    assert in_any_window([inside, day_after, far], windows) == [True, True, False]


def test_a_named_month_covers_the_month() -> None:
    windows = query_time_windows("What workout did Maria start in December 2023?", NOW)
    assert windows == [(dt.datetime(2023, 12, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, tzinfo=dt.UTC))]


def test_relative_phrases_use_now() -> None:
    (start, end) = query_time_windows("what did we decide yesterday", NOW, slack_days=0)[0]
    assert start == dt.datetime(2023, 10, 22, tzinfo=dt.UTC) and end == dt.datetime(2023, 10, 23, tzinfo=dt.UTC)
    (start, end) = query_time_windows("changes from last week", NOW)[0]
    assert end == NOW and start < NOW - dt.timedelta(days=7)


@pytest.mark.parametrize(
    "query", ["I may go", "May I ask what the user prefers?", "on the 3rd", "version 2022", "31 February, 2023"]
)
def test_no_dates_no_windows(query: str) -> None:
    assert query_time_windows(query, NOW) == []


def test_a_year_and_a_season_of_a_year_are_ranges() -> None:
    assert query_time_windows("How many times has Melanie gone to the beach in 2023?", NOW) == [
        (dt.datetime(2023, 1, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    ]
    assert query_time_windows("What state did Joanna visit in summer 2021?", NOW) == [
        (dt.datetime(2021, 6, 1, tzinfo=dt.UTC), dt.datetime(2021, 9, 1, tzinfo=dt.UTC))
    ]
    (start, end) = query_time_windows("winter 2022", NOW)[0]
    assert (start.month, end.year, end.month) == (12, 2023, 3)
    assert query_time_windows("in 2023", NOW, ranges=False) == []


def test_n_units_ago_is_a_window_around_that_time() -> None:
    (start, end) = query_time_windows("what did I start two weeks ago", NOW)[0]
    assert start < NOW - dt.timedelta(days=14) < end < NOW
    assert query_time_windows("what did I start two weeks ago", NOW, ranges=False) == []


def test_before_and_after_a_named_day_reach_into_the_named_direction() -> None:
    day = dt.datetime(2023, 4, 10, 12, tzinfo=dt.UTC)
    (start, end) = query_time_windows("What did Maria do last weekend before April 10, 2023?", NOW)[0]
    assert start <= day - dt.timedelta(days=20) and end <= day + dt.timedelta(days=2)
    (start, end) = query_time_windows("What happened after 10 April 2023?", NOW)[0]
    assert start >= day - dt.timedelta(days=2) and end >= day + dt.timedelta(days=20)


@pytest.mark.parametrize("query", ["winter 9999", "in 0001 I", "9999 years ago", "summer 0000"])
def test_ranges_at_the_ends_of_the_calendar_are_no_error(query: str) -> None:
    for window in query_time_windows(query, NOW):
        assert window[0] < window[1]


# ---- never an error, whatever the query names and whenever recall runs (issue 16) ---------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_months = st.sampled_from(["January", "feb", "Sept", "May", "december", "Dec."])
_years = st.integers(0, 9999).map(lambda y: f"{y:04d}")
_days = st.integers(0, 99).map(str)
_dates = st.one_of(
    st.builds("{} {}, {}".format, _days, _months, _years),
    st.builds("{} {} {}".format, _months, _days, _years),
    st.builds("{} {}".format, _months, _years),
    st.builds("{}-{:02d}-{:02d}".format, _years, st.integers(0, 99), st.integers(0, 99)),
    st.sampled_from(["today", "yesterday", "last week", "last month", "last year"]),
)
_moments = st.datetimes(timezones=st.just(dt.UTC)) | st.sampled_from(
    [dt.datetime.min.replace(tzinfo=dt.UTC), dt.datetime.max.replace(tzinfo=dt.UTC)]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_dates, min_size=1, max_size=3).map(" and ".join), _moments)
def test_any_named_date_at_any_time_gives_windows_never_an_error(query: str, now: dt.datetime) -> None:
    for start, end in query_time_windows(f"what happened on {query}?", now):
        assert start <= end


@pytest.mark.parametrize("query", ["in March 0000", "on 0000-03-01", "on 31 February 2023", "on 2023-13-01"])
def test_a_date_the_calendar_lacks_is_no_window(query: str) -> None:
    assert query_time_windows(query, NOW) == []
