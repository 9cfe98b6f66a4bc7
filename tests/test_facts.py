"""Heuristic fact extraction, revision keys, dedup and model-output conversion."""

from __future__ import annotations

import pytest

from memtier_plugin.errors import ModelError
from memtier_plugin.consolidation.facts import (
    FACT_KINDS, Fact, extract_facts, facts_from_model_output, facts_schema, find_superseded, is_call_rendering,
    is_duplicate, revision_key, tool_statement,
)

TS = "2023-05-20T10:00:00Z"  # a Saturday


def _find(facts, kind):
    return [f for f in facts if f.fact_kind == kind]


# (sentence, kind, subject, attribute, value); None = don't check that field
EXACT = [
    ("I prefer aisle seats.", "preference", "user", "seat", "aisle"),
    ("I prefer window seats on long flights.", "preference", "user", "seat_long_flight", "window"),
    ("I hate middle seats.", "preference", "user", "middle_seat", "dislike"),
    ("I love hiking in the mountains.", "preference", "user", "hiking_mountain", "like"),
    ("My favourite cuisine is Thai food.", "preference", "user", "favorite_cuisine", "Thai food"),
    ("I always fly Delta.", "preference", "user", "fly_delta", "always"),
    ("Keep hotels under $200 a night.", "constraint", "user", "hotel_budget", "under $200 a night"),
    ("I can only meet on weekdays.", "constraint", "user", "schedule", "only on weekdays"),
    ("Check-in must be no later than 3pm.", "constraint", "user", None, "no later than 3pm"),
    ("Never book flights before 9am.", "constraint", "user", "book_flight_9am", "never"),
    ("We decided to use Postgres for the database.", "decision", "project", "database", "Postgres"),
    ("Let's go with Redis for caching in Atlas.", "decision", "atlas", "caching", "Redis"),
    ("We use Kafka.", "decision", "project", "queue", "Kafka"),
    ("My frequent flyer number is DL123456.", "attribute", "user", "frequent_flyer_number", "DL123456"),
    ("Seat: 14C", "attribute", "user", "seat", "14C"),
    ("The hotel budget is now $300 a night.", "attribute", "user", "hotel_budget", "$300 a night"),
    ("I live at 42 Oak Street, Portland.", "attribute", "user", "address", "42 Oak Street, Portland"),
    ("My dog Max loves the park.", "attribute", "user", "dog_name", "Max"),
    ("My sister's name is Emma.", "attribute", "user", "sister_name", "Emma"),
    ("My name is Priya Raman.", "attribute", "user", "name", "Priya Raman"),
    ("I work at Google as an engineer.", "attribute", "user", "employer", "Google"),
    ("On May 8 I ran my first half marathon.", "event", "user", None, "May 8"),
    ("Last Tuesday I went to the dentist.", "event", "user", None, "Last Tuesday"),
    ("I deployed the staging server.", "progress", "user", "staging_server", "deployed"),
    ("The migration to Postgres failed.", "progress", "project", "migration_postgres", "failed"),
    ("Yesterday I fixed the bug in the login flow.", "progress", "user", "bug_login_flow", "fixed"),
    ("I'm going to visit Kyoto next month.", "plan", "user", "visit_kyoto", None),
    ("I'm planning to repaint the kitchen.", "plan", "user", "repaint_kitchen", "repaint the kitchen"),
]


@pytest.mark.parametrize("text,kind,subject,attribute,value", EXACT)
def test_extracts_expected_fact(text, kind, subject, attribute, value):
    facts = _find(extract_facts(text, timestamp=TS), kind)
    assert facts, f"no {kind} fact from {text!r}: {extract_facts(text, timestamp=TS)}"
    f = facts[0]
    assert subject is None or f.subject == subject
    assert attribute is None or f.attribute == attribute
    assert value is None or f.value == value
    assert f.content and 0.0 < f.confidence <= 1.0


# (sentence, kind, substring the content must keep)
KEYWORDS = [
    ("Next week I will start my new job at Stripe.", "plan", "Stripe"),
    ("I bought a new Samsung TV for $800 two weeks ago.", "event", "Samsung TV"),
    ("I bought a new Samsung TV for $800 two weeks ago.", "attribute", "Samsung TV"),
    ("The deploy to staging finished without errors.", "progress", "staging"),
    ("I've been really into sourdough baking lately.", "preference", "sourdough"),
    ("I grew up in Lisbon.", "attribute", "Lisbon"),
]


