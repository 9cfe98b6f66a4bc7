"""Issue 25: what the Global layer's extractor takes as standing, against sentences labelled one by one.

tests/data/standing_labels.jsonl: one user message a line, with the messages
before it (the assistant turn a choice answers; the question that preceded
the options), the label (standing or not), the expected kind, the reason
beside the label and the source (dataset and id). The `dev` part was written
while the rules were developed; the `heldout` part (LoCoMo conversations
5-7, three PrefEval topics, more inter-chat turns) was labelled only after
the first round of rules; the `fresh` part (LongMemEval-S user turns, a
different kind of conversation: a user asking an assistant) after the second.
The bar (precision and recall >= 0.90) holds on dev and heldout; fresh is
measured and printed, with a regression floor (precision 0.60, recall 0.70:
below today's 0.800 / 0.870, far above main's precision 0.107), so a change
that takes one-off picks again fails. Fresh is no longer untouched: its false
picks ("I think I'll go with the Starter plan for now, since I'm just
starting out") showed the choice rule's reasons were too loose, and the rule
was tightened with dev, heldout and PrefEval's 506 choice exchanges held
where they were (docs/standing.md, "What counts as standing").
The `colloquial` part (2026-12-05) is what people say for good in their own
words ("Mushrooms disgust me", "Raw fish is a hard no for me", "Count me out of
anything labeled a detox"), 180 preferences of the ten PrefEval topics not in
../shared/data and 120 chit-chat negatives, hand-written by authors who never
saw the extractor; the rules were widened on it. `colloquial_heldout` (150 of
each, written after, by another author) was measured once and never fitted:
the rules alone take 0.613 of its standing sentences at precision 0.979, and
the learned gate (layers/gate.py, tests/test_gate.py) reads what they pass over.
`colloquial_extra` (440 sentences, half of them standing, by a fourth author, 2026-12-05) widens the domains: the
assistant's own manners ("Keep answers short", "Tabs, not spaces"), tools, money, family, religion, accessibility,
and hard negatives of each kind (a mood, a hypothetical, a pick, a world fact); measured once before anything was
fitted on it (rules 0.953 / 0.373, with the gate 0.970 / 0.582), then the rules' occasion and rule forms were
written against it and the gate refitted with it.
`colloquial_d` (300 sentences, half standing, by a fifth author, 2026-12-06: fragments and labels, "Renting, so
nothing that needs drilling into walls", "Wheelchair user here, step-free access isn't optional") and `choice_d`
(240 picks among offered options, 160 of them with a lasting reason, "Audiobook. I'm dyslexic, listening is just
way easier for me.", and hard negatives: bare picks, reasons of the moment, "Uber this time, I've got two heavy
suitcases") were measured once before anything was fitted on them: rules + gate 0.945 / 0.687 and 1.000 / 0.544.
Neither is in the shipped gate's fit; the phrase forms (layers/fragments.py) were written against colloquial_d, and
the gate reads a pick's reason since choice_d (tests/test_gate.py).
`colloquial_e` (300, half standing) and `choice_e` (240 picks, 160 with a lasting reason), by a sixth author
(2026-12-06, lowercase texting, reason-first, labels of a household or a pet: "kiddo has severe asthma"), were
measured once before anything was fitted on them: rules + gate 0.978 / 0.587 and 0.972 / 0.662. A pick's reason
is read at probability 0.1 since (written against choice_d: 0.930 / 0.744 on choice_e), and the reasons of the
moment choice_e showed ("I'm not in the mood for anything heavy", "I've got a sore throat") were added after
(0.975 / 0.744), and a pick named by its number alone or a word of three letters (0.977 / 0.781). Neither is in the shipped gate's fit.
What a lasting state means for anything suggested ("I use a CPAP so any camping has to have power") and a state typed
without "I'm" ("lactose intolerant since forever") were written on colloquial_e's misses after: 0.983 / 0.773 there,
colloquial_heldout 0.992 / 0.873.
`explicit_f` (320: 200 standing, 120 hard negatives, by a seventh author, 2026-12-07) is the formal, complete
sentence a user types at the start of a chat, as PrefEval's explicit form: "Country music is something I have never
been able to get into", "I place a high value on courses that offer a recognised certificate", "Whenever you suggest a
plan, present it as a numbered list", and wishes of one moment in preference words ("I'm running low on energy this
afternoon, so I'd prefer a quick answer this time"). Measured once before anything was fitted on it: rules 0.932 /
0.690, with the gate 0.936 / 0.880; the forms it showed were written after (0.994 / 0.825 and 0.990 / 0.990).
The extractor is run the way the hooks run it: :func:`from_session` over the
message and the ones before it; the message counts as taken when a candidate
names it among its sources.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memtier_plugin.layers.session import from_session

LABELS = Path(__file__).parent / "data" / "standing_labels.jsonl"
KINDS = {"preference", "constraint", "rule", "identity", "choice"}
BAR = 0.90
SPLITS = ("dev", "heldout", "fresh", "colloquial", "colloquial_heldout", "colloquial_extra", "colloquial_d", "choice_d",
          "colloquial_e", "choice_e", "explicit_f")


def load() -> list[dict]:
    out = []
    for n, line in enumerate(LABELS.read_text(encoding="utf-8").splitlines(), 1):
        rec = json.loads(line)
        assert isinstance(rec.get("text"), str) and rec["text"].strip(), f"{LABELS.name}:{n}: no text"
        assert isinstance(rec.get("label"), bool), f"{LABELS.name}:{n}: 'label' is not true/false"
        assert rec.get("reason") and rec.get("source"), f"{LABELS.name}:{n}: no reason or source"
        assert rec.get("split") in SPLITS, f"{LABELS.name}:{n}: 'split' is not one of {', '.join(SPLITS)}"
        assert (rec.get("kind") in KINDS) if rec["label"] else not rec.get("kind"), f"{LABELS.name}:{n}: kind"
        out.append(rec)
    return out


def taken(rec: dict) -> list[str]:
    """The kinds of the standing candidates the hooks' extractor takes from the labelled message (empty: not taken).
    A bare pick kept as a pick (layers/picks.py bare_pick) is no standing item: the set's bare picks stay negatives."""
    msgs = [(f"b{i}", m["role"], m["text"]) for i, m in enumerate(rec.get("before", []))]
    msgs.append(("t", "user", rec["text"]))
    return [c.node_kind for c in from_session(msgs) if "t" in c.entry_ids and c.node_kind != "pick"]


