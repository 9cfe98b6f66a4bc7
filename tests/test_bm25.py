import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

import memtier_plugin.recall.bm25 as bm25
from memtier_plugin.recall.bm25 import BM25Index
from memtier_plugin.errors import SearchIndexError
from memtier_plugin.tokenize import tokenize

WORDS = (
    "user prefers aisle seat window flight lisbon berlin hotel booking train ticket budget "
    "euro dinner vegetarian allergy peanut meeting monday friday project deadline report "
    "python script deploy server database backup password reminder birthday sister gift "
    "coffee morning run marathon knee doctor appointment tuesday museum tour guide rain "
    "umbrella taxi airport delay refund email manager review salary vacation august beach"
).split()

QUERIES = [
    "aisle seat on the flight to Lisbon",
    "vegetarian dinner with a peanut allergy",
    "project deadline report for the manager",
    "user user prefers prefers coffee",  # repeated terms count once per occurrence
    "backup the database server",
    "doctor appointment for the knee on tuesday",
    "refund for the airport delay",
    "birthday gift for my sister",
    "marathon morning run",
    "zeppelin unknown words only",
]


def make_corpus(n_docs=200, seed=7):
    """Short memory-like documents; Zipf-weighted so "user" is in most docs (negative okapi idf)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    weights[0] = 4.0  # "user"
    weights /= weights.sum()
    return [list(rng.choice(WORDS, size=rng.integers(4, 16), p=weights)) for _ in range(n_docs)]


@pytest.fixture(scope="module")
def corpus():
    return make_corpus()


def test_okapi_parity_with_rank_bm25(corpus):
    ref = BM25Okapi(corpus, k1=1.5, b=0.75, epsilon=0.25)
    index = BM25Index(idf="okapi")
    index.add_many(corpus)
    assert sum("user" in doc for doc in corpus) > len(corpus) / 2  # the epsilon floor is exercised
    assert ref.avgdl == pytest.approx(index.avgdl)
    for text in QUERIES:
        q = tokenize(text)
        expected = ref.get_scores(q)
        assert np.allclose(index.get_scores(q), expected, rtol=1e-5, atol=1e-6), text


def test_okapi_parity_incremental(corpus):
    ref = BM25Okapi(corpus, k1=1.2, b=0.5, epsilon=0.1)
    index = BM25Index(k1=1.2, b=0.5, idf="okapi", epsilon=0.1)
    for doc in corpus:
        index.add(doc)
    for text in QUERIES:
        q = tokenize(text)
        assert np.allclose(index.get_scores(q), ref.get_scores(q), rtol=1e-5, atol=1e-6), text


def test_lucene_idf_by_hand():
    index = BM25Index(k1=1.5, b=0.75)  # lucene is the default
    index.add_many([["a", "b"], ["a"], ["c", "c", "c", "a"]])
    n, avgdl = 3, 7 / 3
    idf_c = math.log(1 + (n - 1 + 0.5) / (1 + 0.5))
    norm = 1.5 * (1 - 0.75 + 0.75 * 4 / avgdl)
    expected = idf_c * 3 * 2.5 / (3 + norm)
    ids, scores = index.score(["c"])
    assert list(ids) == [2] and scores[0] == pytest.approx(expected, rel=1e-6)
    idf_a = math.log(1 + (n - 3 + 0.5) / (3 + 0.5))
    assert idf_a > 0  # a term in every doc still counts under lucene
    assert np.all(index.get_scores(["a"]) > 0)


def test_incremental_equals_bulk(corpus, monkeypatch):
    monkeypatch.setattr(bm25, "_MIN_TAIL", 32)  # force several tail merges along the way
    bulk = BM25Index()
    assert bulk.add_many(corpus) == range(len(corpus))
    one_by_one, mixed = BM25Index(), BM25Index()
    assert [one_by_one.add(doc) for doc in corpus] == list(range(len(corpus)))
    mixed.add_many(corpus[:50])
    for doc in corpus[50:120]:
        mixed.add(doc)
    assert mixed.add_many(corpus[120:]) == range(120, len(corpus))
    for text in QUERIES:
        q = tokenize(text)
        expected = bulk.get_scores(q)
        for index in (one_by_one, mixed):
            np.testing.assert_allclose(index.get_scores(q), expected, rtol=1e-6)
    assert len(one_by_one) == len(mixed) == len(corpus)
    assert [doc_len(one_by_one, i) for i in range(len(corpus))] == [len(d) for d in corpus]
    assert one_by_one.avgdl == pytest.approx(sum(map(len, corpus)) / len(corpus))


def test_new_doc_is_found_immediately(corpus):
    index = BM25Index()
    index.add_many(corpus)
    doc = index.add(tokenize("Remember the zeppelin tour over Berlin"))
    ids, _ = index.score(tokenize("zeppelin"))
    assert list(ids) == [doc]
    ids, scores = index.score(tokenize("berlin zeppelin"))
    assert doc in ids and scores[list(ids).index(doc)] == scores.max()


def test_candidates_restrict_results_with_same_scores(corpus):
    index = BM25Index()
    index.add_many(corpus[:150])
    for doc in corpus[150:]:  # some candidates live in the tail
        index.add(doc)
    rng = np.random.default_rng(3)
    for text in QUERIES:
        q = tokenize(text)
        all_ids, all_scores = index.score(q)
        full = dict(zip(all_ids.tolist(), all_scores.tolist()))
        cands = rng.choice(len(corpus), 40, replace=False)
        ids, scores = index.score(q, np.concatenate([cands, cands[:5]]))  # duplicates are fine
        assert set(ids.tolist()) == set(cands.tolist()) & set(full)
        assert list(ids) == sorted(ids)
        assert np.allclose(scores, [full[i] for i in ids.tolist()], rtol=1e-6)
    assert len(index.score(["user"], np.array([], dtype=np.int64))[0]) == 0
    with pytest.raises(SearchIndexError):
        index.score(["user"], [0, len(corpus)])


@pytest.mark.parametrize("mmap", [False, True])
def test_save_load_round_trip_and_append(corpus, tmp_path, mmap):
    index = BM25Index(k1=1.2, b=0.6, idf="okapi", epsilon=0.3)
    index.add_many(corpus[:150])
    for doc in corpus[150:190]:
        index.add(doc)  # an unmerged tail at save time
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path, mmap=mmap)
    assert (loaded.k1, loaded.b, loaded.idf, loaded.epsilon) == (1.2, 0.6, "okapi", 0.3)
    assert len(loaded) == 190 and loaded.avgdl == pytest.approx(index.avgdl)
    for text in QUERIES:
        q = tokenize(text)
        assert np.array_equal(loaded.get_scores(q), index.get_scores(q)), text
    for doc in corpus[190:]:
        loaded.add(doc)
    fresh = BM25Index(k1=1.2, b=0.6, idf="okapi", epsilon=0.3)
    fresh.add_many(corpus)
    for text in QUERIES:
        q = tokenize(text)
        np.testing.assert_allclose(loaded.get_scores(q), fresh.get_scores(q), rtol=1e-6)
    loaded.save(tmp_path)  # overwrites the very files it was loaded (or mapped) from
    again = BM25Index.load(tmp_path)
    assert len(again) == len(corpus)
    for text in QUERIES:
        q = tokenize(text)
        np.testing.assert_allclose(again.get_scores(q), fresh.get_scores(q), rtol=1e-6)


def test_load_errors(tmp_path):
    with pytest.raises(SearchIndexError):
        BM25Index.load(tmp_path / "missing")
    index = BM25Index()
    index.add_many([["a", "b"], ["c"]])
    index.save(tmp_path)
    (tmp_path / "meta.json").write_text('{"v":1,"k1":1.5}')
    with pytest.raises(SearchIndexError):
        BM25Index.load(tmp_path)


def doc_len(index: BM25Index, doc: int) -> int:
    """A document's length as the index holds it (a test's view of its internals)."""
    assert 0 <= doc < len(index)
    return int(index._dl[doc])


def test_empty_index_and_docs():
    index = BM25Index()
    assert len(index) == 0 and index.avgdl == 0.0
    assert len(index.score(["x"])[0]) == 0
    assert index.add([]) == 0
    assert index.add_many([[], ["x"]]) == range(1, 3)
    assert list(index.score(["x"])[0]) == [2]
    assert doc_len(index, 0) == 0 and index.avgdl == pytest.approx(1 / 3)
    with pytest.raises(SearchIndexError):
        BM25Index(idf="tfidf")