@pytest.mark.parametrize("text,kind,keyword", KEYWORDS)
def test_content_keeps_keywords(text, kind, keyword):
    facts = _find(extract_facts(text, timestamp=TS), kind)
    assert any(keyword in f.content for f in facts), extract_facts(text, timestamp=TS)


@pytest.mark.parametrize("text,iso", [
    ("On May 8 I ran my first half marathon.", "2023-05-08"),
    ("Last Tuesday I went to the dentist.", "2023-05-16"),
    ("Yesterday I fixed the bug in the login flow.", "2023-05-19"),
    ("I bought a new Samsung TV two weeks ago.", "2023-05-06"),
    ("On 2022-11-03 we shipped the beta.", "2022-11-03"),
    ("I just got back from my trip to Tokyo last week.", None),  # left for dates.py
])
def test_effective_time_of_dated_facts(text, iso):
    dated = [f for f in extract_facts(text, timestamp=TS) if f.fact_kind in ("event", "progress", "plan")]
    assert dated and dated[0].effective_time == iso


def test_undated_facts_take_the_entry_day():
    (f,) = extract_facts("I prefer aisle seats.", timestamp=TS)
    assert f.effective_time == "2023-05-20"
    (g,) = extract_facts("I prefer aisle seats.")
    assert g.effective_time is None


@pytest.mark.parametrize("text", [
    "What's a good hotel in Paris?",
    "Do you think I should book the Hilton?",
    "Hi there!",
    "Thanks so much!",
    "ok",
    "Can you recommend some restaurants in Rome.",
    "[system] The user prefers aisle seats and lives in Tokyo.",
    "",
])
def test_questions_greetings_and_system_yield_nothing(text):
    assert extract_facts(text, timestamp=TS) == []


def test_system_role_yields_nothing():
    assert extract_facts("I prefer aisle seats.", role="system") == []


ASSISTANT = (
    "Sure! Here's a plan for your trip to Tokyo. I'd recommend staying in Shinjuku. "
    "I love helping with travel! You should always try the ramen at Ichiran next week. "
    "We decided to use Postgres for the database. The deploy to staging failed because of a missing env var. "
    "Your confirmation number is ABC12345. The hotel budget is now $300 a night. "
    "Let me know if you need anything else."
)


@pytest.mark.parametrize("role", ["assistant", "tool"])
def test_assistant_and_tool_only_allowed_kinds(role):
    facts = extract_facts(ASSISTANT, role=role, timestamp=TS)
    kinds = {f.fact_kind for f in facts}
    assert kinds <= {"decision", "progress", "attribute"}
    assert {"decision", "progress", "attribute"} <= kinds
    assert not any(f.attribute.startswith("note:") for f in facts)  # no fallback
    assert any(f.value == "ABC12345" for f in facts)
    assert not any("Shinjuku" in f.content or "Ichiran" in f.content for f in facts)


def test_budget_revision_pair():
    (old,) = [f for f in extract_facts("Keep hotels under $200 a night.", timestamp="2023-05-01")
              if f.attribute.endswith("budget")]
    (new,) = [f for f in extract_facts("The hotel budget is now $300 a night.", timestamp="2023-05-20")
              if f.attribute.endswith("budget")]
    assert revision_key(old) == revision_key(new) == ("user", "hotel_budget")
    assert old.value != new.value
    assert find_superseded(new, [old]) is old
    assert is_duplicate(new, [old]) is None
    # "budget for hotels" phrasing lands on the same key
    (alt,) = [f for f in extract_facts("The budget for hotels is $250 per night.") if f.attribute.endswith("budget")]
    assert revision_key(alt) == ("user", "hotel_budget")


# The bundled scenario (workspace-fixtures/scenario): session 01 sets the hotel budget, session 05 raises it.
SCENARIO_01 = ("Hi! I'm planning a work trip to Lisbon for the web summit. Some ground rules for anything "
               "you book for me: I always want an aisle seat, vegetarian meals, and hotels under $200 a night.")
