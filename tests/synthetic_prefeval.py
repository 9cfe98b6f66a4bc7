"""A small PrefEval-shaped folder written into a test's tmp_path (no shared data needed).

Each item's preference avoids one distinct word; its question names a thing the
word could go into; option 0 leaves the word out, options 1-3 put it in (so a
policy that learns "the option names what the preference avoids" can hold them).
"""

from __future__ import annotations

import json
from pathlib import Path

# topic -> [(avoided word, what the question asks for)]
ITEMS = {
    "food_dishes": [("mushrooms", "pasta dish"), ("anchovies", "pizza topping"), ("coconut", "curry recipe")],
    "home_decor": [("velvet", "sofa fabric"), ("chrome", "lamp finish"), ("wallpaper", "bedroom wall treatment")],
    "music_shows": [("trumpets", "jazz album"), ("autotune", "pop playlist"), ("bagpipes", "folk concert")],
    "travel_trips": [("cruises", "holiday package"), ("hostels", "place to sleep"), ("helicopters", "island tour")],
}
INTER = [
    [("user", "How do I fix a flat bicycle tyre?"), ("assistant", "Remove the wheel, find the puncture, patch it.")],
    [("user", "What is a good way to learn French verbs?"), ("assistant", "Practise a few conjugations every day.")],
    [("user", "Can you explain how compound interest works?"), ("assistant", "Interest is added to the principal.")],
]


def options(word: str, thing: str) -> list[str]:
    return [f"A simple {thing} with fresh seasonal ingredients and nothing unusual.",
            f"A {thing} full of {word}, the classic choice.",
            f"The popular {thing} built around {word}.",
            f"A bold {thing} that features extra {word}."]


def write(root: Path, items: dict = ITEMS, *, break_options: bool = False) -> Path:
    """The folder at ``root`` (created); ``break_options``: one mcq file's question differs from the explicit one."""
    (root / "explicit_preference").mkdir(parents=True)
    (root / "mcq_options").mkdir()
    for topic, rows in items.items():
        explicit, mcq = [], []
        for word, thing in rows:
            pref = f"For any {thing} I avoid {word}, I really dislike {word}."
            question = f"Can you recommend a {thing} for me this weekend?"
            explicit.append({"preference": pref, "question": question, "explanation": f"no {word}"})
            mcq.append({"preference": pref, "question": question, "classification_task_options": options(word, thing)})
        if break_options and topic == sorted(items)[0]:
            mcq[0]["question"] = "Something else entirely?"
        (root / "explicit_preference" / f"{topic}.json").write_text(json.dumps(explicit), encoding="utf-8")
        (root / "mcq_options" / f"{topic}.json").write_text(json.dumps(mcq), encoding="utf-8")
    inter = [{"conversation": [{"role": r, "content": t} for r, t in conv]} for conv in INTER]
    (root / "filtered_inter_turns.json").write_text(json.dumps(inter), encoding="utf-8")
    return root


TURNS = 3  # the inter messages above hold 6 messages = 3 turns
