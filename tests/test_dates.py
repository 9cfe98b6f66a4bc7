"""Tests for memtier_plugin.dates: resolution table, timestamps, keys."""

from datetime import date, datetime, timedelta, timezone

import pytest

from memtier_plugin.dates import DateSpan, annotate, date_keys, find_dates, parse_timestamp

THU = date(2023, 5, 4)          # a Thursday
SUN = datetime(2023, 5, 7, 18)  # a Sunday evening
JAN = date(2023, 1, 15)
OCT = date(2023, 10, 10)
D = date.fromisoformat

# (text, ref, expected start, expected end); one span expected.
CASES = [
    ("I did it today", THU, "2023-05-04", "2023-05-04"),
    ("yesterday I ran", THU, "2023-05-03", "2023-05-03"),
    ("the day before yesterday", THU, "2023-05-02", "2023-05-02"),
    ("see you tomorrow", THU, "2023-05-05", "2023-05-05"),
    ("Tonight we cook", THU, "2023-05-04", "2023-05-04"),
    ("this morning I woke early", THU, "2023-05-04", "2023-05-04"),
    ("last night was fun", THU, "2023-05-03", "2023-05-03"),
    ("met Ann last Tuesday", THU, "2023-05-02", "2023-05-02"),
    ("last Thursday", THU, "2023-04-27", "2023-04-27"),       # strictly before ref
    ("this past Friday", THU, "2023-04-28", "2023-04-28"),
    ("next Tuesday", THU, "2023-05-09", "2023-05-09"),
    ("next Thursday", THU, "2023-05-11", "2023-05-11"),       # strictly after ref
    ("this Saturday", THU, "2023-05-06", "2023-05-06"),
    ("on Monday I went", THU, "2023-05-01", "2023-05-01"),
    ("last week", THU, "2023-04-24", "2023-04-30"),
    ("this week", THU, "2023-05-01", "2023-05-07"),
    ("next week", SUN, "2023-05-08", "2023-05-14"),
    ("last month", JAN, "2022-12-01", "2022-12-31"),
    ("this month", THU, "2023-05-01", "2023-05-31"),
    ("next month", THU, "2023-06-01", "2023-06-30"),
    ("last year", THU, "2022-01-01", "2022-12-31"),
    ("next year", THU, "2024-01-01", "2024-12-31"),
    ("last weekend", THU, "2023-04-29", "2023-04-30"),
    ("this weekend", THU, "2023-05-06", "2023-05-07"),
    ("next weekend", THU, "2023-05-13", "2023-05-14"),
    ("over the weekend", SUN, "2023-05-06", "2023-05-07"),
    ("3 days ago", THU, "2023-05-01", "2023-05-01"),
    ("a few days ago", THU, "2023-05-01", "2023-05-01"),
    ("two weeks ago", THU, "2023-04-17", "2023-04-23"),
    ("a couple of weeks ago", THU, "2023-04-17", "2023-04-23"),
    ("a week ago", THU, "2023-04-24", "2023-04-30"),
    ("two months ago", THU, "2023-03-01", "2023-03-31"),
    ("six months ago", JAN, "2022-07-01", "2022-07-31"),
    ("2 years ago", THU, "2021-01-01", "2021-12-31"),
    ("in 2 days", THU, "2023-05-06", "2023-05-06"),
    ("in three weeks", THU, "2023-05-22", "2023-05-28"),
    ("2 weeks from now", THU, "2023-05-15", "2023-05-21"),
    ("in a month", THU, "2023-06-01", "2023-06-30"),
    ("the past 3 days", THU, "2023-05-01", "2023-05-04"),
    ("in the last two weeks", THU, "2023-04-20", "2023-05-04"),
    ("over the past month", THU, "2023-04-04", "2023-05-04"),
    ("earlier this month", THU, "2023-05-01", "2023-05-03"),
    ("earlier this year", THU, "2023-01-01", "2023-05-03"),
    ("later this week", THU, "2023-05-05", "2023-05-07"),
    ("recently", THU, "2023-04-20", "2023-05-04"),
    ("May 8", THU, "2023-05-08", "2023-05-08"),
    ("May 8th, 2023", JAN, "2023-05-08", "2023-05-08"),
    ("8 May 2023", JAN, "2023-05-08", "2023-05-08"),
    ("the 8th of May", THU, "2023-05-08", "2023-05-08"),
    ("on Sept. 3", THU, "2022-09-03", "2022-09-03"),           # month after ref's -> last year
    ("Dec 25, 2022", THU, "2022-12-25", "2022-12-25"),
    ("in May", THU, "2023-05-01", "2023-05-31"),
    ("in June", THU, "2022-06-01", "2022-06-30"),
    ("since March", THU, "2023-03-01", "2023-03-31"),
    ("last May", THU, "2022-05-01", "2022-05-31"),
    ("next May", THU, "2024-05-01", "2024-05-31"),
    ("this May.", JAN, "2023-05-01", "2023-05-31"),
    ("early June", OCT, "2023-06-01", "2023-06-10"),
    ("in late February", THU, "2023-02-21", "2023-02-28"),
    ("mid-March", THU, "2023-03-11", "2023-03-20"),
    ("in May 2021", THU, "2021-05-01", "2021-05-31"),
    ("Jan 2020", THU, "2020-01-01", "2020-01-31"),
    ("2023-05-08", THU, "2023-05-08", "2023-05-08"),
    ("at 2023-05-08T10:00:00Z", THU, "2023-05-08", "2023-05-08"),
    ("2023/05/20", THU, "2023-05-20", "2023-05-20"),
    ("5/8/2023", THU, "2023-05-08", "2023-05-08"),
    ("12/25/22", THU, "2022-12-25", "2022-12-25"),
    ("in 2022", THU, "2022-01-01", "2022-12-31"),
    ("back in 2019", THU, "2019-01-01", "2019-12-31"),
    ("last summer", THU, "2022-06-01", "2022-08-31"),
    ("last summer", OCT, "2023-06-01", "2023-08-31"),
    ("this spring", THU, "2023-03-01", "2023-05-31"),
    ("next winter", THU, "2023-12-01", "2024-02-29"),
    ("last winter", JAN, "2021-12-01", "2022-02-28"),
    ("this winter", JAN, "2022-12-01", "2023-02-28"),
    ("in the fall", OCT, "2023-09-01", "2023-11-30"),
    ("summer of 2021", THU, "2021-06-01", "2021-08-31"),
    ("LAST TUESDAY", THU, "2023-05-02", "2023-05-02"),
]