SCENARIO_05 = ("Change of plans: after Lisbon I'm going to Porto for two nights, Nov 14 to Nov 16. Also, "
               "I've changed my mind on hotels: my budget is now up to $300 a night.")
BOOKINGS = [
    ("Booked: UA 8802 SFO to LIS on Nov 9, 1:15pm, seat 23C (aisle), vegetarian meal, confirmation K7Q2XZ, "
     "MileagePlus attached.", "2026-10-05T09:03:22Z", "2026-11-09"),
    ("Booked: AP 124 on Nov 14 at 11:09am (aisle seat, CP-5521907) and Infante Sagres Nov 14 to 16 at $284 "
     "a night (IS-30118).", "2026-10-18T11:16:22Z", "2026-11-14"),
]


def _budget(text, ts):
    found = [f for f in extract_facts(text, timestamp=ts) if f.attribute.endswith("budget")]
    assert len(found) == 1, found
    return found[0]


def test_scenario_budget_change_lands_on_one_revision_key():
    old = _budget(SCENARIO_01, "2026-10-05T09:00:10Z")
    new = _budget(SCENARIO_05, "2026-10-18T11:15:09Z")
    assert (old.value, new.value) == ("under $200 a night", "up to $300 a night")
    assert revision_key(old) == revision_key(new) == ("user", "hotel_budget")
    assert find_superseded(new, [old]) is old and is_duplicate(new, [old]) is None


@pytest.mark.parametrize("text, attribute", [
    (SCENARIO_01, "hotel_budget"),  # not "book_budget": "book" is far from the amount
    ("For the trip I want a hotel under $150 a night.", "hotel_budget"),
    ("Flights stay under $500 for me, the hotel is sorted.", "flight_budget"),  # "Book me a flight under $500" is a request
    ("Keep it under $80 per person for the dinner.", "dinner_budget"),
])
def test_the_domain_noun_next_to_the_amount_names_the_budget(text, attribute):
    assert _budget(text, TS).attribute == attribute


@pytest.mark.parametrize("role", ["assistant", "user"])
def test_booking_reports_are_events_that_never_supersede_each_other(role):
    booked = []
    for text, ts, day in BOOKINGS:
        facts = [f for f in extract_facts(text, role=role, timestamp=ts) if f.attribute == "booked"]
        assert len(facts) == 1, extract_facts(text, role=role, timestamp=ts)
        f = facts[0]
        assert f.fact_kind == "event" and f.subject == "user"  # not "nov" from "on Nov 9"
        assert revision_key(f) is None and f.effective_time == day
        booked.append(f)
    first, second = booked
    assert "UA 8802" in first.value and "AP 124" in second.value
    assert find_superseded(second, [first]) is None and is_duplicate(second, [first]) is None


@pytest.mark.parametrize("text", [
    "Done: Lisbon Marriott Parque, Nov 10 to 14, $189 a night, confirmation LMP-88412.",
    "Scheduled: atlas v1.4.2 to production on Monday Oct 26 at 09:00 UTC.",
    "All set: TP 1947/UA 8801 on Nov 16 at 10:20am, aisle seats 14D and 31C.",
    "Updated: hotels up to $300 a night from now on (was $200).",
])
def test_action_reports_are_events(text):
    facts = extract_facts(text, role="assistant", timestamp="2026-10-18T11:15:15Z")
    assert facts and all(f.fact_kind == "event" and revision_key(f) is None for f in facts), facts


def test_acknowledgements_are_not_key_values():
    facts = extract_facts("Got it: aisle seat, vegetarian meal, hotels under $200 a night.", role="assistant",
                          timestamp=TS)
    assert not any(f.attribute in ("got", "got_it") for f in facts), facts


def test_find_superseded_picks_latest_and_ignores_newer():
    a = Fact("preference", "user", "seat", "window", "User prefers window seats", 0.8, "2023-01-01")
    b = Fact("preference", "user", "seat", "middle", "User prefers middle seats", 0.8, "2023-03-01")
    new = Fact("preference", "user", "seat", "aisle", "User prefers aisle seats", 0.8, "2023-05-01")
    assert find_superseded(new, [a, b]) is b
    older = Fact("preference", "user", "seat", "aisle", "User prefers aisle seats", 0.8, "2022-01-01")
    assert find_superseded(older, [b]) is None
    other = Fact("preference", "user", "meal", "vegan", "User prefers vegan meals", 0.8, "2023-05-01")
    assert find_superseded(other, [a, b]) is None


