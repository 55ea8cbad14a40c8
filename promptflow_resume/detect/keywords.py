"""Keywords of a run: the words that say what a workflow and its inputs are about.

Text is lower-cased and split into words; URLs and ``${...}`` placeholders are dropped;
stopwords are removed; a word of a synonym group becomes the group's name; other words lose a
plural ``s``. The vocabulary is data (``promptflow_resume/data/keywords.yaml``)::

    >>> normalize_words("Build a REST API with JWT login")
    ['api', 'auth']
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..base import yamlio
from ..base.packagedata import read_text
from ..workflow.records import Workflow

#: Keywords stored per run, at most. The most telling words are kept (see ``keywords_for``).
MAX_KEYWORDS = 64

_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\$\{[^}\n]*\}")
# "next.js", "node.js" are one word to people; join them so the synonym lists can name them.
_DOT_JS = re.compile(r"(?<=[^\W_])\.js\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Vocabulary:
    """Stopwords and the synonym map (word -> group name) the detector compares runs with."""

    stopwords: frozenset[str]
    synonyms: Mapping[str, str]
    #: Short hash of the vocabulary: stored runs indexed with another vocabulary are re-read.
    version: str
    #: stored keyword -> its normalized form (None: dropped); stored keywords repeat a lot.
    cache: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)


def parse_vocabulary(text: str, *, source: str = "keywords.yaml") -> Vocabulary:
    """Build a ``Vocabulary`` from a keywords file's YAML text; ValueError if malformed."""
    data = yamlio.load(text, path=source)
    if not isinstance(data, dict):
        raise ValueError(f"{source}: expected a mapping with 'stopwords' and 'synonyms'")
    raw_stop = data.get("stopwords") or []
    raw_groups = data.get("synonyms") or {}
    if not isinstance(raw_stop, list) or not all(isinstance(w, str) for w in raw_stop):
        raise ValueError(f"{source}: 'stopwords' must be a list of strings (quote yes/no/on/off)")
    if not isinstance(raw_groups, dict):
        raise ValueError(f"{source}: 'synonyms' must map a group name to a list of words")
    stopwords = frozenset(w.casefold() for w in raw_stop)
    synonyms: dict[str, str] = {}
    for group, words in raw_groups.items():
        if not isinstance(group, str) or not isinstance(words, list):
            raise ValueError(f"{source}: synonyms.{group} must be a list of words")
        head = group.casefold()
        for word in [head, *words]:
            if not isinstance(word, str):
                raise ValueError(f"{source}: synonyms.{group}: {word!r} is not a string")
            key = word.casefold()
            if synonyms.get(key, head) != head:
                raise ValueError(
                    f"{source}: {key!r} is in synonym groups {synonyms[key]!r} and {head!r}; "
                    "a word may belong to one group only"
                )
            if key in stopwords:
                raise ValueError(f"{source}: {key!r} is both a stopword and a synonym")
            synonyms[key] = head
    digest = hashlib.sha256(
        repr((sorted(stopwords), sorted(synonyms.items()))).encode("utf-8")
    ).hexdigest()[:16]
    return Vocabulary(stopwords=stopwords, synonyms=synonyms, version=digest)


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """The shipped vocabulary, read once per process."""
    text = read_text("data/keywords.yaml")
    return parse_vocabulary(text, source="promptflow_resume/data/keywords.yaml")


def singular(word: str) -> str:
    """A light plural stripper: ``endpoints`` -> ``endpoint``, ``queries`` -> ``query``.

    It only has to map both runs' words the same way, not be good English, so it stays small.
    """
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is", "os")):
        return word[:-1]
    return word


def _normalize(word: str, vocab: Vocabulary) -> str | None:
    """One raw word -> its keyword, or None when it carries no meaning."""
    if len(word) < 2 or word.isdigit() or word in vocab.stopwords:
        return None
    head = vocab.synonyms.get(word)
    if head is not None:
        return head
    base = singular(word)
    head = vocab.synonyms.get(base)
    if head is not None:
        return head
    if base in vocab.stopwords:
        return None
    return base


def words(text: str, vocab: Vocabulary | None = None) -> list[str]:
    """The keywords of ``text`` in order of appearance, repeats kept (for counting)."""
    voc = vocab or vocabulary()
    text = _URL.sub(" ", text)
    text = _PLACEHOLDER.sub(" ", text)
    text = _DOT_JS.sub("js", text)
    found: list[str] = []
    for raw in _WORD.findall(text.casefold()):
        word = _normalize(raw, voc)
        if word is not None:
            found.append(word)
    return found


def normalize_words(text: str | Iterable[str], vocab: Vocabulary | None = None) -> list[str]:
    """Sorted, distinct keywords of a text or of a list of words (e.g. keywords from a file)."""
    voc = vocab or vocabulary()
    if isinstance(text, str):
        return sorted(set(words(text, voc)))
    found: set[str] = set()
    for item in text:
        item = str(item)
        if item in voc.cache:
            word = voc.cache[item]
            if word is not None:
                found.add(word)
            continue
        several = words(item, voc)
        if len(several) <= 1 and len(voc.cache) < 65536:
            voc.cache[item] = several[0] if several else None
        found.update(several)
    return sorted(found)


def _input_texts(value: Any) -> Iterable[str]:
    """The text inside an input value: strings, and strings nested in lists and mappings."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _input_texts(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _input_texts(item)


def keywords_for(
    workflow: Workflow, inputs: Mapping[str, Any], *, limit: int = MAX_KEYWORDS
) -> list[str]:
    """Keywords for a new run of ``workflow`` with ``inputs``: sorted, distinct, at most ``limit``.

    When there are more than ``limit`` words, the name, description and input values win over
    step titles, which win over prompt text; within a tier, frequent words win.
    """
    voc = vocabulary()
    tiers: list[list[str]] = [
        [workflow.name, workflow.description or "", *_input_texts(dict(inputs))],
        [step.title for step in workflow.steps],
        [workflow.context, *(step.body for step in workflow.steps)],
    ]
    rank: dict[str, tuple[int, int]] = {}  # word -> (tier, -count): smaller is better
    for tier, texts in enumerate(tiers):
        for text in texts:
            for word in words(text, voc):
                best_tier, neg_count = rank.get(word, (tier, 0))
                rank[word] = (min(best_tier, tier), neg_count - 1)
    chosen = sorted(rank, key=lambda w: (rank[w], w))[: max(limit, 0)]
    return sorted(chosen)
