"""Sentences per second of the per-entry text passes: date finding, fact extraction, redaction.

Usage: python benchmarks/text_speed.py [--repeat 3] [--json]

Speed is measured here (and by ``memtier bench``), never asserted by the test
suite: machines are shared and noisy. Each pass runs ``--repeat`` times over a
fixed corpus and the best run is reported. Rough targets from the old timed
tests, on an idle core: dates on date-free sentences >= 20,000/s, fact
extraction >= 5,000/s, redaction of 200-character strings >= 20,000/s.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memtier_plugin.dates import find_dates  # noqa: E402
from memtier_plugin.consolidation.facts import extract_facts  # noqa: E402
from memtier_plugin.redact import redact  # noqa: E402

TS = "2023-05-20T10:00:00Z"
THU = date(2023, 5, 4)
FACT_SENTENCES = [
    "I prefer aisle seats.", "I prefer window seats on long flights.", "I hate middle seats.",
    "My favourite cuisine is Thai food.", "Keep hotels under $200 a night.",
    "I can only meet on weekdays.", "Check-in must be no later than 3pm.", "Never book flights before 9am.",
    "We decided to use Postgres for the database.", "Let's go with Redis for caching in Atlas.",
    "My frequent flyer number is DL123456.", "The hotel budget is now $300 a night.",
    "I live at 42 Oak Street, Portland.", "My sister's name is Emma.", "I work at Google as an engineer.",
    "On May 8 I ran my first half marathon.", "Last Tuesday I went to the dentist.",
    "The migration to Postgres failed.", "I'm going to visit Kyoto next month.",
    "Booked: UA 8802 SFO to LIS on Nov 9, 1:15pm, seat 23C (aisle), confirmation K7Q2XZ.",
    "I'm thinking of adopting a second cat, since my tabby Oliver seems lonely during the day.",
]
REDACT_WORDS = (
    "the user asked to book a flight to Lisbon on Tuesday, aisle seat, vegetarian meal, "
    "hotel under $300 a night; deploy atlas to staging with Postgres 16 at "
    "2026-10-05T09:00:10Z see ep-20261129-3f2a9c1b key: value tokens=40 "
    "https://example.com/docs /srv/atlas/releases/current.tar.gz"
).split()


def best_rate(fn, items: list, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return len(items) / best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args(argv)

    no_dates = [f"the user said they like {w} coffee and the blue chair near the window"
                for w in ("strong", "black", "iced", "sweet", "hot")] * 4000
    facts = [f"{s} {i}" for i in range(60) for s in FACT_SENTENCES]  # the suffix defeats caching
    rng = random.Random(5)
    texts = [" ".join(rng.choice(REDACT_WORDS) for _ in range(40))[:200] for _ in range(10_000)]
    rates = {
        "dates_no_dates_per_s": best_rate(lambda s: find_dates(s, THU), no_dates, args.repeat),
        "facts_per_s": best_rate(lambda s: extract_facts(s, timestamp=TS), facts, args.repeat),
        "redact_200_chars_per_s": best_rate(redact, texts, args.repeat),
    }
    if args.json:
        print(json.dumps({k: round(v) for k, v in rates.items()}))
    else:
        for name, rate in rates.items():
            print(f"{name:24} {rate:>10,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
