"""Context compaction: when a run outgrows the model's window, older turns become a summary.

Before a model call whose request would pass ``threshold`` (default 80%) of the context window,
flow asks the model to summarise the oldest turns that are not needed verbatim, and records the
answer as a ``compaction`` entry naming the entries it covers (``Entry.covers``). From then on
requests carry the summary in place of those entries (``conversation.RequestView``); the
entries themselves stay in the transcript, so nothing is lost from the file. Kept verbatim:
the system entry, every step's prompt, and the most recent turns (up to ``keep_recent`` of the
window). A cut never falls between a tool call and its result: it falls only before an
assistant reply, a user message, a note or an earlier summary. The compaction request is a
model call like any other (retried, recorded by ``--record``, counted in the usage), and its
entry is durable before the next request is built; a process killed in between finds no entry
on resume and compacts again::

    plan = plan_compaction(view, keep_tokens=30_000, max_tokens=60_000)
    request = summary_request(plan, model="gpt-4o", params={})
    entry = compaction_entry(plan, reply.content, step="main")

``compact_run`` does the same by hand for a stopped run (``flow compact``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import faults
from ..base.clock import now_iso
from ..base.errors import FileNotFoundFlowError
from ..base.redact import Redactor
from ..chat import Message
from ..progress import ProgressStore
from ..progress.location import progress_file
from ..progress.model import Entry, Run, Usage
from ..providers.context import context_window, estimate_tokens, text_tokens
from ..providers.provider import Provider, Purpose, Reply, Request
from ..workflow.records import Compaction, Workflow
from .conversation import RequestView
from .recorded import check_endpoint, check_params, make_provider, workflow_for
from .runoptions import RunOptions

if TYPE_CHECKING:
    from .events import Reporter

#: What the model is asked to do with the turns it summarises.
INSTRUCTIONS = (
    "You compact the history of a long-running task so that it fits the model's context "
    "window. Below is the oldest part of the conversation, as numbered transcript entries. "
    "Write a concise summary that lets the work continue without it: what was done, what was "
    "found (facts, numbers, file names, decisions), which tool calls were made and what their "
    "results said where later steps still need them, and what remains open. The task prompts "
    "and the most recent turns are kept verbatim and are not shown here; do not restate them. "
    "Answer with the summary only."
)
#: A tool result's characters shown to the summariser (the file keeps the whole result).
RESULT_PREVIEW_CHARS = 2_000
#: A message's characters shown to the summariser.
MESSAGE_CHARS = 8_000
#: Roles a cut may fall before: never a tool call or result, which belong to their reply.
BOUNDARY_ROLES = frozenset({"system", "user", "assistant", "note", "compaction"})
#: Tokens set aside in the summariser's request for the instructions and its answer.
SUMMARY_RESERVE_TOKENS = 1_000


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction summarises: the entries of the request view, and the id range."""

    covers: tuple[int, int]
    entries: tuple[Entry, ...]
    #: Estimated tokens of those entries as the requests carried them.
    tokens: int


def window_for(settings: Compaction, model: str | None) -> int | None:
    """The context window to respect: the workflow's ``context_window:``, else the table's."""
    return settings.context_window or context_window(model)


def entry_tokens(entry: Entry) -> int:
    """A character estimate of what ``entry`` adds to a request."""
    return text_tokens(entry.content) + text_tokens(entry.tool or "") + 4


def _key(entry: Entry) -> int:
    return entry.covers[1] if entry.role == "compaction" and entry.covers else entry.id


def _first(entry: Entry) -> int:
    return entry.covers[0] if entry.role == "compaction" and entry.covers else entry.id