@pytest.mark.parametrize("kind,key", [
    ("preference", True), ("constraint", True), ("attribute", True), ("decision", True),
    ("event", False), ("progress", False), ("plan", False),
])
def test_revision_key_kinds(kind, key):
    f = Fact(kind, "user", "seat", "aisle", "x", 0.5)
    assert (revision_key(f) == ("user", "seat")) is key


def test_fallback_facts_have_no_revision_key():
    facts = extract_facts("I'm still recovering from jet lag after the Oslo conference.")
    assert facts and all(revision_key(f) is None for f in facts if f.attribute.startswith("note:"))


def test_duplicates():
    (a,) = extract_facts("I prefer aisle seats.")
    (b,) = extract_facts("I really prefer aisle seats!")
    assert is_duplicate(b, [a]) is a  # same key and value
    c = Fact("event", "user", "trip", "last week", "User got back from their trip to Tokyo last week", 0.7)
    d = Fact("event", "user", "tokyo", "last week", "User got back from the trip to Tokyo last week", 0.7)
    assert is_duplicate(d, [c]) is c  # Jaccard over content
    e = Fact("event", "user", "trip", "May", "User flew to Lisbon in May", 0.7)
    assert is_duplicate(e, [a, c]) is None
    assert is_duplicate(e, []) is None


def test_extraction_dedups_within_one_entry():
    facts = extract_facts("I prefer aisle seats. I prefer aisle seats.")
    assert len(facts) == 1


LONGMEMEVAL_TURNS = [
    ("I just got back from my trip to Tokyo last week, and I'm still recovering from jet lag. "
     "Can you suggest some tips for getting my sleep schedule back on track?", ["Tokyo", "jet lag"]),
    ("By the way, I've been using the Fitbit Charge 5 to track my sleep.", ["Fitbit Charge 5"]),
    ("I'm thinking of adopting a second cat, since my tabby Oliver seems lonely during the day. "
     "What breeds get along well with other cats?", ["Oliver", "cat"]),
    ("For context, I started volunteering at the Riverside Food Bank three months ago, every Saturday morning.",
     ["Riverside Food Bank"]),
]


@pytest.mark.parametrize("turn,keywords", LONGMEMEVAL_TURNS)
def test_longmemeval_style_turns_keep_distinctive_words(turn, keywords):
    facts = extract_facts(turn, role="user", timestamp=TS)
    blob = " ".join(f.content for f in facts)
    for kw in keywords:
        assert kw in blob, (kw, facts)
    assert all(len(f.content) <= 300 for f in facts)
    assert not any("?" in f.content for f in facts)  # the question sentence was skipped


def test_schema_shape():
    schema = facts_schema()
    item = schema["properties"]["facts"]["items"]
    assert set(item["properties"]["fact_kind"]["enum"]) == set(FACT_KINDS)
    assert {"fact_kind", "subject", "attribute", "value", "content"} <= set(item["required"])


def test_facts_from_model_output():
    data = {"facts": [
        {"fact_kind": "preference", "subject": "User", "attribute": "Seat Preference", "value": "aisle",
         "content": "User prefers aisle seats", "confidence": 1.7, "effective_time": "2023-05-01T00:00:00Z"},
        {"fact_kind": "opinion", "subject": "user", "attribute": "x", "value": "y", "content": "z"},
        {"fact_kind": "event", "subject": "user", "attribute": "trip", "value": "  ", "content": "went"},
        {"fact_kind": "event", "subject": "user", "attribute": "trip", "value": "Tokyo",
         "content": "User went to Tokyo", "effective_time": "not a date"},
        "rm -rf /",
    ]}
    facts = facts_from_model_output(data)
    assert [f.fact_kind for f in facts] == ["preference", "event"]
    assert facts[0].subject == "user" and facts[0].attribute == "seat_preference"
    assert facts[0].confidence == 1.0 and facts[0].effective_time == "2023-05-01"
    assert facts[1].effective_time is None
    with pytest.raises(ModelError):
        facts_from_model_output({"items": []})