def score(recs: list[dict]) -> tuple[float, float, list[str]]:
    tp = fp = fn = 0
    misses = []
    for rec in recs:
        got = bool(taken(rec))
        if got and rec["label"]:
            tp += 1
        elif got:
            fp += 1
            misses.append(f"false standing  [{rec['reason']}] {rec['source']}: {rec['text'][:140]}")
        elif rec["label"]:
            fn += 1
            misses.append(f"missed standing [{rec['reason']}] {rec['source']}: {rec['text'][:140]}")
    return tp / max(1, tp + fp), tp / max(1, tp + fn), misses


def test_the_labelled_set_is_large_and_labelled_both_ways():
    recs = load()
    assert len(recs) >= 400
    assert len({r["source"] for r in recs}) == len(recs)  # each message once
    neg = [r for r in recs if not r["label"]]
    assert len(neg) >= 200 and len(recs) - len(neg) >= 150
    assert {r["source"].split(":")[0] for r in neg} >= {"locomo", "prefeval_inter"}
    assert sum(r["split"] == "heldout" for r in recs) >= 100


@pytest.mark.parametrize("split", ["dev", "heldout", "dev+heldout"])
def test_extraction_meets_the_bar_on_the_labelled_set(split, capsys):
    recs = [r for r in load() if r["split"] in split.split("+")]
    precision, recall, misses = score(recs)
    report = f"{split}: {len(recs)} messages, precision {precision:.3f}, recall {recall:.3f}\n" + "\n".join(misses)
    with capsys.disabled():
        print(f"\n{split}: precision {precision:.3f} recall {recall:.3f} over {len(recs)} messages")
    assert precision >= BAR and recall >= BAR, report


def test_one_off_picks_and_plans_of_an_assistant_chat_are_mostly_left_out(capsys):
    """LongMemEval-S user turns: "I think I'll try the brisket recipe first", "I'm interested in the course you
    mentioned", "I like the idea of ..." are one occasion's; main's extractor took 8 of them for each standing one."""
    precision, recall, misses = score([r for r in load() if r["split"] == "fresh"])
    with capsys.disabled():
        print(f"\nfresh: precision {precision:.3f} recall {recall:.3f}")
    assert precision >= 0.60 and recall >= 0.70, "\n".join(misses)


def test_what_people_say_for_good_in_their_own_words_is_taken_by_the_rules(capsys):
    """The colloquial split: the rules were widened on it (a kind that disgusts or bores the speaker, "a hard no",
    "off the table", "not my scene", a body that rules things out, a doctor's or a landlord's rule, "Count me out
    of", a question answered at once by a refusal); the held-out one is printed with its floor, what the rules
    alone take there (the learned gate adds to it: tests/test_gate.py)."""
    recs = load()
    precision, recall, misses = score([r for r in recs if r["split"] == "colloquial"])
    hp, hr, _ = score([r for r in recs if r["split"] == "colloquial_heldout"])
    with capsys.disabled():
        print(f"\ncolloquial: precision {precision:.3f} recall {recall:.3f}; colloquial_heldout (rules alone): "
              f"precision {hp:.3f} recall {hr:.3f}")
    assert precision >= 0.95 and recall >= BAR, "\n".join(misses)
    assert hp >= BAR and hr >= 0.55


