"""The in-memory model of one run: what ``progress.md`` holds.

These are plain typed records: the run's here, a transcript entry's in ``entry`` (``Entry``,
also importable from here), the hooks' in ``hookledger``, the file snapshots' in
``filesnapshots``. The progress package turns them into a file and back
(``render``/``parse``), checks them (``validate``) and stores them (``store``); the engine and
reconcile modules change them; nothing else knows the disk format.

Invariant (tested): ``parse(render(run)) == run`` for every run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..base.permissions import AllowLists as AllowLists  # kept in the run's config
from ..base.release import VERSION
from ..base.traceids import trace_id_for
from .entry import Entry as Entry  # where most of the records' users import it
from .filesnapshots import Snapshots
from .hookledger import HookLedger
from .versions import FORMAT_MINOR as FORMAT_MINOR  # where the records' users import them
from .versions import FORMAT_VERSION as FORMAT_VERSION
from .versions import MIN_FLOW

RunStatus = Literal[
    "running",
    "paused",
    "interrupted",
    "failed",
    "timeout",
    "budget_exhausted",
    "needs_review",
    "awaiting_input",
    "awaiting_approval",
    "suspended",
    "completed",
]
RUN_STATUSES: tuple[str, ...] = (
    "running",
    "paused",
    "interrupted",
    "failed",
    "timeout",
    "budget_exhausted",
    "needs_review",
    "awaiting_input",
    "awaiting_approval",
    "suspended",
    "completed",
)
#: Statuses a run can be resumed from (``running`` too, when its owner is dead).
RESUMABLE_STATUSES: frozenset[str] = frozenset(RUN_STATUSES) - {"completed"}

StepStatus = Literal["pending", "running", "completed", "failed", "skipped"]
STEP_STATUSES: tuple[str, ...] = ("pending", "running", "completed", "failed", "skipped")
#: Step statuses that count as done: no work of the step is left (every reader counts these).
DONE_STEP_STATUSES: frozenset[str] = frozenset({"completed", "skipped"})


def step_counts(statuses: Iterable[object], cursor_total: int | None) -> tuple[int, int]:
    """How many steps are done (``DONE_STEP_STATUSES``) and how many there are: the cursor's
    total, else the number of step records, never fewer than the done ones. One rule for every
    reader: the full run (``Run.step_counts``) and a front matter read alone (``flow list``).
    A hand-edited status that is no string (a list, a mapping) is simply not done."""
    listed = list(statuses)
    done = sum(1 for status in listed if isinstance(status, str) and status in DONE_STEP_STATUSES)
    return done, max(cursor_total or len(listed), done)


@dataclass
class Usage:
    """Tokens and cost, summed over model replies (and carried across resumes)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0

    def add(self, other: Usage) -> None:
        """Accumulate ``other`` into this record."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        self.cost_usd = round(self.cost_usd + other.cost_usd, 6)
        self.turns += other.turns

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int | float]:
        """The JSON form used by ``--json`` outputs."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "turns": self.turns,
        }


@dataclass
class StepState:
    """Where one workflow step stands."""

    status: StepStatus = "pending"
    attempts: int = 0
    #: Transcript entry id of the step's final answer (its output), once completed.
    output_entry: int | None = None
    started: str | None = None
    finished: str | None = None
    usage: Usage = field(default_factory=Usage)
    #: Number of model turns taken in this step (for the step's own turn limit).
    turns: int = 0
    #: A workflow step's child run: its progress file, relative to this file's folder.
    child: str | None = None
    #: The child runs of the step's subagent calls, by tool call id (docs/spec.md 4.14).
    agents: dict[str, AgentChild] = field(default_factory=dict)


@dataclass
class AgentChild:
    """The child run of one subagent call (``steps.<id>.agents.<call-id>``)."""

    #: The agent's name, as the call named it.
    agent: str
    #: Its progress file, relative to this file's folder, with forward slashes.
    child: str
    #: What of the child's usage is added to this run's so far: a child that stopped and
    #: resumed adds only what is new, so its usage is counted once.
    usage: Usage = field(default_factory=Usage)