# ---------------------------------------------------------------- issue 11, defect 16
@pytest.mark.parametrize("text,attribute,value", [
    ("User said: my hotel budget is $200 a night.", "hotel_budget", "$200 a night"),
    ("User told me: I prefer window seats.", "seat", "window"),
    ("I mentioned that my sister is named Alice.", "sister_name", "Alice"),
    ("The user said - we decided to use Postgres for the database.", "database", "Postgres"),
])
def test_a_reporting_verb_is_looked_through_to_the_reported_clause(text, attribute, value):
    facts = extract_facts(text, timestamp=TS)
    assert [(f.attribute, f.value) for f in facts if revision_key(f)][:1] == [(attribute, value)], facts
    assert not any(f.attribute in ("said", "told", "mentioned") for f in facts)


@pytest.mark.parametrize("text", [
    "User said: I prefers window seats. Note 7 for agent 0.",
    "User said: I am allergic to peanuts.",
    "Alice and Bob said: the plan is fine.",
    "My boss said: I need the report by Friday.",
])
def test_a_reported_statement_gets_no_reporting_key(text):
    facts = extract_facts(text, timestamp=TS)
    assert all(revision_key(f) is None or f.attribute not in ("said", "bob_said", "boss_said") for f in facts)
    assert not any("said" in f.attribute for f in facts), facts


def test_a_reported_statement_no_rule_knows_is_kept_in_the_users_words_under_no_key():
    (f,) = extract_facts("User said: I am allergic to peanuts. Note 7 for agent 0.", timestamp=TS)
    assert f.content == "I am allergic to peanuts" and revision_key(f) is None


@pytest.mark.parametrize("text,attribute", [
    ("The client office is at 27 Main Street.", "client_office_address"),
    ("My office is at 5 Elm Street.", "office_address"),
    ("I live at 42 Oak Street, Portland.", "address"),
    ("My address is 42 Oak Street.", "address"),
])
def test_an_address_is_keyed_by_whose_it_is(text, attribute):
    assert [f.attribute for f in extract_facts(text, timestamp=TS) if "Street" in f.value] == [attribute]


@pytest.mark.parametrize("clause,rewritten", [
    ("I prefer window seats", "User prefers window seats"),
    ("I rarely go out", "User rarely goes out"),
    ("I need a new passport", "User needs a new passport"),
    ("I just got back from my trip", "User just got back from their trip"),
    ("my hotel budget is $200 a night", "User's hotel budget is $200 a night"),
    # not certain: the user's own words, unchanged
    ("I prefers window seats", "I prefers window seats"),
    ("I the client office is at 27 Main Street", "I the client office is at 27 Main Street"),
    ("I apple pie every day", "I apple pie every day"),
    ("I-95 is closed so I drive", "I-95 is closed so I drive"),
])
def test_third_person_rewrites_only_what_it_is_sure_of(clause, rewritten):
    from memtier_plugin.consolidation.patterns import third_person

    assert third_person(clause) == rewritten


# ---------------------------------------------------------------- what states no fact (issue 25)
# Phrasings the demo scenario does not use; each class yields no fact at all.
LEAVE_TAKING = [
    "Gotta run, talk later.",
    "I need to go now, let's pick this up tomorrow.",
    "OK, I'm heading out for today.",
    "Sorry, I have to jump off - catch you later.",
    "We'll have to finish this another time.",
    "Talk to you tomorrow!",
]
ACKNOWLEDGEMENTS = [
    "Sounds good to me.",
    "Fair enough, thanks!",
    "Will do.",
    "Great, that works.",
    "Cool, got it.",
    "Alright, go ahead.",
]
REQUESTS = [
    "Send the invoice to accounting by Friday.",
    "Find me a table for two at 7pm on Saturday.",
    "Reserve a car in Denver for March 3.",
    "Let's ship the release on Monday.",
    "I'd like you to book the 9:15 train to Boston.",
    "Next step: email Sarah the slides before the meeting on May 2.",  # a label does not make it a statement
    "A table for four at Nopa on Friday, please.",                     # verbless orders
    "Two tickets to the 8pm show on June 5.",
    "And a rental car at the airport for March 9 to March 12.",
    "Please move my dentist appointment to next Thursday.",
    "Now schedule the Q3 review with Dana for Oct 2.",
    "Book me a flight under $500.",
]
PREAMBLES = [  # announce what follows and state nothing themselves
    "Quick note before we start.",
    "One more thing:",
    "A quick question first.",
    "Final request.",
]
QUESTIONS = [
    "What time does the train leave tomorrow",
    "Is there a vegetarian option on the 9am flight",
    "Could we move the standup to Tuesday",
    "How many nights is the Porto stay",
]