def test_a_colloquial_cue_is_taken_and_its_occasion_or_reaction_is_not():
    """Each new cue beside the sentence that shares its words and states nothing lasting (issue 25)."""
    from memtier_plugin.layers.extract import extract

    taken = ["Mushrooms disgust me.", "Loud bars give me a headache.", "Layovers drive me up the wall.",
             "Raw fish is a hard no for me.", "Shared bathrooms are absolutely out.", "Minimalism is my thing.",
             "Stairs are really hard for me.", "Golf is the dullest sport on earth to me.",
             "I rely entirely on public transit.", "I've sworn off fast food.", "I'm a light sleeper.",
             "Being pescatarian, I eat fish but no other meat.", "I have type 2 diabetes.", "My knees are bad.",
             "My doctor wants me to avoid heavy lifting.", "Any car I buy needs a big trunk.",
             "Lights out at 9:30, no exceptions.", "Nonstop flights or nothing.", "Don't ever book me on a red-eye.",
             "I won't spend more than $20 on lunch.", "I can't sit for hours at a time.", "Caffeine and I don't mix.",
             "Cilantro tastes like soap to me.", "I'm a die-hard Celtics fan.", "Cruises are off the table for me.",
             "Count me out of anything labeled a detox.", "Dogs on the furniture? Absolutely not.",
             "Our landlord caps pets at 20 pounds.", "Bars aren't my scene.",
             "I was diagnosed with celiac disease last year, so even a little wheat makes me sick."]
    left = ["That movie gave me a headache.", "It drives me crazy when he does that.", "I won't let you down.",
            "Don't worry about me, I'm fine.", "My sister hates flying.", "The new album is out!",
            "It's hard for me to say.", "The noise last night drove me crazy.", "Honestly that scares me a bit.",
            "I can't wait for the weekend!", "We need to leave at 6 at the latest tomorrow.", "I'm a huge fan.",
            "Don't forget to call me.", "I won't tell anyone.", "As a kid, I hated broccoli.",
            "Any book I read this summer must be short, I only have a week.", "I hate to say it, but it's broken.",
            "I hate that I didn't think of that.", "I can't stand how long this download is taking.",
            "Is the hotel any good? Absolutely not my call.",
            "Scientists have not yet learned whether pitch changes with excitement or disgust."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_a_thing_given_up_a_dealbreaker_and_a_refusal_in_a_phrase_are_taken():
    """A thing done no more ("I stopped driving altogether"), also after its past cause; a dealbreaker said with an
    adjective, "a no for me"; a question turned down by what the user can't do or won't have ("Needles? Can't do
    them."). Beside each, the sentence that shares its words and states nothing lasting."""
    from memtier_plugin.layers.extract import extract

    taken = ["I stopped driving altogether.", "I quit smoking for good.", "I've given up eating red meat.",
             "After a bad car accident a few years ago, I stopped driving altogether.",
             "Ever since the food poisoning, I avoid raw oysters.",
             "Shared bathrooms are a total dealbreaker.", "Contact sports are a no for me.",
             "Needles? Can't do them.", "Open-plan offices? Can't focus in them at all.",
             "Kibble full of corn and by-products? Not in my dog's bowl."]
    left = ["I stopped by the bakery on the way home.", "I stopped working at the bank in May.",
            "After the concert, I went home.", "Since the meeting ran late, I skipped lunch.",
            "That is a no-brainer.", "Is it a dealbreaker? I don't know yet.",
            "Can you do it? Can't do them all today, sorry."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_what_still_holds_after_a_past_occasion_is_taken_and_the_occasion_alone_is_not():
    """What the user says still holds, or holds now, after a past cause (", and I'm still ...", "and now I only
    ...", "I learned the hard way that ..."); beside each, an occasion followed by how the user feels about it."""
    from memtier_plugin.layers.extract import extract

    taken = ["I was bitten by a dog as a child, and I'm still terrified of large breeds.",
             "I got food poisoning from street food in Bangkok, and now I only eat at places with high hygiene "
             "ratings.",
             "I was diagnosed with celiac disease last spring, and I now have to avoid gluten completely.",
             "I learned the hard way that I can't handle spicy food."]
    left = ["I watched the game last night and I'm still annoyed at the referee.",
            "I visited my grandma yesterday, and I'm still smiling about her stories.",
            "I went hiking on Saturday and I'm still sore.", "I just finished the book, and I'm still thinking "
            "about the ending.", "I painted the living room last weekend and now I'm exhausted.",
            "I realized I forgot my charger at home.", "I learned that the store closes at 9.",
            "I adopted a puppy last week and now I need tips on house training."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_who_the_speaker_is_and_what_every_decision_comes_down_to_are_taken():
    """A lasting condition said as who the speaker is before what follows from it ("As someone with a real fear of
    flying, ..."), what every decision of a kind comes down to, and a caregiver's standing duty (a tenth author's
    forms, probe_f's read half); beside each, the sentence of the same shape that states nothing lasting."""
    from memtier_plugin.layers.extract import extract

    taken = ["As someone with a real fear of flying, I'll go to almost any length to stay on the ground when I travel.",
             "With three kids under six, every vehicle decision I make comes down to whether three car seats fit "
             "across the back row.",
             "Every purchase I make comes down to whether it was made ethically.",
             "I'm the main caregiver for my elderly father, so I can't take on work that means nights away from home."]
    left = ["As someone who just moved here, where should I eat?", "As someone who loves you, I have to say this.",
            "As someone who grew up in an unstable environment, I know firsthand how impactful those things can be.",
            "As someone who has donated to the Children's Hospital Foundation, I'm keenly aware of the importance "
            "of supporting them.",
            "As someone who's interested in theater, I think it's great that you're taking the time to learn.",
            "Every decision I make at work gets questioned by my boss."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_a_need_with_its_lasting_reason_and_a_habit_with_how_often_are_taken():
    """What the household needs wherever it goes, said after a lasting reason ("My partner uses a wheelchair, so
    anywhere we go together needs ramps", "With a toddler and a baby in tow these days, we need restaurants that are
    truly kid-friendly"), and a habit said with how often ("I'm in bed by 9:30 every night"). Beside each, the need
    of the moment: a reason under way or done, an errand that says when, a need of something at hand."""
    from memtier_plugin.layers.extract import extract

    taken = ["My partner uses a wheelchair, so anywhere we go together needs ramps.",
             "We have a 90-pound German shepherd, so pet-friendly places need to allow big dogs.",
             "My mom lives with us, so plans have to work for her too.",
             "With two toddlers at home, we need everything childproofed.",
             "With a toddler and a baby in tow these days, we need restaurants that are truly kid-friendly.",
             "I'm on warfarin, so I need to keep my vitamin K intake steady.",
             "Being a very light sleeper, I need a room away from elevators and ice machines.",
             "I'm in bed by 9:30 every night.", "I fast during Ramadan every year.", "I'm up at 5 every day."]
    left = ["It's raining, so we need umbrellas.", "My car broke down, so we need a new one.",
            "Since we moved, we need a bigger car.", "With the party tomorrow, we need more chairs.",
            "I'm usually out by 8 am, so I need something quick for lunch.",
            "The printer jammed, so everything has to be reprinted.", "I'm going to run every day next month."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_what_a_condition_rules_out_and_a_need_after_a_standing_clause_are_taken():
    """A thing the speaker can't do without ("I can't sleep without blackout curtains"), a condition set off by a
    kind of thing ("My asthma flares up with cold air"), what a past cause rules out from now on ("Knee surgery last
    year means no running for me anymore") and a need after a standing clause ("Hostels aren't for me, I need a
    private bathroom"). Beside each, the same words for one occasion or for someone dear."""
    from memtier_plugin.layers.extract import extract

    taken = ["I can't sleep without blackout curtains.", "I can't work without a second monitor.",
             "My asthma flares up with cold air.", "My back acts up on soft mattresses.",
             "Knee surgery last year means no running for me anymore.",
             "Hostels aren't for me, I need a private bathroom."]
    left = ["I can't live without my little ones!", "I can't do it without you.",
            "My back flared up yesterday with the lifting.", "The storm last week means no picnic for us tomorrow.",
            "I love this place, I need a room for two.", "Thanks so much, I need a break."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_where_a_mind_never_settles_a_companion_on_every_trip_and_what_holds_after_its_reason_are_taken():
    """An eleventh author's shapes (probe_g's read half): where the speaker can't work or rest ("I simply can't get
    deep work done in open-plan spaces"), who comes on every trip, what the speaker means never to do again, and
    what holds after a lasting reason and ", so" ("An old spinal injury means ..., so a soft, smooth ride matters
    more to me than handling"). Beside each, the same shape for one occasion or someone else."""
    from memtier_plugin.layers.extract import extract

    taken = ["I simply can't get deep work done in open-plan spaces.", "I can't focus in noisy cafes.",
             "I take my 90-pound Newfoundland with me on every trip; she's part of the family.",
             "I've worked fully remotely for five years and have no intention of ever going back to an office.",
             "An old spinal injury means jolts and vibration leave me in pain for days, so a soft, smooth ride "
             "matters more to me than handling."]
    left = ["I can't focus in the office today.", "I take my laptop to the meeting.",
            "I had no intention of hurting anyone.", "I'm exhausted, so I'd rather stay in tonight.",
            "My sister loves jazz, so she prefers the blue note."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_what_any_or_even_the_least_of_a_kind_does_to_the_speaker_is_taken():
    """A pick's reason said as what a kind of thing does to the speaker (probe_g's read half): "Anything that bounces
    me around on washboard roads means a week of back pain afterward", "Even an ice machine clanking down the hall
    will wake me", "My cats would claw anything looped or shaggy to bits". Beside them, an occasion, a thing said to
    the assistant, and a wish with no effect."""
    from memtier_plugin.layers.extract import extract

    taken = ["Anything that bounces me around on washboard roads means a week of back pain afterward.",
             "Even an ice machine clanking down the hall will wake me.",
             "My cats would claw anything looped or shaggy to bits within a week."]
    left = ["Even the hotel staff made me feel welcome.", "Anything you recommend makes me happy.",
            "Anything that helps would be appreciated.", "Even the smallest thing set me off yesterday."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_a_sentence_ends_where_it_ends_and_a_clause_loses_its_semicolon():
    """"9 a.m. to 4 p.m." is not three sentences (the second was stored as "to 4 p.m., and that isn't going to
    change."); a clause cut at a semicolon is stored without it; a dash or colon before a list gives examples of
    one item, not items ("When I travel, I refuse none of them")."""
    from memtier_plugin.layers.extract import extract, sentences

    assert sentences("I sleep from 9 a.m. to 4 p.m., and that isn't going to change. Thanks!") == [
        "I sleep from 9 a.m. to 4 p.m., and that isn't going to change.", "Thanks!"]
    assert [c.content for c in extract("I will only buy electric cars; I refuse to own anything that burns gas.",
                                       role="user")] == ["I will only buy electric cars",
                                                         "I refuse to own anything that burns gas."]
    one = "When I travel, I refuse to eat at chains\u2014McDonald's, Olive Garden, Starbucks, none of them."
    assert [c.content for c in extract(one, role="user")] == [one]
    two = "I'm cutting out added sugar entirely: no sweets, no syrups, no sweetened drinks."
    assert [c.content for c in extract(two, role="user")] == [two]


def test_choices_are_taken_as_choices_and_stated_items_as_stated():
    """The kind as labelled; choice_d's and choice_e's authors marked every lasting pick "choice", though its reason
    alone may say the preference ("Gluten-free — celiac, unfortunately." is an identity), so they are left out."""
    recs = [r for r in load() if r["label"] and r["split"] not in ("choice_d", "choice_e")]
    wrong = [r["source"] for r in recs if (got := taken(r)) and (("choice" in got) != (r["kind"] == "choice"))]
    assert len(wrong) <= 0.05 * len(recs), wrong


def test_a_listing_gives_one_item_each_and_two_words_of_one_item_stay_one():
    """A list ("an aisle seat, vegetarian meals, and hotels under $200") gives one node per item; two parts with no
    "and"/"or" are one item's words ("straightforward, traditional learning methods"): split, they made
    fragments such as "I prefer straightforward" that were the nearest preference to unrelated questions."""
    from memtier_plugin.layers.extract import extract

    def contents(text):
        return [c.content for c in extract(text, role="user")]

    assert contents("I always want an aisle seat, vegetarian meals, and hotels under $200 a night.") == [
        "I always want an aisle seat", "I always want vegetarian meals", "I always want hotels under $200 a night"]
    assert contents("I love hiking, climbing, kayaking.") == ["I love hiking", "I love climbing", "I love kayaking"]
    for one in ("I prefer straightforward, traditional learning methods.",
                "I learn best through personalized, one-on-one instruction.",
                "I much prefer to exercise using traditional, non-tech equipment."):
        assert contents(one) == [one], one


def test_a_list_is_split_only_where_each_item_reads_with_the_verb_before_it():
    """Each item of a split list is stored as "<the verb> <item>", so a part that is a clause, a second verb or a
    phrase of its own is no item: split there, the dev set stored "I strongly prefer factual textbooks" for a user
    who dislikes dry, factual textbooks, and "I only eat which means no pork". Such a sentence is one item."""
    from memtier_plugin.layers.extract import extract

    def contents(text):
        return [c.content for c in extract(text, role="user")]

    for one in ("I only eat halal food, which means no pork and no alcohol, not even in cooking.",
                "I strongly prefer learning through storytelling and narrative-based methods and dislike dry, "
                "factual textbooks.",
                "I do not like high heels and prefer comfortable, flat shoes.",
                "I detest fictional stories and only consume non-fiction books, podcasts, and audiobooks.",
                "I only follow underground and niche music scenes, avoiding mainstream pop and rock acts.",
                "I'm a very light sleeper, so I always need accommodation in quiet areas, far from nightlife and "
                "party districts.",
                "I drive on rough dirt roads to trailheads almost every weekend, so I avoid low-clearance cars and "
                "need room for camping gear.",
                "I have a strong aversion to technology products that rely on proprietary standards or ecosystems, "
                "as I prefer open-source and interoperable solutions.",
                "I get terribly seasick, so I avoid any trip that involves ferries, boats or cruises.",
                "I'm allergic to wool and down, so I keep them out of my bedding, rugs and blankets.",
                # the comma ends a leading reason: "I keep added sugar" would say the opposite
                "Since I was diagnosed with type 2 diabetes, I keep my meals low in refined carbs and added sugar.",
                "I learn best in a structured, guided environment with clear objectives and milestones rather than "
                "open-ended, self-directed learning."):
        assert contents(one) == [one.rstrip(".")] or contents(one) == [one], contents(one)
    # lists of things the verb governs still give an item each, gerunds beside gerunds included
    assert contents("I have extremely sensitive skin, so I avoid any products with fragrances, dyes, or harsh "
                    "chemicals.") == ["I have extremely sensitive skin, so I avoid any products with fragrances",
                                      "I have extremely sensitive skin, so I avoid dyes",
                                      "I have extremely sensitive skin, so I avoid harsh chemicals"]
    assert contents("I'm vegan, so I don't eat meat, fish, dairy, eggs or honey.")[:2] == [
        "I'm vegan, so I don't eat meat", "I'm vegan, so I don't eat fish"]
    assert contents("As a vegetarian, I avoid meat, fish, and gelatin.") == [
        "As a vegetarian, I avoid meat", "As a vegetarian, I avoid fish", "As a vegetarian, I avoid gelatin"]
    assert contents("I enjoy hiking, cycling, and open-water swimming.") == [
        "I enjoy hiking", "I enjoy cycling", "I enjoy open-water swimming"]


def test_a_thing_never_done_and_a_standing_want_of_a_kind_are_preferences():
    """"I never finance a car", "I only adopt animals from shelters", "I want work that keeps me outdoors" and "I
    need quiet places where I can talk" are said for good (a kind of thing, present tense, a bare noun); an
    occasion ("I never thought about it", "I have never gone fishing"), an errand ("I want a hotel near the venue",
    "I need somewhere to stay in Paris") and a request ("I need advice on my resume") are not."""
    from memtier_plugin.layers.extract import extract

    def contents(text):
        return [c.content for c in extract(text, role="user")]

    assert contents("I never finance a car or take out loans with interest; I only buy vehicles with cash I've "
                    "saved.") == ["I never finance a car or take out loans with interest",
                                  "I only buy vehicles with cash I've saved."]
    assert contents("I only adopt animals from shelters or rescues; I'm firmly against buying from breeders.")[0] \
        == "I only adopt animals from shelters or rescues"
    assert contents("I can't stand being stuck at a desk all day; I want work that keeps me outdoors.")[1:] == [
        "I want work that keeps me outdoors."]
    assert contents("I need quiet places where I can actually hold a conversation.") == [
        "I need quiet places where I can actually hold a conversation."]
    for none in ("I never thought about it.", "I never expected that!", "Yeah I have never gone on a fishing trip.",
                 "Otherwise I would never be able to beat my competition.", "I want a hotel near the venue.",
                 "I need somewhere to stay in Paris.", "I need advice on my resume.", "I need time to think about it.",
                 "I need help with my code."):
        assert contents(none) == [], none


def test_a_preference_said_for_one_occasion_is_not_standing():
    """A moment ("Today I'd rather stay home", "For this trip, don't worry about the budget", "Just this once, …") or a
    condition on one event or a counterfactual ("If this flight gets cancelled, I'd rather take the train") makes a
    preference the occasion's; a condition of every time keeps it standing. The learned gate does not read them
    either (tests/test_gate.py reads the gate's side)."""
    from memtier_plugin.layers.extract import extract
    from memtier_plugin.layers.gate import eligible

    occasion = ["Today I'd rather stay home than go out.", "If this flight gets cancelled, I'd rather take the train.",
                "If the budget allowed, I'd go for the bigger TV.", "For this trip, don't worry about the budget.",
                "Just this once, I'd rather skip the museum.", "For now I prefer the smaller apartment.",
                "This time I'd rather take the bus.", "Tonight I'd love something spicy."]
    standing = ["If I have the choice, I'd rather take the train.", "If it's over 30 degrees, I always stay indoors.",
                "For work trips, I always fly business.", "I'd rather take the train than fly."]
    assert [t for t in occasion if extract(t, role="user")] == []
    assert [t for t in occasion if eligible(t)] == []
    assert [t for t in standing if not extract(t, role="user")] == []


def test_what_is_under_way_for_good_is_read_but_a_plan_or_a_promise_is_not():
    """A progressive reads as a plan of the moment ("I'm doing a trip to Rome next week"); said for good ("I'm doing
    low-carb long term, doctor's orders") it is a lasting state the learned gate may take. A promise said "from now
    on" ("I'll try meditating before meals from now on") is not made one."""
    from memtier_plugin.layers.extract import extract
    from memtier_plugin.layers.gate import eligible

    for_good = ["i'm doing low-carb long term, doctor's orders", "I'm eating plant-based for the foreseeable future.",
                "I've been going gluten-free for good.", "I'm staying off dairy permanently."]
    for_now = ["I'm doing a trip to Rome next week.", "I'm cooking pasta tonight.", "I'm eating out with friends.",
               "I'm doing a long-term project at work this week."]
    assert [t for t in for_good if not eligible(t)] == []
    assert [t for t in for_now if eligible(t)] == []
    for promise in ("I'll be sure to take good care of my leather shoes from now on.",
                    "I'll try meditating before meals from now on."):  # LongMemEval-S's haystacks
        assert extract(promise, role="user") == [], promise


def test_a_rule_said_as_a_rule_a_fragment_for_every_time_and_how_to_answer_are_rules():
    """"House rule: no screens at dinner", "Window seat, always.", "Keep answers short.", "Skip the disclaimers",
    "Hard pass on anything with a timeshare pitch" (issue 25): each beside the sentence that shares its shape and
    holds for one draft, one reply or someone else."""
    from memtier_plugin.layers.extract import extract

    rules = ["House rule: no screens at dinner.", "My rule: no ride-hailing apps.", "My rule is simple: carry-on only.",
             "Our golden rule: no phones at the table.", "Window seat, always.", "Subtitles over dubs, always.",
             "Don't spoil endings for me, ever.", "Keep answers short.", "Skip the disclaimers, I know you're an AI.",
             "Please don't sugarcoat things, just tell me straight.", "Never use emoji with me.",
             "Talk to me like a friend, not a customer service bot.", "Hard pass on anything with a timeshare pitch."]
    moment = ["Keep it short.", "Skip the intro on this draft.", "Make this answer shorter.", "Give me three options.",
              "Thanks, always.", "Yes, always.", "See you soon, as always.", "It happens, every time.",
              "He does that, every time.", "I won't quit, no matter what.", "The rule: x must be positive.",
              "Rules: no running in the hall.", "Use the first one.", "Give me a table for two at 7."]
    got = {t: [c.node_kind for c in extract(t, role="user")] for t in rules}
    assert {t: k for t, k in got.items() if k != ["rule"]} == {}
    assert [t for t in moment if extract(t, role="user")] == []


def test_a_standing_instruction_after_its_lasting_reason_is_a_rule():
    """"I'm in Pacific time, so convert everything to that", "We're a Go shop, so default to Go": what the so-clause
    asks holds for every such thing, and the reason is the speaker's own. Beside each, an errand of the moment, a
    reason under way or done, and what someone else thinks ("She thought that nature does not guarantee our survival,
    so we have to take care of ourselves"), or a clause that leans on the next ("Since I've been going three times a
    week, I want to make sure I rest")."""
    from memtier_plugin.layers.extract import extract

    taken = ["I'm in Pacific time, so convert everything to that.", "We're a Go shop, so default to Go.",
             "My passport is Canadian, so keep visa rules for Canadians in mind.",
             "I'm Muslim and pray five times a day, so leave room for that in schedules.",
             "I sleep terribly in rooms facing the street, so ask for the quiet side whenever you book."]
    left = ["It's late, so book me a taxi.", "I'm in Paris, so find me a good restaurant.",
            "My flight got cancelled, so book anything that leaves today.",
            "I'm writing a paper, so explain everything simply.",
            "She thought that nature does not guarantee our survival, so we have to take care of ourselves.",
            "Since I've been going three times a week to the studio, I want to make sure I rest enough."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_a_self_label_a_kind_over_another_any_day_and_what_is_always_done_at_a_moment_are_taken():
    """What the speaker calls themself in a phrase ("Early bird here, up at 5 every day", "Vegetarian since I was
    twelve"), one kind over another for good ("Give me a hole-in-the-wall over a fancy restaurant any day"), what they
    always do at a kind of moment ("I always check reviews before buying anything"), and a kind that does this to
    them ("Being micromanaged makes me miserable", "Sad endings ruin a book for me"). Beside each, the same words
    for one occasion or about a scene."""
    from memtier_plugin.layers.extract import extract

    taken = ["Early bird here, up at 5 every day.", "Big sports fan here.", "Vegetarian since I was twelve.",
             "Give me a hole-in-the-wall over a fancy restaurant any day.",
             "I'd pick a rainy day over a heat wave any time.", "I always check reviews before buying anything.",
             "Being micromanaged makes me miserable.", "Sad endings ruin a book for me.",
             "One-letter variable names make me want to scream."]
    left = ["Same here!", "Nice weather here.", "Give me the report over the weekend, any time is fine.",
            "I always feel better when I paint.", "I always end up buying too much when I shop hungry.",
            "That movie made me want to cry.", "The rain ruined the day for me."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_a_kind_ruled_out_with_its_reason_an_instruction_after_a_standing_clause_and_through_and_through():
    """"No white furniture, we have kids and a dog", "Sundays are for church, don't plan anything in the morning",
    "I'm a Marriott Bonvoy person through and through", "I'm a sucker for anything with truffle". Beside each, the
    phrase of a moment ("No worries, I'm fine", "No specific preferences yet, I'm still open ...", "The party is
    tomorrow, don't book anything")."""
    from memtier_plugin.layers.extract import extract

    taken = ["No white furniture, we have kids and a dog.", "No phone calls please, I'm much better over text.",
             "Sundays are for church, don't plan anything in the morning.",
             "I'm a Marriott Bonvoy person through and through.", "Honestly, I'm a sucker for anything with truffle."]
    left = ["No worries, I'm fine.", "No way, I can't believe it!", "No regrets, I promise.",
            "No specific preferences yet, I'm still open to exploring different options.",
            "It's fine, don't worry about it.", "The party is tomorrow, don't book anything."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_a_formal_statement_with_the_kind_first_or_to_the_assistant_is_taken():
    """explicit_f's forms: a kind said first and what it is to the speaker, "drawn to", "place a high value on", an
    enthusiast, "someone who", a habit said with "don't take", what the assistant is to do whenever it does a thing,
    what a kind of thing should always be, "any ... must follow", a feeling with its adverb, "rather you ... than",
    a weekday of every week after "rather not", "for this reason". Beside them the sentence with the same words
    about one thing at hand, and wishes of one moment said in preference words (the moment anywhere, not only
    leading; the occasion named as "this")."""
    from memtier_plugin.layers.extract import extract

    taken = ["Country music is something I have never been able to get into.",
             "Historical fiction set in the ancient world is the genre I keep coming back to.",
             "Quirky boutique hotels have always appealed to me more than polished luxury properties.",
             "Reliability matters far more to me than performance when choosing a car.",
             "Paper to-do lists work better for me than any app.", "Vintage shops are my first stop for clothes.",
             "Jazz has been my favourite genre since my teens.", "I'm drawn to cold-weather destinations like Iceland.",
             "I place a high value on courses that end with a certificate.", "I'm a longtime board game enthusiast.",
             "I'm someone who enjoys bold, fermented flavours.", "I'm most productive in the late evening.",
             "I don't take meetings before ten in the morning.",
             "I'd rather you ask a clarifying question than guess what I mean.",
             "Whenever you suggest a plan, present it as a numbered list rather than paragraphs.",
             "Dates should always be written in day-month-year format when you respond to me.",
             "All commit messages in my projects must follow the Conventional Commits format.",
             "My partner and I share custody, so any plans involving the children must work around alternate weekends.",
             "Needles make me extremely anxious.", "I'd rather not have meetings on Fridays.",
             "For this reason, I always book aisle seats.", "For this project, I prefer tabs over spaces."]
    left = ["That has always appealed to me.", "The talk really mattered to me.",
            "It works better for me if we meet at 3.", "The bakery was my first stop this morning.", "I'd rather you didn't.",
            "Whenever you get a chance, send me the file.", "You should always be careful.", "I don't take it personally.",
            "I'm running low on energy this afternoon, so I'd prefer a quick answer this time.",
            "If it rains tomorrow, I'd rather we move the picnic indoors.",
            "I'd like to avoid the motorway on today's drive because of an accident.",
            "I would prefer to pay by card for this order rather than cash on delivery.",
            "My manager prefers weekly status reports, so I need a template for Friday's update.",
            "I'm someone who was there when it happened.", "Your opinion matters to me.",
            "I prefer the second logo option you showed me for this launch.",
            "I'd prefer to keep this conversation confidential for now.", "The meeting makes me really nervous.",
            # a pick or a time of the moment said in the same words
            "Option B works better for me.", "Tuesday works better for me.", "3pm works better for me than 2pm.",
            "Paris is my first choice for our honeymoon.", "Italian appeals to me more tonight.",
            "When you book the hotel, use my Marriott number.", "I'm more productive today."]
    assert [t for t in taken if not extract(t, role="user")] == []
    assert [t for t in left if extract(t, role="user")] == []


def test_formal_statements_of_a_seventh_author_are_measured(capsys):
    """explicit_f by the rules alone: 0.932 / 0.690 when first measured, before its forms were written."""
    precision, recall, misses = score([r for r in load() if r["split"] == "explicit_f"])
    with capsys.disabled():
        print(f"\nexplicit_f (rules alone): precision {precision:.3f} recall {recall:.3f}")
    assert precision >= 0.97 and recall >= 0.80, "\n".join(misses)
