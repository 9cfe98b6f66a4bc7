import pytest

from memtier_plugin.tokenize import STOP_WORDS, count_tokens, jaccard, stem, token_set, tokenize


def test_stop_words_dropped_and_case_folded():
    assert tokenize("The User prefers an AISLE seat", stemming=False) == ["user", "prefers", "aisle", "seat"]


@pytest.mark.parametrize("word, expected", [
    ("seats", "seat"), ("flights", "flight"), ("booked", "book"), ("booking", "book"), ("stopped", "stop"),
    ("studies", "study"), ("classes", "class"), ("address", "address"), ("bus", "bus"), ("analysis", "analysis"),
    ("red", "red"), ("sing", "sing"), ("300", "300"), ("called", "call"), ("prefers", "prefer"),
    ("named", "name"), ("names", "name"), ("name", "name"), ("liked", "like"), ("likes", "like"),
    ("moved", "move"), ("created", "create"), ("creates", "create"), ("free", "free"), ("use", "use"),
    ("agreed", "agree"), ("agree", "agree"), ("hopping", "hop"), ("booked", "book"),
    ("eating", "eat"), ("seated", "seat"), ("seating", "seat"), ("treated", "treat"), ("boating", "boat"),
    ("recreated", "recreate"), ("located", "locate"), ("evaluated", "evaluate"), ("rated", "rate"),
    ("driving", "drive"), ("arrived", "arrive"), ("serves", "serve"), ("loved", "love"), ("revving", "rev"),
])
def test_light_stemmer(word, expected):
    assert stem(word) == expected


def test_query_and_entry_inflections_meet():
    assert set(tokenize("which seats did I book")) <= set(tokenize("I booked aisle seat"))
    assert set(tokenize("what should I be eating")) <= set(tokenize("I never eat shellfish"))


def test_stop_false_keeps_stop_words():
    assert tokenize("The user is here", stop=False, stemming=False) == ["the", "user", "is", "here"]


def test_digits_kept_and_punctuation_splits():
    assert tokenize("Budget: $300 for 2 nights, flight LH-454!") == [
        "budget", "300", "2", "night", "flight", "lh", "454"]


def test_unicode_words_kept():
    assert tokenize("Café in Zürich, then 東京") == ["café", "zürich", "東京"]  # no suffix to strip
    assert tokenize("STRASSE Straße", stemming=False) == ["strasse", "strasse"]  # casefold, not just lower


def test_underscores_and_apostrophes_split():
    assert tokenize("user_id don't") == ["user", "id"]


def test_stop_word_list_is_compact_and_lowercase():
    assert 120 <= len(STOP_WORDS) <= 200
    assert all(w == w.lower() and w.isalpha() for w in STOP_WORDS)
    assert {"the", "and", "is", "not"} <= STOP_WORDS and "aisle" not in STOP_WORDS


def test_empty_text():
    assert tokenize("") == []
    assert tokenize("the of and") == []


def test_count_tokens():
    assert count_tokens("") == 0
    assert count_tokens("a") == 1
    assert count_tokens("abcd") == 1
    assert count_tokens("abcde") == 2
    assert count_tokens("x" * 400) == 100


def test_token_set_and_jaccard():
    a = token_set("User prefers aisle seats")
    b = token_set("the user prefers window seats")
    assert a == {"user", "prefer", "aisle", "seat"}
    assert jaccard(a, b) == 3 / 5
    assert jaccard(a, a) == 1.0
    assert jaccard(a, {"unrelated"}) == 0.0
    assert jaccard(set(), set()) == 0.0
    assert jaccard(set(), {"x"}) == 0.0
