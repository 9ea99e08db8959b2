"""The PostgreSQL peer of bench_peers: LangGraph with its `PostgresSaver` on the same interrupt
shape as bench/peer_langgraph.py (the same graph), every step committed (`durability="sync"`)
before the call returns. Needs the `bench` extra; importing this module raises ImportError
without it. Its tables go in a schema of their own on the given server, dropped at close.
"""

from __future__ import annotations

import secrets
from importlib import metadata
from typing import Any

import psycopg
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from psycopg.rows import dict_row

from bench.facade import TEXT, CycleFailed
from bench.peer_langgraph import model, route, tools


class LangGraphPostgresCycle:
    def __init__(self, url: str) -> None:
        self.url = url
        self.schema = f"lg{secrets.token_hex(4)}"
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {self.schema}".encode())
        # what PostgresSaver asks of its connection: autocommit, dict rows, prepared statements
        self.conn: psycopg.Connection[Any] = psycopg.connect(
            url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={self.schema}",
        )
        saver = PostgresSaver(self.conn)
        saver.setup()
        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_node("tools", tools)
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", route, ["tools", END])
        builder.add_edge("tools", "model")
        self.graph = builder.compile(checkpointer=saver)
        version = metadata.version("langgraph-checkpoint-postgres")
        self.label = f"(g) LangGraph {metadata.version('langgraph')} + PostgresSaver {version}, durability=sync"

    async def cycle(self, i: int) -> None:
        config: Any = {"configurable": {"thread_id": f"peers-pg-{i}"}}
        first = self.graph.invoke({"messages": [HumanMessage(content=TEXT)]}, config, durability="sync")
        if len(first.get("__interrupt__", ())) != 1:
            raise CycleFailed(f"expected one interrupt, got {sorted(first)}")
        done = self.graph.invoke(Command(resume={"approved": True}), config, durability="sync")
        if "__interrupt__" in done or not str(done["messages"][-1].content).startswith("Approved"):
            raise CycleFailed(f"expected the approved reply, got {done}")

    def close(self) -> None:
        self.conn.close()
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {self.schema} CASCADE".encode())
