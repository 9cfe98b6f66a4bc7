"""Absolute date resolution for temporal recall (MemTier paper §4).

Entries say "last Tuesday", questions say "in May" or "two weeks ago"; lexical
retrieval misses both. This module resolves date expressions against a
reference time so entries are indexed with the dates they talk about
(:func:`annotate`): an entry saying "last Tuesday" then carries "may" (and the
day, week, month and year keys), which a question asking "in May" matches. Pure stdlib, no state, nothing at import time beyond
compiling regexes.

Conventions (``ref`` is the entry/question time; only its calendar date counts):

* Weeks run Monday..Sunday. "this/last/next week" = current/previous/next such
  week; "N weeks ago" / "in N weeks" = the week containing ref -/+ 7N days.
* "last <weekday>" (and "this past <weekday>") = the most recent such weekday
  strictly before ref (1..7 days back); "next <weekday>" = the soonest strictly
  after ref; "this <weekday>" = that day in ref's week; "on <weekday>" = most
  recent on or before ref (past-tense default).
* Weekend = Sat+Sun. "this weekend" = ref's week's; "last/this past weekend" =
  previous week's; "next weekend" = next week's; "the weekend" = most recent
  weekend starting on or before ref.
* "last night" = ref-1; tonight/this morning/afternoon/evening = ref.
* "N days ago" = that day; "N months/years ago" = that calendar month/year.
  Number words: a/an/one=1, a couple (of)=2, a few/few=3, several=4, two..twenty,
  thirty.
* "the past/last N days|weeks|months|years" = rolling [ref - N units, ref].
* "earlier this week/month/year" = [period start, ref-1]; "later this ..." =
  [ref+1, period end]. "recently"/"lately" = [ref-14, ref] (granularity week).
* Month without year ("in May", "May 8") = the most recent such month not after
  ref's month (so "May 25" with ref May 20 is this May 25). "last May" = the
  most recent May strictly before ref's month, "next May" the soonest strictly
  after, "this May" = ref's year. early/mid/late narrow a month to days
  1-10 / 11-20 / 21-end. "may"/"march" are only months with a day number, a
  year, or a preposition (in/of/since/during/by/until/from/last/next/early/
  late/mid); "this may" only before punctuation or end of text.
* Seasons are northern meteorological (spring Mar-May, summer Jun-Aug, fall/
  autumn Sep-Nov, winter Dec-Feb, named by the year it starts). "last summer" =
  the most recent summer that ended before ref; "this summer" = the one
  starting in ref's year (winter: ref's season-year); "next" = the first
  starting after ref; "in (the) summer" = the most recent started on or before.
* Years only after a preposition ("in 2022") or in full dates.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

__all__ = ["DateSpan", "find_dates", "parse_timestamp", "annotate", "date_keys"]


@dataclass(frozen=True)
class DateSpan:
    """An inclusive calendar range a piece of text refers to."""
    start: date
    end: date
    surface: str
    granularity: str  # "day" | "week" | "month" | "year" | "season"


# ---------------------------------------------------------------- vocabulary
_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
_MONTH_ABBR = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
               "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12}
_WEEKDAYS = {d.lower(): i for i, d in enumerate(calendar.day_name)}
_NUMS = {w: i + 1 for i, w in enumerate(
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_NUMS.update({"a": 1, "an": 1, "thirty": 30, "a couple of": 2, "a couple": 2, "couple of": 2,
              "a few": 3, "few": 3, "several": 4})
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

_MON_FULL = "|".join(sorted(_MONTHS, key=len, reverse=True))
_MON_ANY = "|".join(sorted([*_MONTHS, *_MONTH_ABBR], key=len, reverse=True))
_WD = "|".join(_WEEKDAYS)
_NUM = r"\d{1,3}|" + "|".join(sorted(_NUMS, key=len, reverse=True))
_UNIT = r"(?P<unit>day|week|month|year)s?"
_YR = r"(?:19|20)\d\d"
_MPREP = r"in|of|since|during|by|until|till|from|through|throughout|before|after|around"
_YPREP = r"in|since|during|throughout|until|till|from|back\s+in|the\s+year|(?:end|start|beginning)\s+of|early|late"

# Fast path: one precompiled tokenising regex + a set lookup. Each trigger word
# maps to a class; a pattern runs only when every class it needs is present, so
# text with none of these words (and no digit) costs one findall.
_TRIG = {w: "F" for w in _MONTHS} | {w: "M" for w in _MONTH_ABBR} | {w: "W" for w in _WEEKDAYS}
_TRIG |= {w: "S" for w in _SEASON_START} | {str(i): "D" for i in range(10)}
_TRIG |= {w: "R" for w in "today tonight tomorrow yesterday night morning afternoon evening "
                          "recently lately".split()}
_TRIG |= {w: "U" for w in "day days week weeks weekend month months year years".split()}
for _cls, _words in {"A": "ago back now", "I": "in from", "E": "earlier later", "P": "past last",
                     "L": "last next this the", "Y": _YPREP.replace("\\s+", "|")}.items():
    for _w in re.findall(r"[a-z]+", _words):
        _TRIG[_w] = _TRIG.get(_w, "") + _cls
del _cls, _words, _w
_TOKEN = re.compile(r"[a-z]+|[0-9]")
_NEEDS = {"iso": ("D",), "us": ("D",), "year": ("D", "Y"), "mdy": ("D", "MF"), "dmy": ("D", "MF"),
          "my": ("D", "MF"), "mon": ("F",), "season": ("S",), "word": ("R",), "wday": ("W",),
          "period": ("U", "L"), "rolling": ("U", "P"), "edge": ("U", "E"), "ago": ("U", "A"),
          "ahead": ("U", "I")}

_P = [(name, re.compile(pat, re.I)) for name, pat in [
    ("iso", r"(?<!\d)(?P<y>" + _YR + r")[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})(?!\d)"),
    ("us", r"(?<![\d/])(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>" + _YR + r"|\d\d)(?![\d/])"),
    ("mdy", r"\b(?P<mon>" + _MON_ANY + r")\.?\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b"
            r"(?:,?\s+(?P<y>" + _YR + r")\b)?"),
    ("dmy", r"\b(?P<d>\d{1,2})(?P<suf>st|nd|rd|th)?\s+(?P<of>of\s+)?(?P<mon>" + _MON_ANY +
            r")\b\.?(?:,?\s+(?P<y>" + _YR + r")\b)?"),
    ("my", r"\b(?P<mon>" + _MON_ANY + r")\.?,?\s+(?P<y>" + _YR + r")\b"),
    ("mon", r"\b(?:(?P<rel>last|next|this)\s+|(?P<prep>" + _MPREP + r")\s+(?:the\s+)?)?"
            r"(?:(?P<part>early|mid|late)[\s-]+)?(?P<mon>" + _MON_FULL + r")\b"
            r"(?:,?\s+(?P<y>" + _YR + r")\b)?"),
    ("season", r"\b(?:(?P<rel>last|next|this|this\s+past|past)\s+|(?P<prep>in|during|over|since|"
               r"through|throughout|all)\s+(?:the\s+)?)?(?:(?P<part>early|mid|late)[\s-]+)?"
               r"(?P<s>spring|summer|fall|autumn|winter)\b(?:,?\s+(?:of\s+)?(?P<y>" + _YR + r")\b)?"),
    ("year", r"\b(?:" + _YPREP + r")\s+(?P<y>" + _YR + r")\b(?![-/.:%]\d)"
             r"(?!\s+(?:words|people|steps|dollars|calories|miles|times|pages|points|units|items|"
             r"meters|feet|pounds|lbs|kg|km|hours|minutes|seconds|days|weeks|months|years)\b)"),
    ("word", r"\b(?P<w>today|tonight|tomorrow|yesterday|last\s+night|this\s+(?:morning|afternoon|"
             r"evening)|the\s+day\s+(?:before\s+yesterday|after\s+tomorrow)|recently|lately)\b"),
    ("wday", r"\b(?P<rel>last|next|this|this\s+past|on)\s+(?P<wd>" + _WD + r")\b"),
    ("period", r"\b(?P<rel>last|next|this|this\s+past|the|over\s+the)\s+(?P<p>week|month|year|"
               r"weekend)\b"),
    ("rolling", r"\b(?:the\s+)?(?:past|last)\s+(?:(?P<n>" + _NUM + r")\s+)?" + _UNIT + r"\b"),
    ("edge", r"\b(?P<when>earlier|later)\s+this\s+(?P<p>week|month|year)\b"),
    ("ago", r"\b(?P<n>" + _NUM + r")\s+" + _UNIT + r"\s+(?:ago|back|before\s+now)\b"),
    ("ahead", r"\b(?:in\s+(?P<n1>" + _NUM + r")\s+" + _UNIT.replace("unit", "u1") + r"\b|"
              r"(?P<n2>" + _NUM + r")\s+" + _UNIT.replace("unit", "u2") +
              r"\s+from\s+(?:now|today)\b)"),
]]


# ---------------------------------------------------------------- calendar math
def _add_months(y: int, m: int, k: int) -> tuple[int, int]:
    t = y * 12 + (m - 1) + k
    return t // 12, t % 12 + 1


def _month_span(y: int, m: int) -> tuple[date, date]:
    return date(y, m, 1), date(y, m, calendar.monthrange(y, m)[1])


def _week(d: date) -> tuple[date, date]:
    mon = d - timedelta(days=d.weekday())
    return mon, mon + timedelta(days=6)


def _season(name: str, y: int) -> tuple[date, date]:
    m0 = _SEASON_START[name]
    y2, m2 = _add_months(y, m0, 2)
    return date(y, m0, 1), _month_span(y2, m2)[1]


def _num(s: str) -> int:
    s = re.sub(r"\s+", " ", s.lower())
    return int(s) if s.isdigit() else _NUMS[s]


def _to_date(ref: datetime | date) -> date:
    return ref.date() if isinstance(ref, datetime) else ref


def _mon(s: str) -> int:
    s = s.lower().rstrip(".")
    return _MONTHS.get(s) or _MONTH_ABBR[s]


# ---------------------------------------------------------------- resolvers
def _resolve(kind: str, g: dict, r: date, text: str, pos: int):
    """Return (start, end, granularity) or None for one regex match."""
    if kind in ("iso", "us", "mdy", "dmy"):
        mon_word = (g.get("mon") or "").lower().rstrip(".")
        m = _mon(mon_word) if mon_word else int(g["m"])
        if kind == "dmy" and mon_word in ("may", "march") and not (
                g["suf"] or g["of"] or g["y"] or text[max(0, pos - 3):pos].lower() == "on "):
            return None  # "these 2 may help"
        y = g.get("y")
        d = int(g["d"])
        if y is None:
            y = r.year if m <= r.month else r.year - 1
        else:
            y = int(y) + (2000 if len(y) == 2 else 0)
        if not (1 <= m <= 12 and 1 <= d <= calendar.monthrange(y, m)[1]):
            return None
        return date(y, m, d), date(y, m, d), "day"
    if kind == "my":
        return (*_month_span(int(g["y"]), _mon(g["mon"])), "month")
    if kind == "mon":
        rel, prep, part, mw = g["rel"], g["prep"], g["part"], g["mon"].lower()
        rel = rel.lower() if rel else None
        if not (rel or prep or part or g["y"]):
            return None
        if mw == "may" and rel == "this" and not part and not re.match(r"\s*(?:[.,;:!?)]|$)",
                                                                       text[pos:]):
            return None  # "this may take a while"
        m = _MONTHS[mw]
        if g["y"]:
            y = int(g["y"])
        elif rel == "last":
            y = r.year if m < r.month else r.year - 1
        elif rel == "next":
            y = r.year if m > r.month else r.year + 1
        elif rel == "this":
            y = r.year
        else:
            y = r.year if m <= r.month else r.year - 1
        s, e = _month_span(y, m)
        if part:
            lo, hi = {"early": (1, 10), "mid": (11, 20), "late": (21, e.day)}[part.lower()]
            s, e = date(y, m, lo), date(y, m, hi)
        return s, e, "month"
    if kind == "season":
        rel = re.sub(r"\s+", " ", (g["rel"] or "").lower())
        name = g["s"].lower()
        if not (rel or g["prep"] or g["part"] or g["y"]):
            return None
        if g["y"]:
            s, e = _season(name, int(g["y"]))
        else:
            cands = [_season(name, y) for y in range(r.year - 2, r.year + 2)]
            if rel in ("last", "past", "this past"):
                s, e = [c for c in cands if c[1] < r][-1]
            elif rel == "next":
                s, e = [c for c in cands if c[0] > r][0]
            elif rel == "this":
                s, e = _season(name, r.year - 1 if name == "winter" and r.month <= 2 else r.year)
            else:
                s, e = [c for c in cands if c[0] <= r][-1]
        if g["part"]:
            sub = {"early": 0, "mid": 1, "late": 2}[g["part"].lower()]
            y2, m2 = _add_months(s.year, s.month, sub)
            s, e = _month_span(y2, m2)
        return s, e, "season"
    if kind == "year":
        y = int(g["y"])
        return date(y, 1, 1), date(y, 12, 31), "year"
    if kind == "word":
        w = re.sub(r"\s+", " ", g["w"].lower())
        if w in ("recently", "lately"):
            return r - timedelta(days=14), r, "week"
        off = {"yesterday": -1, "last night": -1, "tomorrow": 1,
               "the day before yesterday": -2, "the day after tomorrow": 2}.get(w, 0)
        d = r + timedelta(days=off)
        return d, d, "day"
    if kind == "wday":
        rel = re.sub(r"\s+", " ", g["rel"].lower())
        wd = _WEEKDAYS[g["wd"].lower()]
        delta = wd - r.weekday()
        if rel in ("last", "this past"):
            d = r - timedelta(days=(r.weekday() - wd) % 7 or 7)
        elif rel == "next":
            d = r + timedelta(days=(wd - r.weekday()) % 7 or 7)
        elif rel == "this":
            d = r + timedelta(days=delta)
        else:  # on
            d = r - timedelta(days=(r.weekday() - wd) % 7)
        return d, d, "day"
    if kind == "period":
        rel = re.sub(r"\s+", " ", g["rel"].lower())
        p = g["p"].lower()
        if rel in ("the", "over the") and p != "weekend":
            return None  # "the week"/"the year" alone names no particular one
        if p == "weekend":
            mon = _week(r)[0]
            if rel in ("the", "over the"):
                sat = r - timedelta(days=(r.weekday() - 5) % 7)
                return sat, sat + timedelta(days=1), "week"
            k = {"last": -1, "this past": -1, "this": 0, "next": 1}[rel]
            sat = mon + timedelta(days=5 + 7 * k)
            return sat, sat + timedelta(days=1), "week"
        k = {"last": -1, "this past": -1, "this": 0, "next": 1}[rel]
        if p == "week":
            return (*_week(r + timedelta(days=7 * k)), "week")
        if p == "month":
            return (*_month_span(*_add_months(r.year, r.month, k)), "month")
        return date(r.year + k, 1, 1), date(r.year + k, 12, 31), "year"
    if kind == "rolling":
        n = _num(g["n"]) if g["n"] else 1
        unit = g["unit"].lower()
        if unit == "day":
            s = r - timedelta(days=n)
        elif unit == "week":
            s = r - timedelta(days=7 * n)
        else:
            months = n * (12 if unit == "year" else 1)
            y, m = _add_months(r.year, r.month, -months)
            s = date(y, m, min(r.day, calendar.monthrange(y, m)[1]))
        return s, r, unit
    if kind == "edge":
        p = g["p"].lower()
        ps, pe = (_week(r) if p == "week" else _month_span(r.year, r.month) if p == "month"
                  else (date(r.year, 1, 1), date(r.year, 12, 31)))
        if g["when"].lower() == "earlier":
            return ps, max(ps, r - timedelta(days=1)), p
        return min(pe, r + timedelta(days=1)), pe, p
    if kind in ("ago", "ahead"):
        n = _num(g.get("n") or g.get("n1") or g.get("n2"))
        unit = (g.get("unit") or g.get("u1") or g.get("u2")).lower()
        sign = -1 if kind == "ago" else 1
        if unit == "day":
            d = r + timedelta(days=sign * n)
            return d, d, "day"
        if unit == "week":
            return (*_week(r + timedelta(days=sign * 7 * n)), "week")
        if unit == "month":
            return (*_month_span(*_add_months(r.year, r.month, sign * n)), "month")
        y = r.year + sign * n
        return date(y, 1, 1), date(y, 12, 31), "year"
    return None


def find_dates(text: str, ref: datetime | date) -> list[DateSpan]:
    """All date expressions in ``text`` resolved against ``ref``, in text order.

    Overlapping matches keep the longest (ties: leftmost, then pattern order).
    """
    found = "".join([_TRIG[t] for t in _TOKEN.findall(text.lower()) if t in _TRIG]) if text else ""
    if not found.strip("AIEPLY"):
        return []
    r = _to_date(ref)
    cands = []
    for kind, pat in _P:
        if not all(any(c in found for c in need) for need in _NEEDS[kind]):
            continue
        for mt in pat.finditer(text):
            cands.append((mt.start() - mt.end(), mt.start(), kind, mt))
    cands.sort(key=lambda c: (c[0], c[1]))
    out: list[tuple[int, DateSpan]] = []
    taken: list[tuple[int, int]] = []
    for _, start, kind, mt in cands:
        if any(start < e and s < mt.end() for s, e in taken):
            continue
        try:
            res = _resolve(kind, mt.groupdict(), r, text, mt.end() if kind == "mon" else start)
        except (ValueError, OverflowError, IndexError, KeyError):
            res = None
        if res is None:
            continue
        out.append((start, DateSpan(res[0], res[1], mt.group(0), res[2])))
        taken.append((start, mt.end()))
    return [sp for _, sp in sorted(out, key=lambda x: x[0])]


# ---------------------------------------------------------------- timestamps
_TS_LME = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\(\w+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$")
_TS_LOCOMO = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(.+)$", re.I)
_TS_DMY = re.compile(r"^\s*(\d{1,2})(?:st|nd|rd|th)?\s+(" + _MON_ANY + r")\.?,?\s+(\d{4})\s*$", re.I)
_TS_MDY = re.compile(r"^\s*(" + _MON_ANY + r")\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\s*$", re.I)


def parse_timestamp(s: str) -> datetime | None:
    """Parse a benchmark timestamp; None when unrecognised or invalid.

    Accepts ISO 8601 ("2023-05-20T02:21:00Z" -> tz-aware UTC; offsets kept;
    no zone -> naive), LongMemEval "2023/05/20 (Sat) 02:21", LoCoMo
    "1:56 pm on 8 May, 2023", and "May 8, 2023" / "8 May 2023" (midnight).
    """
    if not isinstance(s, str) or not s.strip():
        return None
    t = s.strip()
    try:
        if mt := _TS_LME.match(t):
            y, mo, d, hh, mm = mt.groups()
            return datetime(int(y), int(mo), int(d), int(hh or 0), int(mm or 0))
        if mt := _TS_LOCOMO.match(t):
            hh, mm, ap, rest = mt.groups()
            day = parse_timestamp(rest)
            h = int(hh) % 12 + (12 if ap.lower() == "p" else 0)
            return day.replace(hour=h, minute=int(mm)) if day else None
        if mt := _TS_DMY.match(t):
            return datetime(int(mt[3]), _mon(mt[2]), int(mt[1]))
        if mt := _TS_MDY.match(t):
            return datetime(int(mt[3]), _mon(mt[1]), int(mt[2]))
        return datetime.fromisoformat(t[:-1] + "+00:00" if t[-1:] in "zZ" else t)
    except (ValueError, KeyError):
        return None


# ---------------------------------------------------------------- indexing keys
def date_keys(spans: list[DateSpan]) -> list[str]:
    """Normalised, tokeniser-safe keys for spans (deduplicated, in order).

    Every covered unit gets a key at each granularity a span is short enough
    for, so any overlap at a shared granularity shares a token:
    ``d20230502`` day (1-day spans) plus the weekday name, ``w2023w18`` ISO week
    (spans <= 14 days), ``m202305`` month plus the month name (spans <= 92
    days), ``y2023`` year (spans <= 366 days). Keys are single ``\\w+`` tokens so
    the shared tokeniser keeps them whole.
    """
    keys: dict[str, None] = {}
    for sp in spans:
        n = (sp.end - sp.start).days + 1
        if n <= 0 or n > 366:
            continue
        days = [sp.start + timedelta(days=i) for i in range(n)]
        if n == 1:
            keys[f"d{sp.start:%Y%m%d}"] = None
        if n <= 14:
            for d in days:
                iy, iw, _ = d.isocalendar()
                keys[f"w{iy}w{iw:02d}"] = None
        if n <= 92:
            for d in days:
                keys[f"m{d:%Y%m}"] = None
        for d in days:
            keys[f"y{d.year}"] = None
        if n <= 92:
            for d in days:
                keys[calendar.month_name[d.month].lower()] = None
        if n == 1:
            keys[calendar.day_name[sp.start.weekday()].lower()] = None
    return list(keys)


def annotate(text: str, ref: datetime | date) -> str:
    """``text`` plus `` [date: <keys>]`` (see :func:`date_keys`), or unchanged.

    Example (ref 2023-05-04): "met Ann last Tuesday" ->
    "met Ann last Tuesday [date: d20230502 w2023w18 m202305 y2023 may tuesday]".
    """
    keys = date_keys(find_dates(text, ref))
    return f"{text} [date: {' '.join(keys)}]" if keys else text
