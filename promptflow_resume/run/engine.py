"""The run loop: steps, model turns, tool calls, checkpoints, budgets and signals.

The loop is driven by the transcript, not by counters: at every moment the next action follows
from what is recorded (no prompt yet for the step → send it; a reply with unanswered tool
calls → run them; a result → call the model; a reply without tool calls → the step is done).
So a fresh run and a run resumed from any checkpoint take the same path, and a checkpoint
after every event is enough to continue exactly where a process stopped::

    engine = Engine(workflow, run, store, provider, tools, options)
    engine.execute()        # returns when the run completed or stopped; always checkpointed

Every event that costs money or has effects is durable before the next one starts: the model
reply, a tool call's start (before the tool runs), its result, each step boundary, each status
change.

``Engine`` sequences the steps and assembles the parts, each an object given what it uses:
``turns`` (the turn loop), ``modelcalls`` (the request, retries, fallbacks, compaction),
``toolcalls`` (each call of a reply), ``heldcalls`` (approvals), ``childruns`` (sub-workflows
and subagents), ``budgets`` (time and cost limits), ``checkpoints`` (durable events, file
snapshots), ``stepopenings`` (a step's first entries) and ``runsignals`` (SIGINT and kin).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..base import collector, faults
from ..base.clock import now_iso
from ..base.errors import NeedsReviewError, ProviderError
from ..progress import ProgressStore
from ..progress.model import Entry, Run, StepState
from ..progress.seal import Key, mark_written_here
from ..providers.fallback import ModelChoices
from ..providers.givenprices import from_record
from ..providers.provider import Provider
from ..tools import TOOLS, offered_tool_names
from ..tools.subagent import SubagentTool, offer_changes, wants_subagents
from ..tools.tool import Tool
from ..workflow import step_prompt
from ..workflow.records import Step, Workflow
from ..workflow.skillset import LOAD_TOOL
from ..workflow.toolnames import SUBAGENT_TOOL, editor_only_line, is_editor_only
from .budgets import Budgets
from .checkpoints import Checkpoints, FileSnapshots, begin_attempt, end_attempt, keep_times
from .childruns import ChildRuns
from .conversation import MessageLog, step_entries, unanswered_calls
from .engineoptions import DEFAULT_MAX_SUSPENSIONS, EngineOptions
from .heldcalls import HeldCalls
from .hooks import RunHooks
from .humananswers import ANSWER_MARK, ANSWER_PLACEHOLDER, awaiting_reason, human_answer
from .modelcalls import ModelCalls
from .runends import RunEnds
from .runsignals import Interrupted, force_exit, raise_interrupted
from .stepopenings import opening_entries, record_context
from .stepoutputs import step_outputs
from .toolcalls import ToolCalls
from .turns import Turns

#: What other modules import from here (``EngineOptions`` lives in ``engineoptions``).
__all__ = ["DEFAULT_MAX_SUSPENSIONS", "Engine", "EngineOptions"]


class Engine:
    """Executes a workflow's remaining steps against a run, checkpointing as it goes."""

    def __init__(
        self,
        workflow: Workflow,
        run: Run,
        store: ProgressStore,
        provider: Provider,
        tools: Mapping[str, Tool],
        options: EngineOptions,
    ) -> None:
        self.workflow = workflow
        self.run = run
        self.store = store
        self.provider = provider
        self.tools = dict(tools)
        if any(s.model_invocable for s in options.skills) and LOAD_TOOL not in self.tools:
            # A run with skills can load them, a sub-workflow's run too (spec 1.11).
            self.tools[LOAD_TOOL] = TOOLS.load(LOAD_TOOL)(workflow, options.workspace)
        self.options = options
        self.reporter = options.reporter
        #: This machine's key: it seals the run and each tool call recorded from a reply.
        self._key = Key.ensure()
        self._points = Checkpoints(run, store, options.redactor, self.reporter)
        self._attempt = begin_attempt(run)
        #: The run's models in the order tried; every attempt starts from the first, so a
        #: model that has become available is used again (docs/spec.md 5.3).
        self._models = ModelChoices(run.config.model_order())
        self._add_subagent_tool()
        self._log = MessageLog()
        self._hooks = self._run_hooks()
        #: Prices given with ``--price``/``--prices``, as the run recorded them (5.4).
        self._prices = from_record(run.config.prices)
        self._holds = HeldCalls(run, options, self.tools, self._attempt, self._points)
        self._budgets = Budgets(run, options, self._attempt, self._log, self._models, self._prices)
        #: The run's file snapshots (docs/spec.md 12).
        self._snapshots = FileSnapshots(self._points, self._attempt, options.workspace)
        self._children = ChildRuns(
            workflow, run, store, provider, options, self._points, self._budgets, self._snapshots
        )
        self._turns = self._turn_loop()

    def _run_hooks(self) -> RunHooks:
        """The hooks this attempt runs (``hooks.py``), their files' digests in its record."""
        options = self.options
        self._attempt.hooks = options.hooks.digests()
        return RunHooks(
            options.hooks.commands,
            self.run,
            self._points.save,
            options.workspace,
            options.redactor,
            notice=self.reporter.notice,
            note=self._attempt.notes.append,
            ran=self.reporter.hook_ran,
            attempt=self._attempt.n,
            key=self._key,
        )

    def _turn_loop(self) -> Turns:
        """The turn loop and the parts it drives: the tool calls and the model calls."""
        self._toolcalls = ToolCalls(
            self.workflow,
            self.run,
            self.store,
            self.tools,
            self.options,
            self._key,
            self._hooks,
            self._points,
            self._budgets,
            self._holds,
            self._snapshots,
            self._children,
        )
        self._calls = ModelCalls(
            self.workflow,
            self.run,
            self.provider,
            self.options,
            self._attempt,
            self._points,
            self._models,
            self._log,
            self._prices,
            self._budgets,
            self._toolcalls.specs,
        )
        return Turns(
            self.workflow,
            self.run,
            self.store,
            self.provider,
            self.options,
            self._attempt,
            self._points,
            self._budgets,
            self._calls,
            self._toolcalls,
            self._hooks,
            self._key,
            self._log,
        )

    def _add_subagent_tool(self) -> None:
        """Offer the subagent tool when the workflow wants it and there is an agent to call:
        resolved now, from this machine's agent folders (docs/spec.md 4.14)."""
        runner = self.options.children
        workflow = self.workflow
        names = {*offered_tool_names(workflow)}
        for step in workflow.steps:
            names.update(offered_tool_names(workflow, step))
        if runner is None or not wants_subagents(workflow, tuple(names)):
            return
        tool = runner.agent_tool(workflow, self.options.workspace)
        if tool is not None:
            self.tools[SUBAGENT_TOOL] = tool
        offered = {a.name: a.hash for a in tool.agents} if isinstance(tool, SubagentTool) else {}
        earlier = [a.agents for a in self.run.attempts[:-1] if a.agents]
        self._attempt.agents = offered
        news = offer_changes(earlier[-1], offered) if earlier else None
        if news is not None:
            self._attempt.notes.append(news)
            self.reporter.notice(news)

    def attempt_notes(self, notes: list[str]) -> None:
        """Record notes (resume decisions, hand edits) in this attempt's history; an
        ``EditNote`` is recorded among the attempt's ``edits`` too."""
        self._attempt.add_notes(notes)

    # --- the whole run ---------------------------------------------------------------------

    def execute(self) -> Run:
        """Run until the workflow completes or the run stops; the file is always folded."""
        run = self.run
        self.reporter.run_started(run.usage)
        escaping: BaseException | None = None
        try:
            with raise_interrupted(), collector.during_run():
                self._notice_editor_only()
                mark_written_here(run, self._key)
                self._forget_settled_seals()
                self._holds.forget_settled()
                self._points.set_status("running", None)
                self.reporter.run_opened(run, self.store.path, self.options.redactor)
                if self.options.snapshots:
                    self._snapshots.begin()
                record_context(self.workflow, run, self.options, self._points)
                self._hooks.begin(initial_prompt=None)
                for step in self.workflow.steps:
                    state = run.steps.setdefault(step.id, StepState())
                    if state.status in ("completed", "skipped"):
                        continue
                    self._run_step(step, state)
                run.cursor.step = None
                run.cursor.index = run.cursor.total
                self._points.set_status("completed", None)
        except RunEnds as ends:
            self._points.set_status(ends.status, ends.reason, until=ends.until)
            if ends.until is not None:
                self.reporter.suspended(ends.until, ends.reason)
        except Interrupted as intr:
            self._points.set_status("interrupted", f"stopped by {intr}")
        except ProviderError as error:
            self._points.record_error(error, type(error).__name__)
            self._points.set_status("failed", error.reason)
            self._hooks.error(error, "model_call")
        except NeedsReviewError as error:
            self._points.record_error(error, type(error).__name__)
            self._points.set_status("needs_review", error.message)
        except Exception as error:
            # A user error met mid-run (a bad input value for a command step, ...) or a bug:
            # the run is checkpointed as failed, resumable once fixed, and the error goes on
            # to the caller, which reports it.
            self._points.record_error(error, type(error).__name__)
            self._points.set_status(
                "failed", str(error).splitlines()[0][:200] if str(error) else None
            )
            self._hooks.error(error, "system")
            escaping = error
            raise
        finally:
            end_attempt(self.run, self._attempt)
            # The fold must happen even when a second signal arrives: one exits at once
            # (the journal holds every event), also while the sessionEnd hooks run.
            with force_exit():
                self._hooks.end(self.run.status)
                self._points.fold()
            self.reporter.run_stopped(run, escaping)
            self.reporter.close()
        return run

    def _forget_settled_seals(self) -> None:
        """Keep only the seals of calls still waiting: a call archived (rewind, retry) or
        answered by hand has nothing left to guard."""
        seal = self.run.seal
        if seal is not None and seal.calls:
            waiting = {c.call_id for c in unanswered_calls(self.run.transcript)}
            seal.calls = {k: v for k, v in seal.calls.items() if k in waiting}

    def _notice_editor_only(self) -> None:
        """The Copilot tools that exist only in the editor, once per resumed attempt (a new
        run's first attempt says them with every other tool left out, in one line); the
        first attempt also records which tools each Copilot name in ``tools:`` became."""
        names = [n for n, targets in self.workflow.tool_map.items() if is_editor_only(n)]
        if names and self._attempt.n > 1:
            self.reporter.notice(editor_only_line(names))
        mapped = [
            f"{name} → {', '.join(targets)}"
            for name, targets in self.workflow.tool_map.items()
            if targets and targets != (name,)
        ]
        if mapped and self._attempt.n == 1 and not self.run.transcript:
            self._attempt.notes.append("tools by their prompt-file names: " + "; ".join(mapped))

    # --- steps ----------------------------------------------------------------------------

    def _run_step(self, step: Step, state: StepState) -> None:
        run = self.run
        run.cursor.step = step.id
        run.cursor.index = step.index
        run.cursor.total = len(self.workflow.steps)
        if state.status != "running":
            state.status = "running"
            state.attempts += 1
            state.started = state.started or now_iso()
            self._points.save()
        self.reporter.step_started(
            step.id, step.title, step.index, len(self.workflow.steps), agent=step.agent
        )

        mine = step_entries(run.transcript, step.id)
        if step.kind == "human":
            self._human_step(step, state, mine)
            return
        if step.kind == "workflow":
            self._complete_step(step, state, self._children.workflow_result(step, state, mine))
            return
        if not mine:
            opening = keep_times(
                opening_entries(self.workflow, run, step, self.options, self._points),
                run.dropped_prompt,
            )
            run.dropped_prompt = []
            self._hooks.expect_prompt(opening, run.next_entry_id())
            self._points.append(opening)
            self._hooks.settle()

        if step.kind == "command":
            self._toolcalls.settle(step)
            result = next(
                (
                    e
                    for e in reversed(step_entries(run.transcript, step.id))
                    if e.role == "tool_result"
                ),
                None,
            )
            self._complete_step(step, state, result)
            return
        self._complete_step(step, state, self._turns.until_answered(step, state))

    def _human_step(self, step: Step, state: StepState, mine: list[Entry]) -> None:
        """A step a person answers in the file: ask once, then stop until the answer is there."""
        if not mine:
            question = step_prompt(
                self.workflow,
                step,
                inputs=self.run.inputs,
                step_outputs=step_outputs(self.workflow, self.run),
                editor=self.options.editor,
            )
            self._points.append(
                [
                    self._points.entry(
                        "user", f"{question.rstrip()}{ANSWER_MARK}{ANSWER_PLACEHOLDER}", step.id
                    )
                ]
            )
            self.reporter.question_asked(step.id, question.rstrip())
            raise RunEnds("awaiting_input", awaiting_reason(step.id))
        entry = mine[0]
        answer = human_answer(entry.content)
        if answer is None:
            raise RunEnds("awaiting_input", awaiting_reason(step.id))
        self._complete_step(step, state, entry)

    def _complete_step(self, step: Step, state: StepState, output: Entry | None) -> None:
        state.status = "completed"
        state.finished = now_iso()
        state.output_entry = output.id if output is not None else None
        index = step.index
        following = self.workflow.steps[index] if index < len(self.workflow.steps) else None
        self.run.cursor.step = following.id if following else None
        self.run.cursor.index = min(index + 1, len(self.workflow.steps))
        if self.options.on_step_completed is not None:
            self.options.on_step_completed(step.id)
        faults.point("engine.step_completed")
        if following is not None:
            self._points.fold()
        else:
            self._points.save()  # the last step: the run's own end folds right after
        # Told once the step's end is durable: a watcher never sees an end a crash undoes.
        self.reporter.step_finished(step.id, "completed")