@dataclass
class InFlight:
    """A tool call whose start was recorded but whose result was not."""

    call_id: str
    tool: str
    step: str
    #: Transcript entry id of the ``tool_call`` entry.
    entry: int
    started: str
    idempotent: bool
    #: For an edit: the file and its hashes before and after (``{path, before, after}``), so
    #: that resume can tell an applied edit from one that never happened.
    expect: dict[str, str] | None = None
    #: For an MCP tool: the server that ran it (``{name, config, id}``: its name, the
    #: configuration file it came from, a hash of how it is started), so that resume decides
    #: from what was recorded and runs it again only on the same server.
    server: dict[str, str] | None = None


ApprovalDecision = Literal["pending", "approved", "denied"]
APPROVAL_DECISIONS: tuple[str, ...] = ("pending", "approved", "denied")


@dataclass
class Approval:
    """A recorded tool call the approval policy holds until a person decides (spec 4.17).

    Written with ``decision: pending`` when the run stops ``awaiting_approval``; ``flow
    approve``/``flow deny`` (or a hand edit) fill in the decision. A decision only chooses
    between running a call and refusing it: the call itself is the one in the transcript, and
    it runs only if this machine recorded it (its seal, spec 10.1).
    """

    call_id: str
    tool: str
    step: str
    #: Transcript entry id of the ``tool_call`` entry.
    entry: int
    #: The start of the call's arguments, for the person deciding (never what runs).
    preview: str
    #: Why the call needs approval: the policy pattern it matched (``approve: edit``, ...).
    why: str
    decision: ApprovalDecision = "pending"
    #: Who decided (``git config user.name``, else ``$USER``), when and on which machine.
    by: str | None = None
    at: str | None = None
    host: str | None = None
    #: For a denial: what the model is told; for an approval: an optional remark.
    reason: str | None = None


@dataclass
class ErrorInfo:
    """The last error that stopped a run."""

    type: str
    message: str
    at: str
    step: str | None = None


@dataclass
class RefusedModel:
    """A model the provider refused during an attempt, and what it said."""

    model: str
    message: str


@dataclass
class Attempt:
    """One process's go at the run: from ``flow run``/``flow resume`` until it stopped."""

    n: int
    started: str
    ended: str | None = None
    status: str | None = None
    reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    #: The id the attempt's first entry got (the next id when it started): which attempt
    #: recorded an entry, where whole-second times cannot tell (traces, docs/spec.md 13).
    #: None in files written before format 7.
    first_entry: int | None = None
    #: Free-form notes for people: ``--set`` overrides, hand edits detected, workflow changes
    #: accepted. Nothing reads them back: what a program needs is a field below.
    notes: list[str] = field(default_factory=list)
    #: The notes that report hand edits flow found and used before this attempt went on (or
    #: that ``flow rewind`` kept), each also in ``notes``; written by ``EditNote``.
    edits: list[str] = field(default_factory=list)
    #: The hash of each MCP server's tool list when this attempt started (server name ->
    #: ``sha256:<16 hex>``), so the next resume notices a changed list.
    mcp_tools: dict[str, str] = field(default_factory=dict)
    #: For a run with fallback models (``RunConfig.models``): the model this attempt's last
    #: model call went to (None until one answered, or when every model was refused).
    model: str | None = None
    #: The models the provider refused in this attempt as unknown or unavailable to the key,
    #: in the order they were tried, each with the provider's message (redacted).
    refused: list[RefusedModel] = field(default_factory=list)
    #: The agents the subagent tool offered in this attempt (name -> the agent file's hash),
    #: so the next resume reports a changed offer (docs/spec.md 4.14).
    agents: dict[str, str] = field(default_factory=dict)
    #: The hooks files this attempt ran with (file -> ``sha256:<16 hex>`` of its bytes), so
    #: the next resume notices a changed, added or removed file.
    hooks: dict[str, str] = field(default_factory=dict)
    #: The attempt ended ``suspended`` at a provider's quota window: when the window opens
    #: (UTC, ISO 8601). Counted against ``--max-suspensions`` (docs/spec.md 4.18).
    until: str | None = None
    #: The release of flow that ran the attempt (``0.2.0``): a shared file is run by several
    #: installed copies of flow. None where it was not recorded (a flow before it was).
    flow: str | None = None

    def add_notes(self, notes: Iterable[str]) -> None:
        """Record ``notes``; those that are ``EditNote`` go into ``edits`` too (as plain text)."""
        for note in notes:
            self.notes.append(str(note))
            if isinstance(note, EditNote):
                self.edits.append(str(note))