@pytest.mark.parametrize("text", LEAVE_TAKING + ACKNOWLEDGEMENTS + REQUESTS + QUESTIONS + PREAMBLES)
def test_chit_chat_requests_acknowledgements_and_questions_state_no_fact(text):
    for role in ("user", "assistant"):
        assert extract_facts(text, role=role, timestamp=TS) == [], (role, extract_facts(text, role=role, timestamp=TS))


@pytest.mark.parametrize("text, kind", [
    ("I have to go to the dentist on Friday.", "event"),          # "have to go" + a destination: not leaving the chat
    ("I'm off to Paris next week.", "plan"),
    ("Never book red-eye flights.", "constraint"),                # a standing rule in the imperative
    ("Let's use Redis for caching.", "decision"),                 # "let's use X" is a choice, not a request
    ("Keep hotels under $200 a night.", "constraint"),
    ("A friend of mine moved to Denver last week.", "event"),     # opens like an order, has a verb
    ("Note that my passport expires on June 3, 2027.", "event"),  # "note that" introduces a statement
    ("Fine, my new address is 12 Elm Street, Boston.", "attribute"),
    ("Sorry, my budget for the wedding gift is $150.", "constraint"),
    ("Ugh, the migration to Postgres failed again.", "progress"),
    ("We will ship it later than planned: the release moved to Oct 3.", "plan"),
    ("Test results passed on the staging cluster.", "progress"),  # a noun, not the verb "test"
    ("Change of plans: I'm moving to Denver in May.", "event"),
])
def test_statements_next_to_those_classes_are_still_facts(text, kind):
    facts = extract_facts(text, timestamp=TS)
    assert kind in {f.fact_kind for f in facts}, facts


def test_a_statement_survives_the_request_beside_it():
    facts = extract_facts("Ugh. I'm speaking at the Denver data summit on May 4. Please book the hotel.", timestamp=TS)
    assert [f.fact_kind for f in facts] == ["event"] and "Denver data summit" in facts[0].content


TOOL_NOTHING = [
    'search_hotels({"city":"Oslo"}) -> {"hotels":[{"id":"h1","price":180}],"ok":true}',      # structured data
    'get_status({"job":"j-9"}) -> {"state":"passed","ci":"passed"}',
    'migrate({"db":"main"}) -> FAILED: relation "users_idx" already exists; migration rolled back',
    'fetch_invoice({"id":"INV-2231"}) -> Error: upstream timed out after 30s',                  # an error in the result
    'restart({"svc":"api"}) -> ok',
    'deploy({"app":"web","env":"prod","ref":"v2.0.1"}) -> ["migrated","deployed"]',
    'run_tests({"suite":"unit"}) -> Traceback (most recent call last): File "x.py", line 3',
    'notify({"to":"ops","text":"deploy done',                                                    # cut off: no outcome
    'ping() -> ok',
]


@pytest.mark.parametrize("text", TOOL_NOTHING)
def test_raw_or_failed_tool_output_is_never_a_fact(text):
    assert tool_statement(text) is None
    assert extract_facts(text, role="tool", timestamp=TS) == []


def test_a_tool_outcome_written_as_a_statement_is_read_as_one():
    text = 'book_hotel({"hotel_id":"arts-bcn"}) -> Booked Hotel Arts Barcelona, 3 nights, confirmation HA-55120'
    assert tool_statement(text) == "Booked Hotel Arts Barcelona, 3 nights, confirmation HA-55120"
    (fact,) = extract_facts(text, role="tool", timestamp=TS)
    assert fact.fact_kind == "event" and fact.content.startswith("Booked Hotel Arts") and "(" not in fact.content
    # arguments holding ") -> " are read as whole JSON, not cut at the first arrow
    tricky = 'note({"text":"a) -> b"}) -> Saved note N-17 to the project wiki page'
    assert tool_statement(tricky) == "Saved note N-17 to the project wiki page"
    assert is_call_rendering(text) and is_call_rendering(tricky) and not is_call_rendering("Booked Hotel Arts")