def plan_compaction(
    view: RequestView, *, keep_tokens: int, max_tokens: int
) -> CompactionPlan | None:
    """The oldest turns of ``view`` to summarise, or None when nothing can be.

    The newest turns are kept while they fit in ``keep_tokens`` (the last turn always is);
    of the rest, every entry not kept verbatim is covered, from the oldest, while the
    summariser's input stays within ``max_tokens`` (at least one turn).
    """
    entries = view.entries
    boundaries = [i for i, e in enumerate(entries) if e.role in BOUNDARY_ROLES]
    if not boundaries:
        return None
    cut = boundaries[-1]
    total = 0
    for index in range(len(entries) - 1, -1, -1):
        total += entry_tokens(entries[index])
        if total > keep_tokens and index < cut:
            break
        if entries[index].role in BOUNDARY_ROLES and index < cut:
            cut = index
    candidates = [e for e in entries[:cut] if not view.is_kept(e)]
    covered: list[Entry] = []
    size = 0
    for entry in candidates:
        cost = text_tokens(entry_text(entry))
        if covered and entry.role in BOUNDARY_ROLES and size + cost > max_tokens:
            break
        covered.append(entry)
        size += cost
    # Only whole turns: drop a tail that is not followed by a boundary (a reply whose calls
    # were cut off from their results cannot be, but a capped prefix is checked anyway).
    while covered and covered[-1] is not candidates[-1]:
        following = candidates[len(covered)]
        if following.role in BOUNDARY_ROLES:
            break
        covered.pop()
    if not covered:
        return None
    if len(covered) == 1 and covered[0].role == "compaction":
        # One earlier summary alone: summarising it again frees nothing and costs a call
        # (a window too small for the newest turns would ask for it before every request).
        return None
    return CompactionPlan(
        covers=(_first(covered[0]), _key(covered[-1])),
        entries=tuple(covered),
        tokens=sum(entry_tokens(e) for e in covered),
    )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit:,} more characters, kept in the progress file]"


def entry_text(entry: Entry) -> str:
    """One covered entry as the summariser reads it: a bracketed head, then its text."""
    if entry.role == "compaction" and entry.covers:
        head = f"[summary of entries {entry.covers[0]}-{entry.covers[1]}]"
        return f"{head}\n{entry.content}"
    if entry.role == "tool_call":
        return f"[{entry.id} · call to {entry.tool} ({entry.call_id})]\n{entry.content}"
    if entry.role == "tool_result":
        error = " · error" if entry.is_error else ""
        head = f"[{entry.id} · result of {entry.tool} ({entry.call_id}){error}]"
        return f"{head}\n{_cut(entry.content, RESULT_PREVIEW_CHARS)}"
    return f"[{entry.id} · {entry.role}]\n{_cut(entry.content, MESSAGE_CHARS)}"


def summary_request(
    plan: CompactionPlan, *, model: str | None, params: Mapping[str, Any]
) -> Request:
    """The model call that asks for the summary of ``plan``'s entries (no tools)."""
    text = "\n\n".join(entry_text(e) for e in plan.entries)
    first, last = plan.covers
    return Request(
        messages=(
            Message("system", INSTRUCTIONS),
            Message("user", f"Transcript entries {first} to {last}:\n\n{text}"),
        ),
        model=model,
        params=dict(params),
        purpose=Purpose.COMPACTION,
    )


def compaction_entry(plan: CompactionPlan, summary: str, step: str | None) -> Entry:
    """The transcript entry recording a summary (its id is given when it is appended)."""
    text = summary.strip() or "(the model returned an empty summary)"
    return Entry(id=0, role="compaction", content=text, step=step, covers=plan.covers)


