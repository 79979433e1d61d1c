"""What the knowledge store already says about a gate's open questions.

EvoDuet's gate looks at stored documents; evoteam's store also holds what teams measured and
concluded (learnings, candidates' notes), from this run and from earlier runs of the project.
A question the store answers is a look-up, not a web search: the gate consults these first.

The store's full-text search falls back to any-word matching, so a hit alone says little; a
hit answers a question when it shares at least two of the question's content words (or all of
them, for a question with fewer). Words of the run's goal count for less: every learning of a
task speaks its vocabulary ("step", "overlap" on the Erdős kit), and a question about a method no
one had tried was answered by three of the run's own notes that shared only those (model-play
mp32, 2026-12-04); a hit needs two of the question's other words, or one beside three of the
goal's (``answers``). That is a deliberately plain rule: the gate's reason names
the hits, and the agent reads them before deciding what to generate.
"""

from __future__ import annotations

import re

from evoteam.servers.knowledge.models import SearchHit
from evoteam.servers.knowledge.store import KnowledgeStore

_WORD = re.compile(r"[a-z0-9_]+")
# Words that appear in almost any question about a task and say nothing about its subject.
_PLAIN = frozenset("""
about after also does doing done from have into make more most much should than that their them
then there these they this what when where which while will with would could being been were your
faster better best slower works work using used does whether how why the and for are can not
""".split())


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _PLAIN}


def answers(question: str, hit: SearchHit, task_words: frozenset[str] = frozenset()) -> bool:
    """Whether `hit` shares enough of the question's content words to bear on it: two of those
    outside ``task_words`` (the run goal's; all of them where the question has fewer), or one
    beside three of the goal's (a goal that names the method a question asks about: "chunked
    WY transform ... token recurrence")."""
    words = content_words(question)
    wanted = words - task_words
    if not wanted:
        return False
    have = content_words(f"{hit.title} {hit.snippet}")
    novel, of_task = len(wanted & have), len(words & task_words & have)
    return novel >= min(2, len(wanted)) or (novel >= 1 and of_task >= 3)


async def stored_answers(store: KnowledgeStore, questions: list[str], limit: int = 5,
                         goal: str = "") -> list[SearchHit]:
    """Learnings and candidates (any run the caller can see) that bear on the questions, best
    match first, each once; words of the run's ``goal`` count for less (answers)."""
    task_words = frozenset(content_words(goal))
    found: dict[str, SearchHit] = {}
    for question in questions:
        if not content_words(question) - task_words:
            continue
        page = await store.search(question, kinds=["learning", "candidate"], limit=limit)
        for hit in page.items:
            if hit.id not in found and answers(question, hit, task_words):
                found[hit.id] = hit
    return list(found.values())[:limit]
