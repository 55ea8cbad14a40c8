"""The engine benchmark's workload on peer frameworks, in their crash-safe configurations.

A turn is one model reply (300 bytes, with one tool call) and the tool's result (1 KiB); the
model and the tool return at once, so what is measured is each framework's own per-turn cost:
bookkeeping plus durable checkpoints.

- LangGraph with its SQLite checkpointer and ``durability="sync"`` (every super-step is
  written before the next starts; the default "async" mode loses steps on SIGKILL); the state
  is a messages list with an add reducer.
- DBOS with its SQLite system database: the model call and the tool call are each a
  ``@DBOS.step`` of one workflow, so each result is durable before the next step.

Used by ``engine_bench.py`` (install with ``pip install -e '.[bench]'``). Each function runs in
the process that calls it and returns wall and CPU seconds; ``resume_*`` run in a fresh subprocess.
"""

from __future__ import annotations

import operator
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

REPLY = "x" * 300
RESULT = "y" * 1024


class State(TypedDict):
    """LangGraph state: the conversation (appended by the reducer) and a turn counter."""

    messages: Annotated[list[dict[str, Any]], operator.add]
    turn: int


def langgraph_turns(turns: int, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds for ``turns`` turns on LangGraph + SqliteSaver, durability="sync"."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    def model(state: State) -> dict[str, Any]:
        return {
            "messages": [{"role": "assistant", "content": REPLY, "tool": "t"}],
            "turn": state["turn"] + 1,
        }

    def tool(state: State) -> dict[str, Any]:
        return {"messages": [{"role": "tool", "content": RESULT}]}

    def route(state: State) -> str:
        return "tool" if state["turn"] <= turns else END

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tool", tool)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, {"tool": "tool", END: END})
    graph.add_edge("tool", "model")
    connection = sqlite3.connect(str(folder / "langgraph.sqlite"), check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(connection))
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * turns + 10}
    start, cpu = time.perf_counter(), time.process_time()
    app.invoke({"messages": [], "turn": 1}, config, durability="sync")
    elapsed = time.perf_counter() - start, time.process_time() - cpu
    connection.close()
    return elapsed


def dbos_turns(turns: int, folder: Path) -> tuple[float, float]:
    """Wall and CPU seconds for ``turns`` turns on DBOS with SQLite (one step per model and
    tool call)."""
    from dbos import DBOS

    DBOS(config={"name": "bench", "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}"})

    @DBOS.step()
    def model_step(turn: int) -> str:
        return REPLY

    @DBOS.step()
    def tool_step(turn: int) -> str:
        return RESULT

    @DBOS.workflow()
    def agent(count: int) -> int:
        messages: list[str] = []
        for turn in range(count):
            messages.append(model_step(turn))
            messages.append(tool_step(turn))
        return len(messages)

    DBOS.launch()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        agent(turns)
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        DBOS.destroy()


if __name__ == "__main__":  # python bench/peers.py langgraph|dbos TURNS FOLDER
    kind, count, where = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    seconds = (langgraph_turns if kind == "langgraph" else dbos_turns)(count, where)
    print(f"{seconds[0]:.6f} {seconds[1]:.6f}")  # wall, and CPU of the process
