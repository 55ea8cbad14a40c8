"""How a run is carried out: one frozen record shared by every call that runs or reads one.

``start_run``, ``resume_run``, ``run_status``, ``compact_run`` and a batch's rows all take a
``RunOptions``; what only one call needs (a start's workflow and inputs, a resume's choices)
is in that call's own request (``promptflow_resume.run.requests``)::

    options = RunOptions(provider="openai", limits=Limits(max_cost=1.0), workspace="repo")
    start_run(StartRequest("triage.prompt.md"), options)
    resume_run(".flow/runs/<run-id>/progress.md", options)

Every field left at its default keeps what the workflow or the run's checkpoint says.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..providers.provider import DEFAULT_IDLE_TIMEOUT
from .events import Reporter

if TYPE_CHECKING:
    from ..base.costledger import SharedBudget
    from ..base.truststore import Trust
    from ..tools.approval import ApprovalPolicy
    from ..tools.consent import Asker, Consent
    from ..tools.mcp_records import McpConfig
    from ..workflow.records import Workflow

#: ``mcp_ask(input_id, description, password)``: a value of the MCP configuration's inputs.
McpAsk = Callable[[str, str, bool], str]


@dataclass(frozen=True)
class Limits:
    """Budget overrides from the command line (None = keep the workflow's or checkpoint's)."""

    max_cost: float | None = None
    max_tokens: int | None = None
    max_turns: int | None = None
    timeout: float | None = None
    #: ``--max-suspensions``: quota-window suspensions the run may use (None: the default).
    max_suspensions: int | None = None
    #: ``--price`` and ``--prices``: model -> {input, output, cached_input} in USD per million
    #: tokens, recorded in the run's ``config.prices`` (a given model replaces its record).
    prices: dict[str, dict[str, float]] = field(default_factory=dict)

    def apply_prices(self, recorded: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        """The run's recorded prices with these given ones replacing those of the same model."""
        if not self.prices:
            return dict(recorded)
        from ..providers.givenprices import from_record, merged

        return merged(recorded, from_record(self.prices))

    def apply(self, budget: dict[str, Any]) -> dict[str, Any]:
        """The budget with these overrides applied."""
        merged = dict(budget)
        for key, value in (
            ("max_cost_usd", self.max_cost),
            ("max_tokens", self.max_tokens),
            ("max_turns", self.max_turns),
        ):
            if value is not None:
                merged[key] = value
        return merged


@dataclass(frozen=True)
class Permissions:
    """What the person running flow allows model-chosen commands and fetches to do.

    ``commands`` are ``--allow-commands`` patterns, ``hosts`` ``--allow-fetch`` hosts, and
    ``ask`` asks on a terminal (None without one). The workflow's ``allow-commands:`` and
    ``allow-fetch:`` lists are added when a run starts or resumes; nothing comes from a
    progress file (which records the workflow's lists only to notice a change, spec 10.7).
    """

    commands: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    ask: Asker | None = None
    #: ``--accept-permissions``: go on when the workflow's allow-lists grew since the run
    #: last went on (otherwise ``ask`` is asked, and without it the resume stops).
    accept: bool = False

    def consent(self, workflow: Workflow) -> Consent:
        """The consent of one run of ``workflow``."""
        from ..tools.consent import Consent, patterns

        return Consent(
            commands=patterns(self.commands),
            workflow_commands=patterns(_string_list(workflow.front_matter.get("allow-commands"))),
            hosts=patterns(self.hosts),
            workflow_hosts=patterns(_string_list(workflow.front_matter.get("allow-fetch"))),
            ask=self.ask,
        )


def _string_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