@pytest.mark.parametrize("text,ref,start,end", CASES, ids=[f"{c[0]}@{c[1]}" for c in CASES])
def test_find_dates_table(text, ref, start, end):
    spans = find_dates(text, ref)
    assert len(spans) == 1, spans
    assert (spans[0].start, spans[0].end) == (D(start), D(end))
    assert spans[0].surface.lower() in text.lower()


NEGATIVES = [
    "I may go to the store",
    "May I ask you something?",
    "This may take a while",
    "these 2 may help",
    "they march on the capital",
    "the march was long",
    "I teach Sunday school",
    "we went to the hot spring",
    "don't fall over",
    "an august institution",
    "I lifted 2022 pounds",
    "it took in 2000 words",
    "I went to the gym 3 times",
    "the ratio was 1/2",
    "nothing temporal here at all",
    "",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_find_dates_negatives(text):
    assert find_dates(text, THU) == []


def test_multiple_and_order():
    spans = find_dates("Yesterday I booked a flight for May 20, 2023 and in 2022 I went", THU)
    assert [s.surface for s in spans] == ["Yesterday", "May 20, 2023", "in 2022"]
    assert [s.granularity for s in spans] == ["day", "day", "year"]


def test_longest_match_wins():
    (s,) = find_dates("we met in May 8, 2021", THU)
    assert s.start == D("2021-05-08") and s.granularity == "day"


def test_datetime_ref_and_span_type():
    (s,) = find_dates("yesterday", datetime(2023, 5, 4, 23, 59, tzinfo=timezone.utc))
    assert isinstance(s, DateSpan) and s.start == D("2023-05-03")
    with pytest.raises(Exception):
        s.start = D("2020-01-01")  # frozen


@pytest.mark.parametrize("s,expected", [
    ("2023-05-20T02:21:00Z", datetime(2023, 5, 20, 2, 21, tzinfo=timezone.utc)),
    ("2023-05-20T02:21:00", datetime(2023, 5, 20, 2, 21)),
    ("2023-05-20T02:21:00.123+02:00",
     datetime(2023, 5, 20, 2, 21, 0, 123000, tzinfo=timezone(timedelta(hours=2)))),
    ("2023-05-20", datetime(2023, 5, 20)),
    ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21)),
    ("2023/05/20", datetime(2023, 5, 20)),
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
    ("12:05 am on 1 January, 2023", datetime(2023, 1, 1, 0, 5)),
    ("12:30 pm on 1 Jan, 2023", datetime(2023, 1, 1, 12, 30)),
    ("May 8, 2023", datetime(2023, 5, 8)),
    ("8 May 2023", datetime(2023, 5, 8)),
    ("garbage", None),
    ("", None),
    ("2023-13-01", None),
    ("2023/02/30 (Thu) 10:00", None),
])
def test_parse_timestamp(s, expected):
    assert parse_timestamp(s) == expected


def test_annotate_format():
    out = annotate("met Ann last Tuesday", THU)
    assert out == "met Ann last Tuesday [date: d20230502 w2023w18 m202305 y2023 may tuesday]"
    assert annotate("no dates here", THU) == "no dates here"
    month = annotate("in May", THU)
    assert month.endswith("[date: m202305 y2023 may]")
    # two keys-sets merge without duplicates
    both = annotate("yesterday and today", THU)
    assert both.endswith("[date: d20230503 w2023w18 m202305 y2023 may wednesday d20230504 thursday]")


def test_keys_shared_between_question_and_entry():
    # an entry about a day in May shares a key with a question asking "in May"; the query is tokenised,
    # the entry indexed with its annotation, so the month name is the key they share
    from memtier_plugin.tokenize import tokenize

    entry = set(tokenize(annotate("met Ann last Tuesday", THU)))
    assert set(tokenize("What did I do in May?")) <= entry
    week_q = set(date_keys(find_dates("what did I do last week?", date(2023, 5, 10))))
    assert "w2023w18" in week_q and "w2023w18" in entry
    assert all(k.isalnum() for k in entry | week_q)  # one \w+ token each


def test_sentences_without_dates_yield_none():
    # (Speed: benchmarks/text_speed.py, not a test.)
    for w in ("strong", "black", "iced", "sweet", "hot"):
        assert find_dates(f"the user said they like {w} coffee and the blue chair near the window", THU) == []
