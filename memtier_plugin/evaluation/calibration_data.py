"""Labelled candidates for calibration (``memtier train calibration``), read from the dev benchmarks.

Every candidate recall hands to calibration — episodes, facts, standing items,
skills — is a row: its layer, its features (:func:`..recall.calibration.features`)
and whether it applies:

- **LoCoMo**: each conversation written through the ledger (speaker A as the
  user, B as the assistant), the Global layer maintained at each session's
  close as the hooks do, then each question recalled at the day after the last
  session. A candidate applies when it is, or was made from, one of the
  question's evidence turns.
- **PrefEval** (multi variant, through the host as ``memtier eval prefeval``
  runs it): a candidate applies to a question when it is, or was made from,
  that question's own preference exchange. The inter chats' user turns are
  recalled too (never written back): no standing item applies to them.

Candidates are gathered wide (``standing.max_items`` 10, ``standing.min_score``
0) so calibration sees the items recall would have cut, not only its top two.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..recall.calibration import features, layer_of

#: what collection changes in the evaluated config: every standing candidate the prompt reaches, none delivered
WIDE = {"standing.max_items": 10, "standing.min_score": 0.0, "calibration.threshold": 1.0}


@dataclass
class Rows:
    """Labelled candidates, grouped by the query they were recalled for."""

    queries: list[dict] = field(default_factory=list)  # {source, prompt, hits: [(layer, features, label, id)]}

    def add_query(self, source: str, hits, label_of: Callable, standing_only: bool = False, prompt: str = "") -> None:
        group = []
        for h in hits:
            layer = layer_of(h)
            if standing_only and layer == "episode":
                continue
            group.append((layer, features(h), 1 if label_of(h) else 0, h.id))
        self.queries.append({"source": source, "prompt": prompt, "hits": group})


def _hits(result) -> list:
    return list(result.candidates or [])


def locomo_rows(path: Path, config_flags: dict, rows: Rows, *, limit: int | None, workdir: Path,
                progress: Callable[[str, int, int], None] | None = None, backends=None) -> None:
    """LoCoMo's conversations (the first ``limit``) into ``rows``."""
    from ..config import load_config
    from ..events import HookContext
    from ..memory import Memory
    from ..recall.retriever import Retriever
    from . import locomo
    from .runner import Options, _ts, write_sessions
    from .locomo import turn_document

    convs = locomo.load(path)[:limit] if limit else locomo.load(path)
    total = sum(len(c.qa) for c in convs)
    done = 0
    for n, conv in enumerate(convs):
        ws = workdir / f"locomo-{n}"
        shutil.rmtree(ws, ignore_errors=True)
        cfg = load_config(None, flags={**config_flags, **WIDE, "paths.workspace": str(ws)})
        opts = Options(flags={**config_flags, **WIDE}, roles=("user", "assistant"), backends=backends)
        mem = Memory(cfg)
        mem.ledger.fsync = False
        entry_turn: dict[str, str] = {}
        last = 0.0
        for s in conv.sessions:
            start = _ts(s.date)
            last = max(last, start)
            turns = [(t.dia_id, "user" if t.speaker == conv.speaker_a else "assistant", turn_document(t))
                     for t in s.turns]
            turn_of = write_sessions(ws / "memory", [(f"session_{s.index}", start, turns)], "locomo", opts)
            entry_turn.update(turn_of)
            text = {t[0]: (t[1], t[2]) for t in turns}
            messages = [(eid, *text[tid]) for eid, tid in turn_of.items()]
            ctx = HookContext(agent_id="user", session_id=f"session_{s.index}", project="locomo",
                              workspace_dir=str(ws))
            mem.maintain(ctx, messages, start + len(turns))
        mem._retriever = Retriever(cfg, mem.ledger, backends=backends)
        ctx = HookContext(agent_id="user", session_id="question", project="locomo", workspace_dir=str(ws))
        for qa in conv.qa:
            evidence = set(locomo.valid_evidence(conv, qa))
            done += 1
            if not evidence:
                continue
            result = mem.recall(qa.question, ctx, last + 86400.0, record_trace=False)
            rows.add_query("locomo", _hits(result),
                           lambda h: any(entry_turn.get(e) in evidence for e in (h.id, *h.sources)),
                           prompt=qa.question)
            if progress:
                progress("locomo", done, total)
        mem.close()
        shutil.rmtree(ws, ignore_errors=True)


def prefeval_rows(path: Path, config, rows: Rows, *, limit: int | None, inter_prompts: int, workdir: Path,
                  turns: int = 300, progress: Callable[[str, int, int], None] | None = None, seed: int = 0) -> None:
    """PrefEval multi (explicit and choice forms, the first ``limit`` questions of each) into ``rows``, and
    ``inter_prompts`` of the inter chats' user turns per user workspace as standing negatives."""
    from . import prefeval as pe

    root = pe.find_root(path)
    inter_raw = pe.load_inter(root, turns)
    inter = pe.inter_sessions(inter_raw)
    user_turns = [text for conv in inter_raw for role, text in conv if role == "user" and text.strip()]
    rng = random.Random(seed)

    class Collect(pe.MemtierPrefEval):
        def score(self, ws, q, lay, keys):
            ctx = self._ctx(ws, f"question-{q.owner}")
            mem = self._memory(ctx)
            gold = lay.gold(q)
            result = mem.recall(q.text, ctx, lay.now, record_trace=False)
            rows.add_query("prefeval", _hits(result), lambda h: pe.covered(h, keys) & gold, prompt=q.text)
            for text in rng.sample(user_turns, min(inter_prompts, len(user_turns))):
                result = mem.recall(text, ctx, lay.now, record_trace=False)
                rows.add_query("prefeval-inter", _hits(result), lambda h: False, standing_only=True,
                               prompt=text)
            return []

    coll = Collect(config, workdir / "prefeval")
    try:
        for form in ("explicit", "choice"):
            lays = pe.layouts("multi", pe.load_items(root, form), inter, limit)
            total = sum(len(lay.questions) for lay in lays)
            done = 0
            for lay in lays:
                coll(lay)
                done += len(lay.questions)
                if progress:
                    progress(f"prefeval {form}", done, total)
    finally:
        coll.close()


def collect(data: Path, config_flags: dict, *, locomo_limit: int | None, prefeval_limit: int | None,
            inter_prompts: int, progress=None, workdir: Path | None = None) -> Rows:
    """Rows from whichever of LoCoMo (``locomo_dev.json``) and PrefEval (``prefeval_dev/``) ``data`` holds."""
    from ..config import load_config
    from ..recall.backends import choose

    rows = Rows()
    tmp = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="memtier-calibration-"))
    try:
        config = load_config(None, flags={**config_flags, **WIDE, "paths.workspace": str(tmp / "none")})
        backends = choose(config)
        if (data / "locomo_dev.json").is_file() and locomo_limit != 0:
            locomo_rows(data / "locomo_dev.json", config_flags, rows, limit=locomo_limit, workdir=tmp,
                        progress=progress, backends=backends)
        if (data / "prefeval_dev").is_dir() and prefeval_limit != 0:
            prefeval_rows(data / "prefeval_dev", config, rows, limit=prefeval_limit, inter_prompts=inter_prompts,
                          workdir=tmp, progress=progress)
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows
