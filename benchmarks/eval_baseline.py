"""Plain BM25 baselines on the benchmark dev split, scored with the official protocols.

Usage: python benchmarks/eval_baseline.py [DATA_DIR] [--json OUT]
DATA_DIR defaults to $MEMTIER_DATA, then ../shared/data beside the project.
The expected numbers are the data README's; each line prints got vs expected.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memtier_plugin.evaluation import locomo, longmemeval  # noqa: E402

EXPECTED_LME = {  # strict averaging, data README
    ("session", "recall_all@5"): 0.667,
    ("session", "ndcg_any@5"): 0.760,
    ("session", "recall_all@10"): 0.845,
    ("session", "ndcg_any@10"): 0.801,
    ("turn", "recall_all@5"): 0.452,
    ("turn", "ndcg_any@5"): 0.493,
    ("turn", "recall_all@10"): 0.583,
    ("turn", "ndcg_any@10"): 0.538,
}
EXPECTED_LOCOMO = {
    ("overall", "recall@5"): 0.450,
    ("overall", "recall@10"): 0.529,
    ("overall", "recall@20"): 0.611,
    ("overall", "all@10"): 0.498,
    ("multi-hop", "recall@10"): 0.177,
    ("open-domain", "recall@10"): 0.242,
}
TOL = 0.005


def _data_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    if os.environ.get("MEMTIER_DATA"):
        return Path(os.environ["MEMTIER_DATA"])
    return ROOT.parent / "shared" / "data"


def _check(table: dict, results: dict) -> int:
    bad = 0
    for (group, metric), want in table.items():
        got = results[group][metric]
        ok = abs(got - want) <= TOL
        bad += not ok
        print(f"  {group:12s} {metric:14s} got {got:.3f}  README {want:.3f}  {'ok' if ok else 'MISMATCH'}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", nargs="?", help="folder with longmemeval_s_dev.json.gz and locomo_dev.json")
    ap.add_argument("--json", help="write the full results (incl. per question) to this file")
    args = ap.parse_args(argv)
    data = _data_dir(args.data_dir)
    lme_path, loc_path = data / "longmemeval_s_dev.json.gz", data / "locomo_dev.json"
    if not lme_path.exists() or not loc_path.exists():
        print(f"benchmark data not found in {data}: pass DATA_DIR or set MEMTIER_DATA", file=sys.stderr)
        return 2

    t = time.perf_counter()
    questions = longmemeval.load(lme_path)
    lme = longmemeval.bm25_baseline_longmemeval(questions)
    s = lme["strict"]
    print(f"LongMemEval-S dev: {len(questions)} questions, strict n={s['n']}, "
          f"noabs n={lme['noabs']['n']} ({time.perf_counter() - t:.1f}s)")
    bad = _check(EXPECTED_LME, s)
    tas = s["turn_as_session"]
    print(f"  turn->session recall_all@5 {tas['recall_all@5']:.3f} recall_all@10 {tas['recall_all@10']:.3f} "
          f"ndcg_any@10 {tas['ndcg_any@10']:.3f} (not in README)")

    t = time.perf_counter()
    convs = locomo.load(loc_path)
    loc = locomo.bm25_baseline_locomo(convs)
    print(f"LoCoMo dev: {len(convs)} conversations, {loc['overall']['n']} questions scored, "
          f"{loc['excluded']} without valid evidence ({time.perf_counter() - t:.1f}s)")
    bad += _check(EXPECTED_LOCOMO, loc)
    print(f"  overall      session@1      got {loc['overall']['session@1']:.3f}  README 0.611  "
          "(informational: the README's definition of 'gold session ranked 1st' is not stated; "
          "here = top-ranked turn lies in an evidence session)")
    for name in locomo.CATEGORIES.values():
        if name in loc:
            r = loc[name]
            print(f"  {name:12s} n={r['n']:4d} recall@5 {r['recall@5']:.3f} @10 {r['recall@10']:.3f} @20 {r['recall@20']:.3f}")

    if args.json:
        Path(args.json).write_text(json.dumps({"longmemeval": lme, "locomo": loc}, indent=1))
    print("all within ±%.3f" % TOL if not bad else f"{bad} value(s) differ from the README")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
