"""Redaction speed: throughput on ordinary text and time on hostile inputs.

Usage: python benchmarks/redact_speed.py [--repeat 3] [--size 200000] [--json]

Redaction runs on every ledger write and on every tool result, so it must be
fast on ordinary text and linear on anything: a pasted log or a 150 KB JSON tool
result must not stall the agent's turn. This prints

* MB/s on ordinary prose, on the repository's own docs and code (read from
  disk), and on a JSON tool result;
* seconds for pathological inputs of ``--size`` characters and for a quarter of
  that, and their ratio (about 4 when the time is linear, about 16 when it is
  quadratic).

Speed is measured here, never asserted by the tests (the machine is shared and
noisy); the tests only check that growth stays far from quadratic.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memtier_plugin.redact import redact  # noqa: E402

PROSE_WORDS = (
    "the user asked to book a flight to Lisbon on Tuesday, aisle seat, vegetarian meal, "
    "hotel under $300 a night; deploy atlas to staging with Postgres 16 at "
    "2026-10-05T09:00:10Z see ep-20261129-3f2a9c1b key: value tokens=40 "
    "https://example.com/docs /srv/atlas/releases/current.tar.gz"
).split()


def prose(n: int, seed: int = 5) -> str:
    rng = random.Random(seed)
    out, size = [], 0
    while size < n:
        w = rng.choice(PROSE_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def repo_text(n: int) -> str:
    """Docs and code of this repository, concatenated up to ``n`` characters."""
    parts, size = [], 0
    for pattern in ("README.md", "docs/*.md", "memtier_plugin/*.py", "workspace-fixtures/README.md"):
        for path in sorted(ROOT.glob(pattern)):
            if path.name == "redact.py":
                continue
            t = path.read_text(encoding="utf-8", errors="replace")
            parts.append(t)
            size += len(t)
            if size >= n:
                return "\n".join(parts)[:n]
    text = "\n".join(parts)
    return (text * (n // max(1, len(text)) + 1))[:n]


def json_blob(n: int, seed: int = 3) -> str:
    """A tool result: a JSON list of records with ids, dates, paths and text."""
    rng = random.Random(seed)
    rows, size = [], 0
    while size < n:
        row = {
            "id": f"ep-2026{rng.randrange(10**4):04d}-{rng.getrandbits(32):08x}",
            "ts": f"2026-10-{rng.randrange(1, 29):02d}T09:{rng.randrange(60):02d}:00Z",
            "path": f"/srv/atlas/releases/{rng.randrange(1000)}/static/app.js",
            "sha": f"{rng.getrandbits(160):040x}",
            "count": rng.randrange(10**6),
            "text": " ".join(rng.choice(PROSE_WORDS) for _ in range(12)),
            "token_count": rng.randrange(4000),
        }
        s = json.dumps(row)
        rows.append(s)
        size += len(s) + 2
    return ("[" + ", ".join(rows) + "]")[:n]


def hostile(n: int) -> dict[str, str]:
    rng = random.Random(11)
    b64 = string.ascii_letters + string.digits + "+/"
    return {
        "'=' * n": "=" * n,
        "'a=' * n/2": "a=" * (n // 2),
        "'token=' * n/6": ("token=" * (n // 6 + 1))[:n],
        "'password: ' * n/10": ("password: " * (n // 10 + 1))[:n],
        "'key' * n/3": ("key" * (n // 3 + 1))[:n],
        "'sk-' * n/3": ("sk-" * (n // 3 + 1))[:n],
        "'glpat-' * n/6": ("glpat-" * (n // 6 + 1))[:n],
        "'eyJ.' * n/4": ("eyJa." * (n // 5 + 1))[:n],
        "'://a:' * n/5": ("://a:" * (n // 5 + 1))[:n],
        "'-----BEGIN ' * n/11": ("-----BEGIN " * (n // 11 + 1))[:n],
        "'--token ' * n/8": ("--token " * (n // 8 + 1))[:n],
        "'mysql -p ' * n/9": ("mysql -p " * (n // 9 + 1))[:n],
        "'4111 ' * n/5": ("4111 " * (n // 5 + 1))[:n],
        "'1' * n": "1" * n,
        "'a' * n": "a" * n,
        "random base64": "".join(rng.choice(b64) for _ in range(n)),
        "'my password is ' * n/16": ("my password is " * (n // 15 + 1))[:n],
        "json tool result": json_blob(n),
    }


def best(fn, arg, repeat: int) -> float:
    t_best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(arg)
        t_best = min(t_best, time.perf_counter() - start)
    return t_best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--size", type=int, default=200_000, help="characters of each hostile input")
    ap.add_argument("--only", default="", help="run only hostile inputs whose name contains this")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args(argv)

    result: dict[str, dict] = {"throughput_mb_s": {}, "hostile_s": {}}
    small = [prose(200, seed=i) for i in range(5_000)]
    t = best(lambda items: [redact(s) for s in items], small, args.repeat)
    result["throughput_mb_s"]["prose, 200-char strings"] = sum(map(len, small)) / t / 1e6
    for name, text in (("prose, one 1 MB string", prose(1_000_000)),
                       ("repo docs and code, 1 MB", repo_text(1_000_000)),
                       ("json tool result, 1 MB", json_blob(1_000_000))):
        result["throughput_mb_s"][name] = len(text) / best(redact, text, args.repeat) / 1e6
    n = args.size
    big, quarter = hostile(n), hostile(n // 4)
    for name, text in big.items():
        if args.only and args.only not in name:
            continue
        t_big = best(redact, text, 1)
        t_small = best(redact, quarter[name], 1)
        result["hostile_s"][name] = {"n": round(t_big, 4), "n/4": round(t_small, 4),
                                     "ratio": round(t_big / max(t_small, 1e-6), 1)}
    if args.json:
        print(json.dumps(result))
        return 0
    for name, mbs in result["throughput_mb_s"].items():
        print(f"{name:32} {mbs:8.2f} MB/s")
    print(f"\n{'hostile input (n=' + str(n) + ')':32} {'n s':>9} {'n/4 s':>9} {'ratio':>6}")
    for name, r in result["hostile_s"].items():
        print(f"{name:32} {r['n']:9.4f} {r['n/4']:9.4f} {r['ratio']:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