class EditNote(str):
    """An attempt note that reports a hand edit of the file (an entry, an input, the result of
    a call in flight): ``Attempt.add_notes`` records it in ``edits`` as well as in ``notes``,
    so readers find hand edits by this type and that field, never by the words."""

    __slots__ = ()


@dataclass
class HandoffPart:
    """One part of a handoff chain after the first: the step that runs it, the handoff
    followed and the agent it hands to."""

    #: The part's step id (``handoff-<n>-<label slug>``).
    step: str
    #: The handoff's label in the previous agent's ``handoffs:``.
    label: str
    #: The next agent's name, and its file relative to the progress file's folder.
    agent: str
    path: str


@dataclass
class HandoffChain:
    """The handoffs a run follows (``flow run AGENT --handoff LABEL`` / ``--handoffs auto``),
    resolved when it started: a resume rebuilds the same steps from the files they name."""

    #: ``labels`` (each ``--handoff`` in order) or ``auto`` (each ``send: true`` handoff).
    follow: str
    parts: list[HandoffPart] = field(default_factory=list)
    #: ``--max-handoffs`` for ``auto``.
    max: int | None = None
    #: ``--model`` given to the run: it wins over every part's own model.
    model: str | None = None


@dataclass
class WorkflowRef:
    """Which workflow a run belongs to, and its hashes when the run was checkpointed."""

    #: Path relative to the progress file's folder, with forward slashes.
    path: str
    hash: str
    #: step id -> step hash, in step order.
    steps: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    #: The handoff chain the run follows after the agent's own step (None: no chain).
    handoffs: HandoffChain | None = None


@dataclass
class RunConfig:
    """The provider and model settings a run uses: its checkpoint's ``config:``.

    Resolved from the workflow's own settings (``workflow.config.WorkflowSettings``) and the
    command line, and kept so a resume uses the same ones.
    """

    provider: str
    #: The model requests go to first (None: the provider's own default, if it has one).
    model: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: Limits: max_tokens, max_cost_usd, max_turns, max_seconds (absent = unlimited).
    budget: dict[str, Any] = field(default_factory=dict)
    #: OpenAI-compatible endpoint chosen with ``--base-url`` (never a key).
    base_url: str | None = None
    #: ``replay``: the recording, relative to the progress file's folder.
    recording: str | None = None
    #: The workflow's allow-lists as of the last attempt (never what grants consent).
    permissions: AllowLists = field(default_factory=AllowLists)
    #: The workflow's ``model:`` list when it names more than one model: every model in the
    #: order tried, ``model`` first. Each attempt starts again from the first; a model the
    #: provider refuses is replaced by the next (docs/spec.md 5.3). Empty: ``model`` only.
    models: list[str] = field(default_factory=list)
    #: Prices given with ``--price``/``--prices``: model name -> {input, output, cached_input}
    #: in USD per million tokens; they come before the pricing table (docs/spec.md 5.4).
    prices: dict[str, dict[str, float]] = field(default_factory=dict)

    def model_order(self) -> list[str | None]:
        """The models requests go to, in the order tried: ``model`` first (also when edited by
        hand to a model the list lacks), then the rest of ``models``."""
        return [self.model, *(m for m in self.models if m != self.model)]


@dataclass
class Cursor:
    """The step the run is in (or will start next), as ``index`` of ``total`` (1-based)."""

    step: str | None
    index: int
    total: int


@dataclass
class Redactions:
    """How many secret values were replaced before writing, and where (entry ids / fields)."""

    count: int = 0
    where: list[str] = field(default_factory=list)


WorktreeState = Literal["active", "merged", "discarded"]
WORKTREE_STATES: tuple[str, ...] = ("active", "merged", "discarded")


@dataclass
class WorktreeRef:
    """The git worktree a run works in (``flow run --worktree``)."""

    #: The worktree's folder: relative to the repository's root (forward slashes) when it
    #: lies inside it, else absolute.
    path: str
    #: The run's branch, ``flow/<run-id>``.
    branch: str
    #: The commit the branch was made from (full hash): what ``flow review`` compares with.
    base: str
    #: ``merged`` after ``flow merge``; ``discarded`` after ``flow discard`` (worktree and
    #: branch removed, the run cannot resume).
    state: WorktreeState = "active"


