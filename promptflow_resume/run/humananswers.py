"""A human step's question and the answer a person writes under it in the progress file.

The step's entry is its question, ``ANSWER_MARK`` and ``ANSWER_PLACEHOLDER``; the run stops
``awaiting_input`` until the placeholder is replaced::

    human_answer(entry.content)     # None while the placeholder is there
    answer_line(progress_path)      # where the person writes it (1-based), for the message
"""

from __future__ import annotations

from pathlib import Path

from ..base.errors import FlowError
from ..progress.diskio import read_text

#: A human step's entry is its question, this mark, and the answer a person writes in place of
#: the placeholder.
ANSWER_MARK = "\n\nAnswer: "
ANSWER_PLACEHOLDER = "WRITE YOUR ANSWER HERE, then run flow resume"


def awaiting_reason(step_id: str) -> str:
    """The status reason of a run waiting for a person's answer."""
    return f"step {step_id!r} waits for a person's answer, to be written in the progress file"


def human_answer(content: str) -> str | None:
    """The answer written into a human step's entry, or None while there is none."""
    if ANSWER_PLACEHOLDER in content:
        return None
    _, mark, answer = content.rpartition(ANSWER_MARK.strip())
    text = answer if mark else content
    return text.strip() or None


def answer_line(progress_path: Path) -> int | None:
    """The 1-based line of the answer placeholder in a progress file's body, where a person
    writes the answer a human step waits for; None when there is none (or no readable file)."""
    try:
        lines = read_text(progress_path).splitlines()
    except FlowError:
        return None
    # Skip the front matter: the answer goes into the transcript entry in the body.
    closing = next((i for i, line in enumerate(lines[1:], start=1) if line == "---"), 0)
    for number, line in enumerate(lines[closing + 1 :], start=closing + 2):
        if ANSWER_PLACEHOLDER in line:
            return number
    return None