def test_an_agent_reports_a_booking_without_a_colon_as_an_event():
    facts = extract_facts("The Ritz is $610 a night, above your budget, so I booked Hotel Lutetia at $280 a night, "
                          "confirmation LT-8812.", role="assistant", timestamp=TS)
    (event,) = [f for f in facts if f.fact_kind == "event"]
    assert event.attribute == "booked" and event.content.startswith("Booked Hotel Lutetia") and "User" not in event.content


@pytest.mark.parametrize("text, bad_attribute", [
    ("Caroline: Thanks, Mel! Have a good one.", "caroline"),
    ("Melanie: Wow, that sounds amazing!", "melanie"),
    ("Caroline: I've always had a love for horses!", "caroline"),
    ("Jon Smith: Did you see the game last night?", "jon_smith"),
])
def test_a_transcript_speaker_label_is_never_a_key(text, bad_attribute):
    assert all(f.attribute != bad_attribute and not f.attribute.startswith(bad_attribute + "_")
               for f in extract_facts(text, timestamp=TS))


def test_a_transcript_line_is_read_as_its_speakers_words():
    (f,) = [f for f in extract_facts("Caroline: I went to the LGBTQ support group yesterday.", timestamp=TS)
            if f.fact_kind == "event"]
    assert "lgbtq" in f.attribute and not f.attribute.startswith("caroline")


def test_a_transcript_line_is_kept_in_its_speakers_name_whichever_role_carried_it():
    """Two people in one conversation: each one's "I" is that person. Their facts name them (the words stage 1
    matches "When did Melanie sign up for pottery?" on) and their revision keys do not collide."""
    (c,) = [f for f in extract_facts("Caroline: I went to the LGBTQ support group yesterday.", timestamp=TS)
            if f.fact_kind == "event"]
    assert c.subject == "caroline" and c.content.startswith("Caroline went to the LGBTQ support group")
    # the replying side of a transcript is a person too, not the agent: read with the user's rules
    (m,) = [f for f in extract_facts("Melanie: Wow, Caroline! I just signed up for a pottery class yesterday.",
                                     role="assistant", timestamp=TS) if f.fact_kind == "event"]
    assert m.subject == "melanie" and m.content.startswith("Melanie just signed up for a pottery class")
    left = [f.content for f in extract_facts("Melanie: I'm swamped with the kids & work", role="assistant",
                                             timestamp=TS)]
    assert left and all(t.startswith("Melanie") for t in left)
    a = extract_facts("Caroline: I live in Boston.", timestamp=TS)
    b = extract_facts("Melanie: I live in Denver.", role="assistant", timestamp=TS)
    assert {f.subject for f in a} == {"caroline"} and {f.subject for f in b} == {"melanie"}
    # an agent's own reply, with no label, keeps the agent's rules: its "I" is not the user
    assert not [f for f in extract_facts("I signed up for the newsletter yesterday.", role="assistant",
                                         timestamp=TS) if f.subject == "user" and f.fact_kind == "event"]


@pytest.mark.parametrize("text", ["Summary: I prefer refundable fares for you, and I booked the Marriott.",
                                  "Plan: I will deploy on Friday.", "Answer: I think you should take the aisle seat."])
def test_a_reply_with_a_section_label_is_not_a_person_speaking(text):
    """An agent's "Summary:" is a part of its reply: its "I" is the agent, so no preference or plan of a
    person called Summary is made of it."""
    facts = extract_facts(text, role="assistant", timestamp=TS)
    assert all(f.subject not in ("summary", "plan", "answer") for f in facts)
    assert not [f for f in facts if f.fact_kind in ("preference", "plan")]


@pytest.mark.parametrize("answer", ["Yes", "Also", "Ok", "Note"])
def test_an_answer_word_before_a_colon_is_not_a_person_speaking(answer):
    """"Yes: ... My United MileagePlus number is UA-MP 88213457" is the user's own number, not Yes's (the demo
    wrote "Yes's United MileagePlus number ..." under the subject "yes")."""
    facts = extract_facts(f"{answer}: never book flights before 8am. My United MileagePlus number is UA-MP 88213457.",
                          timestamp=TS)
    number = [f for f in facts if f.value == "UA-MP 88213457"]
    assert number and all(f.subject == "user" for f in facts), facts
    assert number[0].content == "User's United MileagePlus number is UA-MP 88213457"