@dataclass
class Seal:
    """Proof that flow on one machine wrote the run and recorded its pending calls (``seal``)."""

    #: The public id of the key that sealed (a hash of it).
    by: str
    #: The run's seal: its id and creation time under the key.
    run: str
    #: Call id -> seal, for each call recorded from a model reply whose result is not recorded.
    calls: dict[str, str] = field(default_factory=dict)


@dataclass
class TraceRef:
    """The run's trace (``trace:``): its W3C trace id, and the context it was started in."""

    #: 32 lowercase hex digits: every attempt of the run adds its spans to this trace.
    id: str
    #: The ``traceparent`` the first attempt was started under (a batch's, ``TRACEPARENT``),
    #: which its ``invoke_agent`` span links to; None when there was none.
    parent: str | None = None


#: Where a front matter mapping sits: its keys from the root, and for a list item
#: ``("#", identifying values, n)`` (``unknown.ITEM_KEYS``).
Location = tuple[Any, ...]


@dataclass(frozen=True)
class Unknown:
    """The keys one front matter mapping held that this flow does not know."""

    #: Each unknown key with its value, as read (one-line collections as ``OneLine``).
    values: tuple[tuple[str, Any], ...]
    #: Every key of the mapping as read, in order: where each unknown key goes back.
    order: tuple[str, ...]


@dataclass(frozen=True)
class Kept:
    """What a progress file holds beyond what this flow writes itself (docs/spec.md 2.5): its
    newer ``flow_progress_minor`` and ``min_flow``, and the keys this flow does not know, by
    the mapping that holds them. Written back as read (``unknown.merge``)."""

    minor: int = FORMAT_MINOR
    min_flow: str = MIN_FLOW
    mappings: tuple[tuple[Location, Unknown], ...] = ()
    #: The field path of each unknown key as read (``$.config.trust``), for reports.
    paths: tuple[str, ...] = field(default=(), compare=False)


@dataclass
class Run:
    """A whole run: the checkpoint (front matter) plus the transcript (body)."""

    run_id: str
    workflow: WorkflowRef
    status: RunStatus
    created: str
    updated: str
    config: RunConfig
    cursor: Cursor
    reason: str | None = None
    #: A ``suspended`` run: when the provider's window opens (UTC, ISO 8601); None otherwise.
    until: str | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, StepState] = field(default_factory=dict)
    in_flight: list[InFlight] = field(default_factory=list)
    #: Hook events still open (see ``HookLedger``).
    hooks: HookLedger = field(default_factory=HookLedger)
    usage: Usage = field(default_factory=Usage)
    attempts: list[Attempt] = field(default_factory=list)
    last_error: ErrorInfo | None = None
    redactions: Redactions = field(default_factory=Redactions)
    #: Keywords for the similar-run detector, written when the run starts.
    keywords: list[str] = field(default_factory=list)
    #: Where this run was forked from: {"path", "run_id", "step"}; a sub-workflow's run adds
    #: ``"kind": "workflow"`` (the step of the parent run that runs it).
    parent: dict[str, str] | None = None
    #: The git worktree the run works in, when started with ``--worktree``.
    worktree: WorktreeRef | None = None
    #: The run's OpenTelemetry trace (docs/spec.md 13); None in files written before format 7.
    trace: TraceRef | None = None
    #: Written by flow on the machine that made or last resumed the run (see ``seal.py``).
    seal: Seal | None = None
    #: Tool calls waiting for (or holding) a person's decision (``awaiting_approval``).
    approvals: list[Approval] = field(default_factory=list)
    #: The working tree after each call that can change files (docs/spec.md 12).
    snapshots: Snapshots | None = None
    transcript: list[Entry] = field(default_factory=list)
    #: What the file held beyond what this flow writes (a newer flow's keys and minor); None
    #: for a file this flow knows all of. Written back as read.
    kept: Kept | None = None
    #: Storage bookkeeping, managed by ``ProgressStore``: the last journal event folded into
    #: the file, so a journal left beside a newer file is never applied twice. Not compared.
    journal_seq: int = field(default=0, compare=False)
    #: A resume's bookkeeping: the prompt entries of the step it starts again that it dropped
    #: to write them anew; an identical one keeps its recorded time (``at``), so the file's
    #: old lines do not change. Never written. Not compared.
    dropped_prompt: list[Entry] = field(default_factory=list, compare=False, repr=False)

    def add_attempt(self, started: str, **fields: Any) -> Attempt:
        """Append the attempt of this process (``n`` next, run by this flow) and return it."""
        attempt = Attempt(n=len(self.attempts) + 1, started=started, flow=VERSION, **fields)
        self.attempts.append(attempt)
        return attempt

    def steps_done(self) -> int:
        """How many of the run's steps are done (completed or skipped, ``step_counts``)."""
        return self.step_counts()[0]

    def step_counts(self) -> tuple[int, int]:
        """Steps done and steps in all (``step_counts``)."""
        return step_counts((s.status for s in self.steps.values()), self.cursor.total)

    def title(self) -> str:
        """The run's name for people: its workflow's name, else the workflow file's name."""
        return self.workflow.name or self.workflow.path.rsplit("/", 1)[-1]

    def trace_id(self) -> str:
        """The run's trace id (docs/spec.md 13.2): the recorded one, else the one derived from
        its run id, as for a file written before traces."""
        return self.trace.id if self.trace is not None else trace_id_for(self.run_id)

    def next_entry_id(self) -> int:
        """The id the next transcript entry gets."""
        return self.transcript[-1].id + 1 if self.transcript else 1

    def entry(self, entry_id: int) -> Entry | None:
        """The entry with ``entry_id`` (ids are dense, so this is an index)."""
        index = entry_id - 1
        if 0 <= index < len(self.transcript) and self.transcript[index].id == entry_id:
            return self.transcript[index]
        return next((e for e in self.transcript if e.id == entry_id), None)


