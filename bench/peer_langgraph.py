"""Peer (c) of bench_peers: LangGraph with its SQLite checkpointer on the same interrupt shape.

Needs the `bench` extra (`pip install -e '.[bench]'`): importing this module raises ImportError
without it. A scripted model node asks for one tool call, the tool node calls `interrupt()`, and
`Command(resume=...)` continues the graph from the checkpoint; every step is committed with
`durability="sync"` before the call returns.
"""

from __future__ import annotations

import sqlite3
from importlib import metadata
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt

from bench.facade import TEXT, CycleFailed, sqlite_durability
from chat_approvals.core.agent import APPROVAL_TOOL

URL = TEXT.split()[-1]


def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """The scripted model: a tool call for the user's message, a text reply after its result."""
    messages = state["messages"]
    if isinstance(messages[-1], ToolMessage):
        return {"messages": [AIMessage(content=f"Approved: I may now fetch {URL}.")]}
    call = {
        "id": f"tooluse_{len(messages)}_0",
        "name": APPROVAL_TOOL,
        "args": {"reason": f"to download {URL}", "urls": [URL]},
    }
    return {"messages": [AIMessage(content="", tool_calls=[call])]}


def tools(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """Runs again from the top on resume, like a Strands tool; `interrupt` then returns the answer."""
    last = state["messages"][-1]
    if not isinstance(last, AIMessage):
        raise CycleFailed("the tool node ran without a tool call")
    out: list[AnyMessage] = []
    for call in last.tool_calls:
        answer = interrupt({"reason": call["args"]["reason"], "urls": call["args"]["urls"]})
        out.append(ToolMessage(content="approved" if answer.get("approved") else "denied", tool_call_id=call["id"]))
    return {"messages": out}


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


class LangGraphCycle:
    def __init__(self, db: Path) -> None:
        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_node("tools", tools)
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", route, ["tools", END])
        builder.add_edge("tools", "model")
        self.conn = sqlite3.connect(db, check_same_thread=False)
        saver = SqliteSaver(self.conn)
        saver.setup()
        self.graph = builder.compile(checkpointer=saver)
        self.label = f"(c) LangGraph {metadata.version('langgraph')} + SqliteSaver, durability=sync"

    async def cycle(self, i: int) -> None:
        # SqliteSaver is synchronous (its async methods refuse): the graph runs on this thread.
        config: Any = {"configurable": {"thread_id": f"peers-{i}"}}
        first = self.graph.invoke({"messages": [HumanMessage(content=TEXT)]}, config, durability="sync")
        if len(first.get("__interrupt__", ())) != 1:
            raise CycleFailed(f"expected one interrupt, got {sorted(first)}")
        done = self.graph.invoke(Command(resume={"approved": True}), config, durability="sync")
        if "__interrupt__" in done or not str(done["messages"][-1].content).startswith("Approved"):
            raise CycleFailed(f"expected the approved reply, got {done}")

    def durability(self) -> str:
        return sqlite_durability(self.conn)

    def close(self) -> None:
        self.conn.close()
