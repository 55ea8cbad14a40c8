"""Keywords: words, stopwords, synonym groups, plurals, and what ``keywords_for`` keeps."""

from __future__ import annotations

import pytest

from promptflow_resume.detect import MAX_KEYWORDS, keywords_for, normalize_words
from promptflow_resume.detect.keywords import parse_vocabulary, singular, vocabulary
from tests.support.detect import make_workflow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # stopwords and task verbs go, the subject stays
        ("Build a REST API with JWT login", ["api", "auth"]),
        ("Create the frontend and implement it", ["frontend"]),
        ("the of and or to for with in on", []),
        # every synonym group of the issue, both ways round
        ("authentication login jwt oauth session", ["auth"]),
        ("rest endpoint fastapi flask routes http", ["api"]),
        ("database postgres sqlite mysql sql orm", ["db"]),
        ("ui react nextjs vue svelte html css", ["frontend"]),
        ("worker celery task async job broker", ["queue"]),
        ("redis memcache caching ttl", ["cache"]),
        ("pytest jest unittest spec tdd", ["test"]),
        # plurals, case, punctuation
        ("Endpoints, DATABASES; Tests!", ["api", "db", "test"]),
        ("queries entries boxes classes", ["box", "class", "entry", "query"]),
        ("status analysis redis postgres", ["analysis", "cache", "db", "status"]),
        # next.js is one word; URLs and ${...} placeholders are not content
        ("Port it to Next.js", ["frontend", "port"]),
        ("See https://example.com/docs/api for ${input:topic}", []),
        # numbers and one-letter words carry nothing; unicode words are kept
        ("v2 of 2026 x y", ["v2"]),
        ("Übersetze die Benutzeroberfläche", ["benutzeroberfläche", "die", "übersetze"]),
    ],
)
def test_normalize_words(text: str, expected: list[str]) -> None:
    assert normalize_words(text) == expected


def test_stored_keywords_are_normalized_again() -> None:
    # A hand-edited or older progress file: phrases, case, synonyms, duplicates.
    assert normalize_words(["REST api", "Login", "auth", "auth", "", "the"]) == ["api", "auth"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("endpoints", "endpoint"),
        ("queries", "query"),
        ("classes", "class"),
        ("boxes", "box"),
        ("status", "status"),
        ("process", "process"),
        ("analysis", "analysis"),
        ("macos", "macos"),
        ("bus", "bus"),
        ("its", "its"),
    ],
)
def test_singular(word: str, expected: str) -> None:
    assert singular(word) == expected


def test_shipped_vocabulary_has_the_issue_groups() -> None:
    voc = vocabulary()
    for word, group in [
        ("jwt", "auth"),
        ("oauth", "auth"),
        ("fastapi", "api"),
        ("postgres", "db"),
        ("svelte", "frontend"),
        ("broker", "queue"),
        ("ttl", "cache"),
        ("tdd", "test"),
    ]:
        assert voc.synonyms[word] == group
    for word in ("a", "an", "the", "build", "create", "implement", "add", "make", "no", "yes"):
        assert word in voc.stopwords


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stopwords: [a]\nsynonyms:\n  x: [same]\n  y: [same]\n", "one group only"),
        ("stopwords: [a]\nsynonyms:\n  x: [a]\n", "both a stopword and a synonym"),
        ("stopwords: [no, a]\n", "quote yes/no/on/off"),
        ("- just a list\n", "expected a mapping"),
        ("stopwords: []\nsynonyms: [a, b]\n", "map a group name"),
    ],
)
def test_malformed_vocabulary_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_vocabulary(text)


def test_vocabulary_version_changes_with_content() -> None:
    one = parse_vocabulary("stopwords: [a]\nsynonyms:\n  db: [sql]\n")
    two = parse_vocabulary("stopwords: [a]\nsynonyms:\n  db: [sql, orm]\n")
    assert one.version != two.version
    assert parse_vocabulary("stopwords: [a]\nsynonyms:\n  db: [sql]\n").version == one.version


def test_keywords_for_uses_name_description_steps_and_input_values() -> None:
    wf = make_workflow(
        name="billing-service",
        description="Add invoices to the billing service",
        steps=[("Schema", "Design tables for ${input:entity}."), ("Worker", "Send reminders.")],
        context="Use Python.",
    )
    words = keywords_for(wf, {"entity": "customers", "retries": 3, "tags": ["stripe", "pdf"]})
    assert words == sorted(words)
    for word in ("billing", "service", "invoice", "customer", "stripe", "pdf", "queue", "python"):
        assert word in words
    assert "input" not in words and "entity" not in words  # placeholder syntax is not content
    assert "3" not in words


def test_keywords_for_is_bounded_and_keeps_the_most_telling_words() -> None:
    filler = " ".join(f"word{i}" for i in range(200))
    wf = make_workflow(
        name="payments",
        description="Stripe checkout",
        steps=[("Refunds", filler)],
    )
    words = keywords_for(wf, {"currency": "euro"})
    assert len(words) == MAX_KEYWORDS
    # name, description and inputs first, then step titles, then prompt text
    for word in ("payment", "stripe", "checkout", "euro", "refund"):
        assert word in words
    assert keywords_for(wf, {"currency": "euro"}, limit=5) == [
        "checkout",
        "euro",
        "payment",
        "refund",
        "stripe",
    ]


def test_keywords_for_prefers_frequent_prompt_words_when_cut() -> None:
    wf = make_workflow(
        name="x1",
        description=None,
        steps=[("", "rare1 rare2 rare3 kafka kafka kafka kafka")],
    )
    assert keywords_for(wf, {}, limit=2) == ["queue", "x1"]