@dataclass(frozen=True)
class RunOptions:
    """How a run is carried out, whichever call carries it out (None: the recorded choice)."""

    #: ``--provider``, ``--model``, ``--base-url``: the connection (None keeps the workflow's
    #: for a new run, the checkpoint's for a resumed one).
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    #: ``--record``: record the model calls beside the progress file, for replay.
    record: bool = False
    #: Stream the replies (the providers that can), and their text to ``reporter`` as it
    #: arrives; ``--no-stream`` turns it off.
    stream: bool = True
    #: ``--idle-timeout``: seconds without a token that end a model request (retried);
    #: ``--request-timeout``: a limit on each request as a whole (None: none).
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    request_timeout: float | None = None
    limits: Limits = field(default_factory=Limits)
    #: The folder tools work in (None: the working directory).
    workspace: str | Path | None = None
    #: ``--file`` and ``--selection``: the editor variables ``${file}`` and ``${selection}``.
    file: str | Path | None = None
    selection: str | None = None
    #: Send the repository's custom instructions (``--no-instructions`` turns this off).
    instructions: bool = True
    #: Offer the skills found (``--no-skills`` turns this off) and ``--skills DIR`` folders
    #: searched before the workspace's and the user's (docs/spec.md 1.10).
    skills: bool = True
    skill_dirs: tuple[str | Path, ...] = ()
    #: Run the workspace's hooks files (``--no-hooks`` turns this off) and ``hook_files``
    #: (``--hooks FILE``, run whatever ``hooks`` says).
    hooks: bool = True
    hook_files: tuple[str | Path, ...] = ()
    permissions: Permissions = field(default_factory=Permissions)
    #: MCP servers come from ``mcp_config`` or the workspace's ``.vscode/mcp.json``;
    #: ``mcp_ask`` asks for a configuration input on a terminal.
    mcp_config: str | Path | None = None
    mcp_ask: McpAsk | None = None
    #: ``--mcp-input ID=VALUE``: values of the configurations' inputs (used before
    #: ``FLOW_MCP_INPUT_<ID>`` and the terminal; never recorded).
    mcp_inputs: Mapping[str, str] = field(default_factory=dict)
    #: Who watches the run (the terminal display); None: nobody.
    reporter: Reporter | None = None
    #: ``--agents DIR``: folders searched for agents by name before the workspace's and the
    #: user's (``workflow.agentfind``), for handoffs, subagents and ``agent: NAME``.
    agent_dirs: tuple[Path, ...] = ()
    #: ``--approve PATTERN``: tool calls that wait for a person's yes, besides the workflow's
    #: ``approve:`` list; ``--no-approve`` (``approval=False``) turns the policy off
    #: (docs/spec.md 4.17).
    approve: tuple[str, ...] = ()
    approval: bool = True
    #: ``--on-consent stop``: without a terminal, hold a command or fetch that needs consent
    #: for ``flow approve`` (status ``awaiting_approval``) instead of refusing it.
    consent_stop: bool = False

    def approval_policy(self, workflow: Workflow) -> ApprovalPolicy:
        """The approval policy of one attempt of ``workflow`` (empty with ``--no-approve``):
        its ``approve:`` (with the agent a prompt file uses), each later agent's of a handoff
        chain, and ``--approve``."""
        from ..tools.approval import ApprovalPolicy

        if not self.approval:
            return ApprovalPolicy()
        listed = [p for each in (workflow, *workflow.parts()) for p in each.approve]
        return ApprovalPolicy.of(list(dict.fromkeys(listed)), self.approve)

    #: Snapshot the working tree after each call that can change files, in a git
    #: repository (``--no-snapshots`` turns this off; docs/spec.md 12).
    snapshots: bool = True
    #: A cost budget shared with runs in other processes: a batch's ``--max-cost`` ledger,
    #: on which every model call holds a reservation (docs/spec.md 8.3).
    shared_budget: SharedBudget | None = None
    #: What the workspace's hooks files, MCP configurations and agents may run: None for
    #: what ``flow trust`` recorded on this machine; ``Trust.entire`` for
    #: ``--trust-workspace``; CI gives the files of a base commit (docs/spec.md 10.9).
    trust: Trust | None = None

    def trust_in(self, folder: Path) -> Trust:
        """The trust that ``folder``'s brought files are judged by in this run: ``trust``
        when given, the whole folder when ``FLOW_TRUST_WORKSPACE`` is set (so a batch's rows
        and child runs see what ``--trust-workspace`` said), else what ``flow trust``
        recorded on this machine."""
        if self.trust is not None:
            return self.trust
        from ..base.truststore import TRUST_VARIABLE, Trust

        if os.environ.get(TRUST_VARIABLE, "").strip().lower() in ("1", "true", "yes"):
            return Trust.entire(folder, TRUST_VARIABLE)
        return Trust.for_folder(folder)

    def mcp_for(self, workflow: Workflow, root: Path) -> McpConfig | None:
        """The MCP configuration a run of ``workflow`` in ``root`` uses: ``--mcp-config`` or
        the workspace's files, the agents' own servers, as far as the folder's trust allows,
        with the inputs given (``--mcp-input``) or asked for."""
        from ..tools.mcp_wiring import find_mcp_config

        return find_mcp_config(
            workflow,
            root,
            self.mcp_config,
            self.mcp_ask,
            self.trust_in(root),
            given=self.mcp_inputs,
        )

    def root(self) -> Path:
        """The workspace folder (the working directory when none is given)."""
        return Path(self.workspace) if self.workspace is not None else Path.cwd()

    def to_record(self) -> dict[str, Any]:
        """These options as plain data, as a batch row carries them to its worker process or
        Ray task (``RowTask.options``); paths as given. What only this process can hold is
        left out: the reporter, the questions (``mcp_ask``, ``permissions.ask``), the shared
        budget, the trust and the workspace, which the row's side supplies."""
        record: dict[str, Any] = {}
        for each in fields(self):
            if each.name in _NOT_RECORDED:
                continue
            value = getattr(self, each.name)
            if isinstance(value, tuple):
                value = [str(v) for v in value]
            elif isinstance(value, Path):
                value = str(value)
            record[each.name] = value
        record["limits"] = asdict(self.limits)
        p = self.permissions
        record["permissions"] = {
            "commands": list(p.commands),
            "hosts": list(p.hosts),
            "accept": p.accept,
        }
        record["mcp_inputs"] = dict(self.mcp_inputs)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any], **others: Any) -> RunOptions:
        """The options ``to_record`` wrote, with ``others`` (the fields it leaves out)."""
        values = dict(record)
        values["limits"] = Limits(**values.get("limits", {}))
        given = values.get("permissions", {})
        values["permissions"] = Permissions(
            commands=tuple(given.get("commands", ())),
            hosts=tuple(given.get("hosts", ())),
            accept=bool(given.get("accept", False)),
        )
        for name in ("skill_dirs", "hook_files", "approve"):
            values[name] = tuple(values.get(name, ()))
        values["agent_dirs"] = tuple(Path(p) for p in values.get("agent_dirs", ()))
        return cls(**values, **others)


#: The fields ``RunOptions.to_record`` leaves out: they hold this process's objects.
_NOT_RECORDED = frozenset(
    {"reporter", "mcp_ask", "shared_budget", "trust", "workspace", "permissions", "limits"}
)
