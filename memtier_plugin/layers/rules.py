"""What a standing rule bounds: the one grammar Hooks and the pre-commit check both read.

A rule or constraint of the Global layer is the user's own words ("production
deploys only on weekdays", "never book flights before 8am", "hotels under $400
a night"). :func:`bounds` reads, once, what those words limit:

* the **action families** they are about (deploy, push, delete, ssh, book, send),
  each with the words that name it in a rule and a pattern for tool names, and
  what a booking rule names as booked (flights, hotels, trains, …: its calls only);
* the **days** a call may not run on (``only on weekdays`` → Sat, Sun; ``never on
  Fridays`` → Fri; ``no deploys during weekends``, ``over the weekend``, ``never deploy Fridays``,
  ``weekdays only``, ``weekends are off limits``; a list is every day of it: ``never on Saturday or
  Sunday``, ``only on Tuesdays and Thursdays``);
* a **time** before which it may not run (``never ... before 8am``), or after which
  (``never ... after 9pm``; a clock is needed: ``after 9`` bounds nothing);
* an **amount** it may not pass (``under $400``, ``$300 max``, ``my budget is $250``,
  ``no more than 300 dollars``: at most; ``at least $50``, ``120 euros or more``: at
  least; ``never over $300``: at most, a negation turning the word round);
* whether it is about **production**.

:func:`memtier_plugin.scheduling.rule_hooks.hook_from_node` turns the bounds into a
Hook predicate (data, checked like a person's file);
:func:`memtier_plugin.intervention.rules.conflicts` checks a proposed call's
arguments against them. Both therefore hold the same rule to the same days.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..vocabulary import WEEKDAYS

#: Action families: (words naming it in a rule, a regex over tool names and commands).
ACTIONS = {
    "deploy": (r"\b(?:deploy\w*|releas\w*|roll ?outs?|ship\w*)\b", r"deploy|release|rollout|ship|publish|promote"),
    "push": (r"\b(?:push\w*|merg\w*)\b", r"push|merge"),
    "delete": (r"\b(?:delet\w*|remov\w*|drop\w*|destroy\w*|truncat\w*|wip\w*)\b",
               r"delete|remove|drop|destroy|truncate|wipe|\brm\b"),
    "ssh": (r"\b(?:ssh\w*|log ?in to|connect\w* to)\b", r"ssh|connect|remote"),
    "book": (r"\b(?:hotels?|book\w*|reserv\w*|flights?|rooms?)\b", r"book|reserv|hotel|flight|room"),
    "send": (r"\b(?:e-?mails?|send\w*|messag\w*|post\w*)\b", r"mail|send|message|post"),
}
#: What a booking rule may name as booked: (words naming it in a rule, a regex over tool names and commands).
#: A rule that names one ("never book flights before 8am", "hotels under $200 a night") is about calls on it only:
#: a flight rule binds no hotel search, a hotel budget no flight.
BOOKED = {
    "flight": (r"\b(?:flights?|airlines?|airfares?|plane tickets?)\b", r"flight|airline|airfare"),
    "hotel": (r"\b(?:hotels?|rooms?|lodging|accommodations?)\b", r"hotel|room|lodging|accommodation"),
    "train": (r"\b(?:trains?|rail)\b", r"train|rail"),
    "car": (r"\b(?:rental cars?|car rentals?|cars?)\b", r"car|rental"),
    "restaurant": (r"\b(?:restaurants?|tables?)\b", r"restaurant|table"),
}
#: Argument names that hold a price (a Hook predicate needs paths) and the words that make a key a price.
PRICE_ARGS = ("price", "price_per_night", "nightly_rate", "rate", "amount", "cost", "total", "fare")
PRICE_KEY = re.compile(r"price|cost|amount|rate|total|fare|usd|eur|budget", re.IGNORECASE)
#: Argument names that say which environment a call targets.
ENV_ARGS = ("env", "environment", "target", "stage")
#: Argument names that schedule a call for later: the day it runs is theirs, not the event's.
WHEN_ARGS = ("at", "when", "date", "start", "schedule", "scheduled", "scheduled_at", "scheduled_for", "run_at", "time")

_DAY_WORD = {d.lower(): d for d in WEEKDAYS} | {"monday": "Mon", "tuesday": "Tue", "wednesday": "Wed",
                                                "thursday": "Thu", "friday": "Fri", "saturday": "Sat", "sunday": "Sun"}
_DAY = r"(?:mondays?|tuesdays?|wednesdays?|thursdays?|fridays?|saturdays?|sundays?|weekdays|weekends?)\b"
# one day word or a list of them ("Saturday or Sunday", "Fridays or weekends", "Friday, Saturday and Sunday")
_DAY_RE = rf"((?:an? |the )?{_DAY}(?:(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)(?:an? |the )?{_DAY})*)"
_ONLY_ON = re.compile(rf"\bonly (?:[\w-]+ ){{0,4}}?(?:on|during) {_DAY_RE}"  # "only deploy on ..."
                      rf"|\b{_DAY_RE}\s+only\b", re.IGNORECASE)  # "weekdays only"
_NOT_ON = re.compile(rf"\b(?:never|not|no|don't|do not)\b[\w ]{{0,30}}? (?:(?:on|during|over|at|in) )?{_DAY_RE}"
                     # "Weekends are off limits for production deploys"
                     rf"|^{_DAY_RE}\s+(?:is|are)\s+(?:off[- ]limits|out|a no[- ]go|off the table)\b", re.IGNORECASE)
_DAY_WORDS = re.compile(_DAY, re.IGNORECASE)
_BEFORE = re.compile(r"\b(?:never|no|not|don't|do not)\b[^.]{0,60}?\bbefore\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?",
                     re.IGNORECASE)
# a time a call may not start after: "never send emails after 9pm", "no flights that land after 23:30" (a clock is
# needed: "after 9" alone says neither 9am nor 9pm, so it bounds nothing)
_AFTER = re.compile(r"\b(?:never|no|not|don't|do not)\b[^.]{0,60}?\bafter\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?",
                    re.IGNORECASE)
# an amount: "$300", "€80", "300 dollars", "250 euros", "300 USD"
_MONEY = r"(?P<money>[$€£]\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s?(?:dollars|usd|euros?|eur|pounds|gbp|bucks)\b)"
# the words of a floor (every other bound word caps)
_FLOOR = ("over", "above", "more than", "at least", "no less than", "minimum", "or more", "and up", "or above")
# the bound's word before the amount ("under $400", "my budget is $250") or after it ("$300 max", "$150/night max",
# "120 euros a night or more")
_AMOUNT_BEFORE = re.compile(r"\b(?P<word>under|below|less than|at most|no more than|no less than|up to|"
                            r"max(?:imum)?(?: of)?|within|over|above|more than|at least|minimum(?: of)?|"
                            r"budget(?: is| of)?(?: now)?(?: up to)?:?)\s+" + _MONEY, re.IGNORECASE)
_AMOUNT_AFTER = re.compile(_MONEY + r"(?:\s*(?:/|an?|per)\s*[a-z]+)?\s+(?P<word>max(?:imum)?|tops|at most|or less|"
                           r"or under|and under|or more|minimum|at least|and up|or above)\b", re.IGNORECASE)
# a negation before the amount in its clause turns a floor word into a cap ("never book a hotel over $300") and a
# cap word into a floor ("nothing under $50"); "I don't mind" negates nothing
_NEGATED = re.compile(r"\b(?:never|no|not|nothing|don't(?! mind)|do not(?! mind)|won't|avoid)\b[^.;:,]*$",
                      re.IGNORECASE)
_PROD = re.compile(r"\b(?:production|prod)\b", re.IGNORECASE)
_MODAL = re.compile(r"\b(?:never|don't|do not|always|only|before|after|must)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Bounds:
    """What one rule's words limit (empty fields: no such limit)."""

    families: tuple[str, ...] = ()
    booked: tuple[str, ...] = ()  # what a booking rule names as booked (BOOKED keys); () = any booking
    days: frozenset[str] = frozenset()  # weekdays (``Mon`` … ``Sun``) a call may not run on
    before: int | None = None  # minutes after midnight a call may not start before
    before_text: str = ""  # how the rule says it ("8am")
    after: int | None = None  # minutes after midnight a call may not start after
    after_text: str = ""  # how the rule says it ("9pm")
    amount: float | None = None
    amount_is_minimum: bool = False  # "at least $50": the amount is a floor, not a cap
    amount_text: str = ""  # the amount as the rule writes it ("$400", "250 euros")
    production: bool = False
    modal: bool = False  # never, always, only, must, before, after: the rule binds

    def pattern(self, family: str) -> str:
        """The regex over tool names and commands of the calls this rule is about, in ``family``: a booking
        rule's by what it names as booked, when it names any."""
        if family == "book" and self.booked:
            return "|".join(BOOKED[o][1] for o in self.booked)
        return ACTIONS[family][1]

    @property
    def limits(self) -> bool:
        """Whether it sets any condition beyond naming an action."""
        return bool(self.days or self.before is not None or self.after is not None or self.amount is not None
                    or self.production)