def run_models(run: Run) -> list[str]:
    """The models the run's requests may go to, in the order tried (none: the provider's
    default)."""
    return [m for m in run.config.model_order() if m is not None]


def model_attempts(run: Run) -> list[dict[str, Any]]:
    """What each attempt did with the run's models: ``{attempt, model, refused: [{model,
    message}]}`` for each attempt that used a fallback list or was refused a model (the
    ``--json`` form of ``flow status`` and ``flow show``)."""
    return [
        {
            "attempt": a.n,
            "model": a.model,
            "refused": [{"model": r.model, "message": r.message} for r in a.refused],
        }
        for a in run.attempts
        if a.model is not None or a.refused
    ]


def approvals_view(run: Run) -> list[dict[str, Any]]:
    """The ``--json`` form of the calls a run holds for approval, decided or not (``flow
    status``, ``flow run``/``resume``)."""
    return [
        {
            "call_id": a.call_id,
            "tool": a.tool,
            "step": a.step,
            "entry": a.entry,
            "preview": a.preview,
            "why": a.why,
            "decision": a.decision,
            **{k: getattr(a, k) for k in ("by", "at", "host", "reason") if getattr(a, k)},
        }
        for a in run.approvals
    ]


def attempt_models_text(attempt: Attempt) -> str:
    """One line on an attempt's models (empty when it records none): ``model gpt-4o-mini;
    refused missing-model``."""
    parts = [f"model {attempt.model}"] if attempt.model else []
    if attempt.refused:
        parts.append("refused " + ", ".join(r.model for r in attempt.refused))
    return "; ".join(parts)


@dataclass
class LoadReport:
    """What loading noticed besides the run itself: hand edits and warnings."""

    #: Ids of transcript entries whose content no longer matches its recorded digest.
    edited_entries: list[int] = field(default_factory=list)
    #: ``path:line: message`` warnings (e.g. generated sections edited by hand, ignored).
    warnings: list[str] = field(default_factory=list)
    #: Journal events replayed on top of the file (after a crash), 0 if none.
    replayed_events: int = 0
    #: Inputs changed in the front matter by hand since flow last wrote the file, as
    #: ``name: old -> new`` (values as the Configuration section shows them).
    edited_inputs: list[str] = field(default_factory=list)
    #: The format the file was written in: ``8.1``, or ``7`` for an older format (upgraded
    #: as it was read).
    format: str = ""
    #: What the file holds that this flow does not know, kept as it is (docs/spec.md 2.5):
    #: front matter keys by field path (``$.config.trust``), marker fields as
    #: ``entry 4: effort``.
    unknown: list[str] = field(default_factory=list)
