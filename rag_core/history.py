"""History-aware query rewriting (HAR) and in-prompt history injection (IHI), as pure functions over turns."""
from __future__ import annotations

import logging
import re
from typing import Callable, Sequence

from .lexical import Tokenizer
from .records import Turn

log = logging.getLogger(__name__)

# Pronouns, demonstratives and elliptical openings that point back at the conversation.
_ANAPHORA = re.compile(
    r"它|它们|这个|那个|这种|那种|这些|那些|这样|那样|这病|这虫|这药|该病|该虫|此病|此虫|上面|刚才|前面|同样|还有呢|其他的呢"
    r"|^那|^那么|^还|^再|^要是|^如果|^用啥|^拿啥|^啥时候|^什么时候|^多久|^多少|^几"
)


_LEADING_DEMONSTRATIVE = re.compile(r"^(?:那么|那|这样的话|这样)[，,\s]*")


def needs_rewrite(question: str, tokenizer: Tokenizer) -> bool:
    """A follow-up that cannot stand alone: a pronoun, demonstrative or elliptical opening, or no domain term."""
    q = question.strip()
    return bool(_ANAPHORA.search(q)) or not tokenizer.entities(q)


def _topic_terms(text: str, tokenizer: Tokenizer, limit: int) -> list[str]:
    """Lexicon entities first; without any, the longest content words."""
    terms = tokenizer.entities(text)
    if not terms:
        words = sorted({w for w in tokenizer.words(text) if len(w) >= 2}, key=lambda w: (-len(w), text.find(w), w))
        terms = words
    return terms[:limit]


def rewrite_query(
    question: str,
    history: Sequence[Turn],
    tokenizer: Tokenizer,
    turns: int = 2,
    llm_rewrite: Callable[[str, Sequence[Turn]], str | None] | None = None,
) -> str:
    """q′ = f(q, last `turns` turns): the question, preceded by the topic terms of the recent conversation when it
    does not stand alone. An LLM rewrite, when given and it answers sensibly, takes precedence."""
    recent = list(history)[-turns:] if turns > 0 else []
    if not recent or not needs_rewrite(question, tokenizer):
        return question
    if llm_rewrite is not None:
        try:
            rewritten = llm_rewrite(question, recent)
        except Exception as exc:  # the rule-based rewrite below always works
            log.warning("LLM query rewrite failed, using the rule-based one: %s", exc)
            rewritten = None
        if rewritten and 2 <= len(rewritten.strip()) <= 200:
            return rewritten.strip()
    present = set(tokenizer.entities(question))
    carried: list[str] = []
    # The user's own recent words carry the topic; the assistant's reply adds the terms it introduced.
    for turn in sorted(recent, key=lambda t: t.role != "user"):
        for term in _topic_terms(turn.content, tokenizer, limit=6):
            if term not in present and term not in question and term not in carried:
                carried.append(term)
    carried = carried[:8]
    if not carried:
        return question
    question = _LEADING_DEMONSTRATIVE.sub("", question) or question  # "那要打什么药" → "要打什么药"
    return f"{' '.join(carried)} {question}".strip()


def inject_history(history: Sequence[Turn], turns: int = 8, chars: int = 800) -> list[Turn]:
    """The last `turns` turns for the prompt: assistant replies clipped to their first `chars` characters, user
    turns to their last `chars` characters."""
    recent = list(history)[-turns:] if turns > 0 else []
    return [
        Turn(t.role, t.content[:chars] if t.role == "assistant" else t.content[-chars:] if chars else "")
        for t in recent
    ]