def days_of(word: str) -> set[str]:
    """The weekdays a day word names ("weekends" → Sat, Sun; "Fridays" → Fri)."""
    w = word.lower().rstrip("s")
    if w == "weekday":
        return set(WEEKDAYS[:5])
    if w == "weekend":
        return {"Sat", "Sun"}
    return {_DAY_WORD.get(w, _DAY_WORD.get(w[:3], ""))} - {""}


def amount_bound(content: str) -> tuple[float, bool, str] | None:
    """(the amount, whether it is a floor, the amount as the rule writes it: "$300", "250 euros") of the first
    bound on an amount in ``content``."""
    found = [m for m in (_AMOUNT_BEFORE.search(content), _AMOUNT_AFTER.search(content)) if m]
    if not found:
        return None
    m = min(found, key=lambda m: m.start())
    word, money = m["word"].lower(), m["money"]
    floor = word in _FLOOR or word.startswith("minimum")
    return float(re.sub(r"[^\d.]", "", money)), floor != bool(_NEGATED.search(content[:m.start()])), money


def minutes(hour: str, minute: str | None, ampm: str | None) -> int:
    """Minutes after midnight of a clock time ("8", None, "am" → 480; "14", "30", None → 870)."""
    h = int(hour) % 12 + (12 if ampm and ampm.lower() == "pm" else 0) if ampm else int(hour)
    return h * 60 + int(minute or 0)