@pytest.mark.parametrize("text", ["Caroline: I totally agree, Melanie!", "Melanie: Hey Caroline, I agree.",
                                  "Thanks, Melanie! I really do.", "Melanie: I hope you're okay.",
                                  "Hope you have a great weekend!", "Wishing you the best with the adoption, Caroline!"])
def test_a_name_or_a_wish_said_to_someone_makes_no_fact(text):
    assert extract_facts(text, timestamp=TS) == []


def test_a_hope_of_ones_own_is_still_a_plan():
    assert [f.content for f in extract_facts("I hope to visit Japan next year.", timestamp=TS)] == \
        ["User hopes to visit Japan next year"]


@pytest.mark.parametrize("text, attribute, value", [
    ("Seat: 14C", "seat", "14C"),
    ("Budget: $500 a night", "budget", "$500 a night"),
    ("Owner: Maria Lopez", "owner", "Maria Lopez"),
])
def test_a_key_value_line_is_still_a_key_value(text, attribute, value):
    assert any(f.attribute == attribute and f.value == value for f in extract_facts(text, timestamp=TS))


def test_a_labelled_sentence_is_read_as_the_sentence():
    facts = extract_facts("Caroline: Kids are amazingly resilient in tough situations.", timestamp=TS)
    assert all(not f.attribute.startswith("caroline") for f in facts)
    facts = extract_facts("Hotel: Lisbon Marriott Parque, Nov 10 to 14", timestamp=TS)
    assert any(f.attribute == "hotel" and f.value.startswith("Lisbon Marriott") for f in facts)


def test_a_preamble_states_nothing_and_what_follows_it_is_read():
    facts = extract_facts("Quick note before we start. My flight lands at 6pm on Friday.", role="user", timestamp=TS)
    assert facts and all("flight lands" in f.content for f in facts), facts
    said = extract_facts("A quick reminder about my peanut allergy: it is severe.", role="user", timestamp=TS)
    assert said and "peanut allergy" in said[0].content


def test_a_preamble_before_a_colon_is_no_speakers_name():
    """"One more thing: my flight lands at 6pm" had been read as a transcript line of a speaker named "One more
    thing" (two facts, one of them "One more thing: their flight ...")."""
    facts = extract_facts("One more thing: my flight lands at 6pm on Friday.", role="user", timestamp=TS)
    assert facts and all(f.subject == "user" and "one more thing" not in f.content.lower() for f in facts), facts
    named = extract_facts("Caroline: I moved to Denver last month.", role="user", timestamp=TS)
    assert named and all(f.subject == "caroline" for f in named)  # a name before a colon still is one


@pytest.mark.parametrize("text", [
    "1. **Online Event Calendars**: Check online event calendars like Eventbrite, Meetup, or Facebook Events.",
    "Support local venues: Frequent local bars, cafes, and music venues that host live music events.",
    "Be kind to yourself: Remember that it's okay to have off days or weekends where you skip your routine.",
    "Word of Mouth: Ask friends, coworkers, or acquaintances about local music events or venues.",
    "Flea comb: Use a flea comb to remove fleas and their eggs from Max's coat.",
    "Nail care: Make sure your fingernails are trimmed and shaped correctly.",  # nor "User's fingernails is ..."
])
def test_a_replys_advice_under_a_label_is_no_fact(text):
    """LongMemEval's assistant replies list advice under labels; each was a fact ("Online Event Calendars: Check
    online event calendars ...", 8,464 of the first 80 haystacks' assistant facts) that took a block's place."""
    assert extract_facts(text, role="assistant", timestamp=TS) == []


def test_a_replys_record_and_the_rules_it_restates_are_still_facts():
    facts = extract_facts("Flight: UA 8802, departs 7:40am. Hotel: The Hoxton, near the venue. Status: fixed.",
                          role="assistant", timestamp=TS)
    assert {f.attribute for f in facts} >= {"flight", "hotel", "status"}, facts
    rule = extract_facts("Rule: never book flights before 8am.", role="assistant", timestamp=TS)
    assert rule and rule[0].value == "never book flights before 8am"