def budgets(settings: Compaction, window: int) -> tuple[int, int]:
    """(tokens the recent turns may keep, tokens the summariser may read) for ``window``."""
    keep = int(window * settings.keep_recent)
    read = max(int(window * settings.threshold) - SUMMARY_RESERVE_TOKENS, window // 4)
    return keep, read


def compactions(entries: Sequence[Entry]) -> list[Entry]:
    """The compaction entries of a transcript, in order."""
    return [e for e in entries if e.role == "compaction"]


@dataclass(frozen=True)
class Compacted:
    """One compaction done: the entry to append (no id yet), what it covers, its usage."""

    entry: Entry
    plan: CompactionPlan
    usage: Usage
    reply: Reply


#: How the attempt note on compactions starts (``flow log`` shows it).
TALLY_PREFIX = "context compaction: "


@dataclass
class CompactionTally:
    """The compactions of one attempt, kept as one attempt note so that ``flow log`` says how
    many summaries the attempt asked for, what they took of its usage and what the newest
    covers (a long run compacts often; one note per compaction would bury the others)."""

    count: int = 0
    usage: Usage = field(default_factory=Usage)
    note: str | None = None

    def add(self, done: Compacted, notes: list[str]) -> str:
        """Count ``done`` and write the attempt's note in ``notes`` (replaced in place)."""
        self.count += 1
        self.usage.add(done.usage)
        first, last = done.plan.covers
        u = self.usage
        text = (
            f"{TALLY_PREFIX}{self.count} {'summary' if self.count == 1 else 'summaries'}, "
            f"{u.input_tokens:,} in / {u.output_tokens:,} out tokens, ${u.cost_usd:.4f} "
            f"(the newest covers entries {first}-{last})"
        )
        if self.note is not None and self.note in notes:
            notes[notes.index(self.note)] = text
        else:
            notes.append(text)
        self.note = text
        return text


def summarise(
    view: RequestView,
    settings: Compaction,
    window: int,
    *,
    call: Callable[[Request], Reply],
    cost: Callable[[Reply], float],
    model: str | None,
    params: Mapping[str, Any],
    step: str | None,
    redact: Callable[[str], str],
    announce: Callable[[CompactionPlan], None] | None = None,
) -> Compacted | None:
    """Plan a compaction of ``view`` for ``window``, ask the model (through ``call``) for the
    summary and return the entry to record; None when nothing can be compacted."""
    keep, read = budgets(settings, window)
    plan = plan_compaction(view, keep_tokens=keep, max_tokens=read)
    if plan is None:
        return None
    if announce is not None:
        announce(plan)
    reply = call(summary_request(plan, model=model, params=params))
    faults.point("compaction.replied")
    usage = Usage(
        input_tokens=reply.usage.input_tokens,
        output_tokens=reply.usage.output_tokens,
        cached_tokens=reply.usage.cached_tokens,
        cost_usd=cost(reply),
        turns=1,
    )
    return Compacted(compaction_entry(plan, redact(reply.content), step), plan, usage, reply)


def view_tokens(view: RequestView, model: str | None) -> int:
    """An estimate of the tokens a request built from ``view`` sends (without tools)."""
    return estimate_tokens(Request(messages=view.messages(), model=model))


@dataclass(frozen=True)
class ContextStatus:
    """What ``flow status`` says about a run's context: how many compactions its transcript
    holds, the ids the newest covers, and how big the next request would be against the
    window (docs/spec.md 4.6)."""

    #: Compaction entries in the transcript.
    count: int
    #: First and last id the newest compaction covers (None without one).
    covers: tuple[int, int] | None
    #: The conversation as the next request would send it (summaries in place), estimated.
    tokens: int
    #: The context window (``context_window:`` or the model's); None when not known.
    window: int | None

    @property
    def percent(self) -> int | None:
        """The next request's share of the window, in percent (None without a window)."""
        return round(100 * self.tokens / self.window) if self.window else None

    def to_dict(self) -> dict[str, Any]:
        """``compactions`` and ``context`` of the ``flow status --json`` document."""
        return {
            "compactions": {
                "count": self.count,
                "covers": list(self.covers) if self.covers else None,
            },
            "context": {"tokens": self.tokens, "window": self.window, "percent": self.percent},
        }

    def text(self, model: str | None, *, next_request: bool = True) -> str:
        """One line for ``flow status``, e.g. ``compactions: 3 (entries 3-412 summarised);
        next request ≈ 5,100 of a 8,000-token context window (64%)``; without the size when
        no request is to come (a completed run)."""
        if self.count:
            assert self.covers is not None
            done = (
                f"compactions: {self.count} (entries {self.covers[0]}-{self.covers[1]} summarised)"
            )
        else:
            done = "compactions: none"
        if not next_request:
            return done
        if self.window:
            size = (
                f"next request ≈ {self.tokens:,} of a {self.window:,}-token context window "
                f"({self.percent}%)"
            )
        else:
            size = (
                f"next request ≈ {self.tokens:,} tokens (no context window known for "
                f"{model or 'the model'}; set context_window: in the workflow)"
            )
        return f"{done}; {size}"


def context_status(
    entries: Sequence[Entry], settings: Compaction, model: str | None
) -> ContextStatus:
    """The ``ContextStatus`` of a transcript (the entries a resume keeps)."""
    view = RequestView()
    view.update(entries)
    summaries = [e for e in entries if e.role == "compaction" and e.covers is not None]
    return ContextStatus(
        count=len(summaries),
        covers=summaries[-1].covers if summaries else None,
        tokens=view_tokens(view, model),
        window=window_for(settings, model),
    )


@dataclass
class CompactOutcome:
    """What ``compact_run`` did: the summary entry it added, or why it added none."""

    path: Path
    compacted: bool
    #: First and last id of the entries the summary stands for.
    covers: tuple[int, int] | None = None
    entry: int | None = None
    #: Estimated tokens of the next request before and after.
    tokens_before: int = 0
    tokens_after: int = 0
    usage: Usage = field(default_factory=Usage)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` form."""
        return {
            "path": str(self.path),
            "compacted": self.compacted,
            "covers": list(self.covers) if self.covers else None,
            "entry": self.entry,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "usage": self.usage.to_dict(),
            "reason": self.reason,
        }


def compact_run(
    progress_path: str | Path,
    options: RunOptions = RunOptions(),
    *,
    workflow_path: str | Path | None = None,
) -> CompactOutcome:
    """Compact a stopped run by hand: summarise its oldest turns into one ``compaction``
    entry, as a run does before its context would overflow (the rules are above).

    Of ``options``, the connection (provider, model, base URL), ``record`` and ``reporter``
    apply; ``workflow_path`` is ``--workflow`` (the workflow moved).

    The window is the workflow's ``context_window:`` or the model's; when neither is known,
    the run's current size stands for it, so the recent turns kept are ``keep_recent`` of
    what the next request would send now. A live run is refused with the lock error.
    """
    from ..providers.givenprices import from_record
    from ..providers.pricing import cost_usd
    from ..providers.retry import call_with_retry

    path = progress_file(progress_path)
    if not path.exists():
        raise FileNotFoundFlowError(f"no progress file at {path}.", path=path)
    store, run, _ = ProgressStore.open(path)
    try:
        wf = workflow_for(
            run, path, workflow_path, workspace=options.root(), agent_dirs=options.agent_dirs
        )
        redactor = Redactor.from_environment()
        provider_obj = _connect(run, wf, path, options, redactor)
        view = RequestView()
        view.update(run.transcript)
        before = view_tokens(view, run.config.model)
        window = window_for(wf.compaction, run.config.model) or max(before, 1)
        step = run.cursor.step
        given = from_record(run.config.prices)
        done = summarise(
            view,
            wf.compaction,
            window,
            call=lambda request: call_with_retry(provider_obj, request, wf.retry),
            cost=lambda reply: cost_usd(reply.model or run.config.model, reply.usage, given) or 0.0,
            model=run.config.model,
            params=run.config.params,
            step=step,
            redact=lambda text: redactor.redact(text)[0],
            announce=_announcer(options.reporter),
        )
        if done is None:
            return CompactOutcome(
                path=path,
                compacted=False,
                tokens_before=before,
                tokens_after=before,
                reason="nothing to compact: only the step prompts and the most recent turns "
                "are left, and those are kept verbatim",
            )
        _record_compaction(run, done, step)
        store.save(run, [done.entry])
        store.checkpoint(run)
        view.update(run.transcript)
        return CompactOutcome(
            path=path,
            compacted=True,
            covers=done.plan.covers,
            entry=done.entry.id,
            tokens_before=before,
            tokens_after=view_tokens(view, run.config.model),
            usage=done.usage,
        )
    finally:
        store.close()


def _connect(
    run: Run, wf: Workflow, path: Path, options: RunOptions, redactor: Redactor
) -> Provider:
    """The provider ``flow compact`` calls: the run's connection, or the one ``options`` name
    (provider, model, base URL), checked as a resume checks it; ``record`` applies."""
    check_params(run, wf, path)
    if options.provider is not None:
        run.config.provider = options.provider
    if options.model is not None:
        run.config.model = options.model
    check_endpoint(run, path, None, options.base_url)
    return make_provider(
        run,
        path,
        stream=False,
        record=options.record,
        redactor=redactor,
        base_url=options.base_url,
    )


def _announcer(reporter: Reporter | None) -> Callable[[CompactionPlan], None] | None:
    """What tells ``reporter`` (if any) which entries are being compacted."""
    if reporter is None:
        return None
    return lambda plan: reporter.notice(
        f"compacting entries {plan.covers[0]}-{plan.covers[1]} "
        f"(about {plan.tokens:,} tokens) into a summary."
    )


def _record_compaction(run: Run, done: Compacted, step: str | None) -> None:
    """Add the summary entry to ``run``, its usage to the run's, the step's and the last
    attempt's, and a note to that attempt."""
    done.entry.id = run.next_entry_id()
    run.transcript.append(done.entry)
    run.usage.add(done.usage)
    if step is not None and step in run.steps:
        run.steps[step].usage.add(done.usage)
    if run.attempts:
        # No attempt of its own: the last one carries the call, with a note saying so, so
        # that `flow log` accounts for every model call.
        last = run.attempts[-1]
        last.usage.add(done.usage)
        first, final = done.plan.covers
        last.notes.append(
            f"flow compact: entries {first}-{final} summarised in entry {done.entry.id}"
        )
    run.updated = now_iso()