@lru_cache(maxsize=4096)
def bounds(content: str) -> Bounds:
    """What the rule ``content`` limits (cached: rules are read at every pre_tool)."""
    families = tuple(fam for fam, (words, _) in ACTIONS.items() if re.search(words, content, re.IGNORECASE))
    days: set[str] = set()
    for m in _ONLY_ON.finditer(content):
        days |= set(WEEKDAYS) - set().union(*(days_of(w) for w in _DAY_WORDS.findall(m.group(0))))
    for m in _NOT_ON.finditer(content):
        days |= set().union(*(days_of(w) for w in _DAY_WORDS.findall(m.group(0))))
    before = _BEFORE.search(content)
    after = _AFTER.search(content)
    if after and not after.group(3) and int(after.group(1)) < 13:
        after = None  # no clock: am or pm unsaid
    amount = amount_bound(content)
    booked = tuple(o for o, (words, _) in BOOKED.items() if re.search(words, content, re.IGNORECASE)) \
        if "book" in families else ()
    return Bounds(
        families=families, booked=booked, days=frozenset(days),
        before=minutes(before.group(1), before.group(2), before.group(3) or "am") if before else None,
        before_text=before.group(0).split("before")[-1].strip() if before else "",
        after=minutes(after.group(1), after.group(2), after.group(3)) if after else None,
        after_text=after.group(0).split("after")[-1].strip() if after else "",
        amount=amount[0] if amount else None, amount_is_minimum=bool(amount and amount[1]),
        amount_text=amount[2] if amount else "",
        production=bool(_PROD.search(content)), modal=bool(_MODAL.search(content)))
