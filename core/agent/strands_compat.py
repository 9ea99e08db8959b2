"""Every access to a private part of Strands (strands-agents 1.62), in one place, numbered, each
with the reason no public surface serves. Everything else goes through the public API: the
approval tool, R5's batch rule and the tool gate reach an Agent as one hook provider
(core/agent/hooks.py), at construction where we build the Agent.

Upgrading Strands: run tests/bots/test_tool_cards.py and tests/bots/test_tool_approvals.py; each entry
below fails loudly (AttributeError) or safely (see its fallback) if the SDK changed.
"""

from __future__ import annotations

import collections.abc
import copy
import importlib
import re
import types
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import strands.event_loop.event_loop as strands_event_loop
import strands.event_loop.streaming as strands_streaming
import strands.plugins.plugin as strands_plugin
import strands.telemetry.tracer as strands_tracer
import strands.tools.executors._executor as strands_executor
from opentelemetry import trace
from opentelemetry.instrumentation.threading import ThreadingInstrumentor
from strands import Agent, ToolContext
from strands.agent._agent_as_tool import _AgentAsTool
from strands.agent._agent_delegation import AgentDelegation
from strands.interrupt import _AGENT_STREAM_INTERRUPT_ID_PREFIX as _STREAM_INTERRUPT_PREFIX
from strands.interventions import InterventionHandler
from strands.interventions.registry import InterventionRegistry
from strands.plugins import Plugin
from strands.tools.decorator import DecoratedFunctionTool
from strands.tools.executors import ConcurrentToolExecutor, SequentialToolExecutor
from strands.tools.registry import ToolRegistry
from strands.types._events import ToolInterruptEvent
from strands.types.events import ToolResultEvent

GATE_MARK = "_chat_approvals_gate"


def answered_response(tool_context: ToolContext, name: str) -> tuple[bool, Any]:
    """1. Has THIS tool call's interrupt `name` been answered, and with what? 1.62 has no public
    accessor for the interrupt state (`ToolContext.interrupt` raises until answered, and cannot
    ask without raising). Reads `ToolContext._interrupt_id` and `Agent._interrupt_state`. The
    caller treats an exception as "answered" (R2's safe mistake)."""
    interrupt_id = tool_context._interrupt_id(name)
    found = tool_context.agent._interrupt_state.interrupts.get(interrupt_id)
    return found is not None and found.response is not None, None if found is None else found.response


def own_interventions(agent: Agent) -> list[InterventionHandler]:
    """2. The interventions an Agent was constructed with (`Agent(interventions=[...])`): 1.62
    keeps them only in `Agent._intervention_registry`. Read to refuse a second HumanInTheLoop
    (both would raise the same interrupt id for the same call). Missing: none."""
    registry = getattr(agent, "_intervention_registry", None)
    return registry.handlers if registry is not None else []


def add_interventions(agent: Agent, handlers: list[InterventionHandler]) -> InterventionRegistry:
    """3. Interventions for an Agent that was built without them (a user's `--agent` factory):
    1.62 takes interventions only at construction, so a second `InterventionRegistry` (public
    class) is wired onto the agent's public `hooks`, and kept on the agent under our own mark so
    the same agent is never given the gate twice."""
    registry = InterventionRegistry(handlers, agent.hooks)
    setattr(agent, GATE_MARK, registry)
    return registry


def added_interventions(agent: Agent) -> list[InterventionHandler]:
    """4. What `add_interventions` gave this agent (our own mark, read back)."""
    registry = getattr(agent, GATE_MARK, None)
    return registry.handlers if registry is not None else []


# 5. Strands serialises every message, tool input and tool result to JSON for its span attributes
# on each model and tool call, whether or not anything records the span (about 5% of a cycle's
# Python on the loop, issue 34). 1.62 has no switch for it and imports `serialize` by name into
# other modules, so the one function is swapped in each: while no tracer provider is installed
# (OpenTelemetry's proxy: every span is a non-recording no-op that drops what it is given) the
# text is never built; once one is installed (ours, `setup_export`, or the user's own), it is
# built as before. Missing names fail loudly at start-up (AttributeError).
_SERIALIZE_MODULES = (
    "strands.telemetry.tracer",
    "strands.agent.agent",
    "strands.tools.executors._executor",
    "strands.bidi._telemetry",
)
_STRANDS_SERIALIZE: Callable[[Any], str] = strands_tracer.serialize


def serialize_if_recorded(obj: Any) -> str:
    """Strands' `serialize`, or "" while no tracer provider is installed (nothing would record it)."""
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return ""
    return _STRANDS_SERIALIZE(obj)


def skip_unrecorded_serialisation() -> None:
    """Install `serialize_if_recorded` in Strands' modules (idempotent)."""
    for name in _SERIALIZE_MODULES:
        module = importlib.import_module(name)
        current = module.serialize  # AttributeError: Strands moved it; see entry 5
        if current is serialize_if_recorded:
            continue
        if current is not _STRANDS_SERIALIZE:
            raise RuntimeError(f"{name}.serialize is not Strands' own: core/agent/strands_compat.py entry 5")
        setattr(module, "serialize", serialize_if_recorded)  # noqa: B010 (an attribute mypy cannot see)


# 6. Before each model call Strands deep-copies the messages it is given (`_normalize_messages`,
# in case it must replace a blank text or an invalid tool name), though the event loop hands it a
# deep copy of the agent's messages made for that one call. With a chat's history restored that
# is a second copy of the whole conversation per model call (issue 34). 1.62 has no switch: the
# function is swapped for one that returns the messages as given when Strands' own would change
# nothing in them (its copy would be equal), and calls Strands' own otherwise. The check mirrors
# Strands' rules; tests/core/test_strands_normalize.py pins Strands' source and compares both.
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_\-]{1,}$")  # strands.tools.tools.validate_tool_use_name's
_TOOL_NAME_MAX = 64
_STRANDS_NORMALIZE: Callable[[Any], Any] = strands_streaming._normalize_messages


def _unchanged_by_normalizing(messages: Any) -> bool:
    """Would Strands' `_normalize_messages` leave every message as it is? False when unsure."""
    for message in messages:
        if "role" in message and message["role"] != "assistant":
            continue
        if "content" not in message:
            continue
        content = message["content"]
        if not isinstance(content, list) or not content:
            return False
        for item in content:
            if not isinstance(item, dict):
                return False
            if "toolUse" in item:
                tool = item["toolUse"]
                name = tool.get("name") if isinstance(tool, dict) else None
                if not isinstance(name, str) or not _TOOL_NAME.match(name) or len(name) > _TOOL_NAME_MAX:
                    return False
            if "text" in item:
                text = item["text"]
                if not isinstance(text, str) or not text.strip():
                    return False
    return True


def normalize_if_needed(messages: Any) -> Any:
    """Strands' `_normalize_messages`, without its copy when it would change nothing."""
    if _unchanged_by_normalizing(messages):
        return messages
    return _STRANDS_NORMALIZE(messages)


def skip_needless_message_copies() -> None:
    """Install `normalize_if_needed` in Strands' streaming module (idempotent)."""
    current = strands_streaming._normalize_messages  # AttributeError: Strands moved it; see entry 6
    if current is normalize_if_needed:
        return
    if current is not _STRANDS_NORMALIZE:
        raise RuntimeError("strands' _normalize_messages is not its own: core/agent/strands_compat.py entry 6")
    setattr(strands_streaming, "_normalize_messages", normalize_if_needed)  # noqa: B010 (mypy cannot see it)


# 7. A pause's snapshot holds the interrupt state; Strands' `_InterruptState.to_dict` builds it
# with `dataclasses.asdict`, a deep copy of every interrupt's reason and response and of the
# pending tool call's message, about 35 us a pause, though the snapshot is encoded at once
# (issue 34). The same dict without the copies, from `Agent._interrupt_state` (no public
# accessor in 1.62); core/agent/snapshots.agent_bytes falls back to Strands' own when a value is
# not plain JSON (asdict would convert a dataclass). tests/core/test_strands_interrupt_doc.py
# pins Strands' source and compares both.
def interrupt_state_doc(agent: Agent) -> dict[str, Any]:
    """What `agent._interrupt_state.to_dict()` returns, sharing the values instead of copying them."""
    state = agent._interrupt_state
    interrupts = state.interrupts
    if not state.activated:  # as Strands: deactivated invocation-scoped responses are not kept
        interrupts = {k: v for k, v in interrupts.items() if not k.startswith(_STREAM_INTERRUPT_PREFIX)}
    doc: dict[str, Any] = {
        "interrupts": {
            k: {"id": v.id, "name": v.name, "reason": v.reason, "response": v.response} for k, v in interrupts.items()
        },
        "context": state.context,
        "activated": state.activated,
    }
    pending = state.pending_tool_execution
    if pending is not None:
        doc["pending_tool_execution"] = {
            "assistant_message": pending.assistant_message,
            "completed_tool_results": pending.completed_tool_results,
        }
    return doc


# 8. Strands' tracer, when first built, calls OpenTelemetry's `ThreadingInstrumentor().instrument()`,
# which wraps `ThreadPoolExecutor.submit` for the whole process so each job carries the caller's
# OpenTelemetry context into its thread: every `asyncio.to_thread` pays for it (Strands' sync tools
# and model clients use it; the store's hops did too, 4-5 us a submit on the loop, 1.6% of the
# process's CPU a facade click, until they moved to store/store_threads.py, issue 34).
# While no tracer provider is installed no span records anything, so the context carries nothing a
# thread would use. 1.62 has no switch: while no provider is installed, that one wrapper
# (OpenTelemetry's own, recognised by its function; a wrapper anyone else put on top is left alone)
# is taken off `submit`, and the same object is put back as soon as a turn or a resume starts with
# a provider installed (`carry_thread_context_if_recorded`, called by the facade). Thread and Timer
# stay wrapped. The wrapper's private name in opentelemetry-instrumentation-threading fails loudly
# at import if moved.
_SUBMIT_WRAPPER = getattr(ThreadingInstrumentor, "_ThreadingInstrumentor__wrap_thread_pool_submit")  # noqa: B009
_unwrapped_submit: Any = None  # OpenTelemetry's wrapper while we keep it off `submit`, else None


def _recorded() -> bool:
    """Is a tracer provider installed (a span can record)?"""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def carry_thread_context_if_recorded() -> None:
    """OpenTelemetry's wrapper on `ThreadPoolExecutor.submit` on while a provider is installed,
    off while none is (only the wrapper Strands' tracer installed; cheap when nothing changes)."""
    global _unwrapped_submit
    if _unwrapped_submit is not None:
        if _recorded():
            if vars(ThreadPoolExecutor).get("submit") is _unwrapped_submit.__wrapped__:  # nobody wrapped it since
                ThreadPoolExecutor.submit = _unwrapped_submit  # type: ignore[method-assign]
            _unwrapped_submit = None
        return
    if _recorded():
        return
    current = vars(ThreadPoolExecutor).get("submit")
    if getattr(current, "_self_wrapper", None) is _SUBMIT_WRAPPER:  # OpenTelemetry's, outermost
        _unwrapped_submit = current
        ThreadPoolExecutor.submit = current.__wrapped__  # type: ignore[method-assign,union-attr]


def skip_unrecorded_thread_context() -> None:
    """Build Strands' tracer now (it instruments threading once, when built), then take
    OpenTelemetry's `submit` wrapper off while no provider is installed (idempotent)."""
    strands_tracer.get_tracer()
    carry_thread_context_if_recorded()


# 9. Every Agent Strands builds makes two plugins of its own (the model's, and agent delegation),
# and `Plugin.__init__` scans each one's whole class for @hook and @tool methods with a getattr per
# attribute: about 60 us of a 120 us `Agent()`, once per turn and per click resumed from the store
# (issue 34), to find none. 1.62 has no switch and imports the two scans by name into
# `strands.plugins.plugin`: they are swapped there for ones that answer [] for exactly those two
# classes when no attribute of their classes is a hook or a tool (checked once, when installed;
# otherwise that class is scanned as before), and call Strands' own scans for every other plugin.
# tests/core/test_strands_plugin_scan.py compares both on the instances a real Agent makes.
_BUILT_IN_PLUGINS = (
    ("strands.models.model", "_ModelPlugin"),
    ("strands.agent._agent_delegation", "AgentDelegation"),
)
_STRANDS_DISCOVER_HOOKS: Callable[[object, str], list[Any]] = strands_plugin.discover_hooks
_STRANDS_DISCOVER_TOOLS: Callable[[object, str], list[Any]] = strands_plugin.discover_tools
_PLAIN_PLUGINS: set[type] = set()  # Strands' own plugin classes known to carry no hook or tool


def _declares_hooks_or_tools(cls: type) -> bool:
    """Does any class in `cls`'s MRO hold a @hook or @tool attribute? (A property is not looked
    into; the test compares with Strands' own scan on real instances.)"""
    for klass in cls.__mro__:
        for value in vars(klass).values():
            inner = getattr(value, "__func__", value)  # a staticmethod's or classmethod's function
            if isinstance(inner, DecoratedFunctionTool) or hasattr(inner, "_hook_event_types"):
                return True
    return False


def discover_hooks_unless_plain(instance: object, plugin_name: str) -> list[Any]:
    """Strands' `discover_hooks`, or [] for a plugin class of Strands' own that declares none."""
    if type(instance) in _PLAIN_PLUGINS:
        return []
    return _STRANDS_DISCOVER_HOOKS(instance, plugin_name)


def discover_tools_unless_plain(instance: object, plugin_name: str) -> list[Any]:
    """Strands' `discover_tools`, or [] for a plugin class of Strands' own that declares none."""
    if type(instance) in _PLAIN_PLUGINS:
        return []
    return _STRANDS_DISCOVER_TOOLS(instance, plugin_name)


def skip_empty_plugin_scans() -> None:
    """Install the two scans above in `strands.plugins.plugin` (idempotent)."""
    for module_name, class_name in _BUILT_IN_PLUGINS:
        cls = getattr(importlib.import_module(module_name), class_name)  # AttributeError: see entry 9
        if not _declares_hooks_or_tools(cls):
            _PLAIN_PLUGINS.add(cls)
    for name, ours, theirs in (
        ("discover_hooks", discover_hooks_unless_plain, _STRANDS_DISCOVER_HOOKS),
        ("discover_tools", discover_tools_unless_plain, _STRANDS_DISCOVER_TOOLS),
    ):
        current = getattr(strands_plugin, name)  # AttributeError: Strands moved it; see entry 9
        if current is ours:
            continue
        if current is not theirs:
            raise RuntimeError(f"strands.plugins.plugin.{name} is not Strands' own: strands_compat.py entry 9")
        setattr(strands_plugin, name, ours)


# 10. Strands' tracer builds each span's attributes and events before it asks OpenTelemetry for the
# span (the messages walked part by part, the token counts, and for an agent's span the tool list
# and every tool's spec: `Agent.tool_names` and `get_all_tools_config()` each copy, normalise and
# validate every spec, twice per `invoke_async`), and ends each span the same way, though while no
# tracer provider is installed the span is a non-recording no-op that drops all of it (7% of the
# loop's CPU a facade cycle, issue 34; entry 5 stopped only the JSON text). 1.62 has no switch.
# While no provider is installed: the four `start_*_span` methods the agent, the event loop and the
# tool executor call return the span Strands' `_start_span` would get from OpenTelemetry (the same
# parent rule, nothing built for it); the four matching `end_*_span` return at once for a span that
# does not record (Strands' `_end_span` does nothing else for one); `Agent._start_agent_trace_span`
# asks for the span without the tool list. With a provider installed every call is Strands' own;
# a method another library wrapped before start-up (an instrumentation of Strands) is left as it is.
# tests/core/test_strands_quiet_spans.py pins the methods' source and compares the spans.
_QUIET_STARTS = ("start_agent_span", "start_model_invoke_span", "start_tool_call_span", "start_event_loop_cycle_span")
_QUIET_ENDS = ("end_agent_span", "end_model_invoke_span", "end_tool_call_span", "end_event_loop_cycle_span")
_STRANDS_TRACER_METHODS: dict[str, Callable[..., Any]] = {
    name: getattr(strands_tracer.Tracer, name) for name in (*_QUIET_STARTS, *_QUIET_ENDS)
}
_STRANDS_AGENT_SPAN: Callable[..., Any] = Agent._start_agent_trace_span


def _unrecorded_span(tracer: strands_tracer.Tracer, parent_span: trace.Span | None) -> trace.Span:
    """The span Strands' `_start_span(name, parent_span)` gets from OpenTelemetry, nothing built:
    the parent's context only when the parent records (Strands' rule); OpenTelemetry's no-op
    tracer answers with a non-recording span (the current one, or one with the parent's context)."""
    if not parent_span:
        parent_span = trace.get_current_span()
    context = None
    if parent_span.is_recording() and parent_span != trace.INVALID_SPAN:
        context = trace.set_span_in_context(parent_span)
    return tracer.tracer.start_span(name="", context=context)


def _parent(args: tuple[Any, ...], kwargs: dict[str, Any], at: int) -> Any:
    return kwargs["parent_span"] if "parent_span" in kwargs else args[at] if len(args) > at else None


def _quiet_start(name: str) -> Callable[..., Any]:
    strands_own = _STRANDS_TRACER_METHODS[name]

    def start(self: strands_tracer.Tracer, *args: Any, **kwargs: Any) -> Any:
        if _recorded():
            return strands_own(self, *args, **kwargs)
        if name == "start_agent_span":  # (messages, agent_name, ...): always under the current span
            return _unrecorded_span(self, None)
        if name == "start_event_loop_cycle_span":  # (invocation_state, messages, parent_span=None, ...)
            state = kwargs["invocation_state"] if "invocation_state" in kwargs else args[0]
            return _unrecorded_span(self, _parent(args, kwargs, 2) or state.get("event_loop_parent_span"))
        return _unrecorded_span(self, _parent(args, kwargs, 1))  # (messages or tool, parent_span=None, ...)

    start.__name__ = start.__qualname__ = name
    start._chat_approvals_quiet = True  # type: ignore[attr-defined]
    return start


def _quiet_end(name: str) -> Callable[..., Any]:
    strands_own = _STRANDS_TRACER_METHODS[name]

    def end(self: strands_tracer.Tracer, span: Any, *args: Any, **kwargs: Any) -> None:
        if not span or not span.is_recording():
            return  # what Strands' `_end_span` does with it, after building what it would drop
        strands_own(self, span, *args, **kwargs)

    end.__name__ = end.__qualname__ = name
    end._chat_approvals_quiet = True  # type: ignore[attr-defined]
    return end


def agent_span_if_recorded(agent: Agent, messages: Any) -> Any:
    """`Agent._start_agent_trace_span`, without the tool list and specs while nothing records."""
    if _recorded():
        return _STRANDS_AGENT_SPAN(agent, messages)
    return agent.tracer.start_agent_span(messages=messages, agent_name=agent.name)


def skip_unrecorded_spans() -> None:
    """Install the quiet span methods on Strands' `Tracer` and `Agent` (idempotent). A method
    another library has wrapped already (an instrumentation of Strands' spans) is left alone."""
    for name in (*_QUIET_STARTS, *_QUIET_ENDS):
        current = getattr(strands_tracer.Tracer, name)  # AttributeError: Strands moved it; see entry 10
        if current is _STRANDS_TRACER_METHODS[name]:
            setattr(strands_tracer.Tracer, name, _quiet_start(name) if name in _QUIET_STARTS else _quiet_end(name))
    if Agent._start_agent_trace_span is _STRANDS_AGENT_SPAN:  # AttributeError: Strands moved it; see entry 10
        setattr(Agent, "_start_agent_trace_span", agent_span_if_recorded)  # noqa: B010 (mypy cannot see it)


# 11. Before each model call Strands' event loop deep-copies the agent's messages, the tool specs,
# the tool choice and the model state (`copy.deepcopy`, for the middleware context: nothing a
# middleware or the model does may reach the agent's own). `copy.deepcopy` goes through its memo
# and dispatch table for every dict, list and string; for the trees these are (dicts, lists and
# JSON scalars) a direct copy is 2-3x cheaper and as deep (every dict and list new, nothing
# mutable shared with the original), and the messages grow with a chat's history (issue 34).
# 1.62 has no switch and calls `copy.deepcopy` through the module it imported: that name, in
# `strands.event_loop.event_loop` only, is given an object that copies JSON trees directly and
# hands anything else (a tuple, a dataclass, a dict subclass, a tree too deep or with a cycle) to
# `copy.deepcopy`, and forwards every other attribute to the `copy` module. One difference: a
# dict or list that appears twice in the tree is copied twice (deepcopy keeps the two as one).
# tests/core/test_strands_model_call_copies.py compares both and pins what the event loop copies.
_JSON_ATOMS = frozenset({str, int, float, bool, type(None), bytes})


def _json_tree_copy(value: Any) -> Any:
    cls = value.__class__
    if cls is dict:
        return {k: v if v.__class__ in _JSON_ATOMS else _json_tree_copy(v) for k, v in value.items()}
    if cls is list:
        return [v if v.__class__ in _JSON_ATOMS else _json_tree_copy(v) for v in value]
    if cls in _JSON_ATOMS:
        return value
    return copy.deepcopy(value)


def deepcopy_json_first(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """`copy.deepcopy(value)`, made directly for a tree of dicts, lists and JSON scalars."""
    if memo is not None:
        return copy.deepcopy(value, memo)
    try:
        return _json_tree_copy(value)
    except RecursionError:  # a cycle, or deeper than the stack: deepcopy's memo handles it
        return copy.deepcopy(value)


class _CopyForTheEventLoop(types.ModuleType):
    """The `copy` module as Strands' event loop sees it: `deepcopy` is `deepcopy_json_first`."""

    deepcopy = staticmethod(deepcopy_json_first)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


_EVENT_LOOP_COPY = _CopyForTheEventLoop("copy")


def copy_model_call_inputs_directly() -> None:
    """Install `_EVENT_LOOP_COPY` as `copy` in Strands' event loop module (idempotent)."""
    current = strands_event_loop.copy  # AttributeError: Strands stopped importing it; see entry 11
    if current is _EVENT_LOOP_COPY:
        return
    if current is not copy:
        raise RuntimeError("strands.event_loop.event_loop.copy is not the copy module: strands_compat.py entry 11")
    setattr(strands_event_loop, "copy", _EVENT_LOOP_COPY)  # noqa: B010 (an attribute mypy cannot see)


# 12. Strands' default tool executor (`ConcurrentToolExecutor`) runs each call of a step in an
# asyncio task of its own, its events handed back through a queue and an Event per call, even for
# a step with one call, as an approval's step usually is (the model is told to call the approval
# tool on its own, and R5 cancels anything beside it) and so the resume's re-run of the paused call
# (50-75 us of the event loop's CPU a resumed click, 3.5-5% of a held click's, issue 34).
# `LoneCallInPlace` is that executor, except that a step with exactly one call runs it as Strands'
# own `SequentialToolExecutor` does: in place, the same events in the same order (and, as there, a
# call not yet started when `Agent.cancel()` is seen is answered "Tool execution cancelled"). A step
# with more calls runs them concurrently, as before. Only the built-in agent gets it
# (core/agent/factory.py); an agent from your factory keeps its own executor. 1.62 exposes an
# executor's strategy only as the abstract `_execute`, which is what this overrides.
# tests/core/test_strands_lone_tool_call.py pins both executors' `_execute` and runs one step of one
# call and one of two through both.
_IN_PLACE = SequentialToolExecutor()


class LoneCallInPlace(ConcurrentToolExecutor):
    """Strands' concurrent tool executor; a step of one call runs in place (Strands' sequential)."""

    def _execute(self, agent: Any, tool_uses: list[Any], *args: Any, **kwargs: Any) -> Any:
        if len(tool_uses) == 1:
            return _IN_PLACE._execute(agent, tool_uses, *args, **kwargs)
        return super()._execute(agent, tool_uses, *args, **kwargs)


# 13. Every `Agent()` calls `ToolRegistry.initialize_tools(load_tools_from_directory)`, which looks
# for a `./tools/` folder in the process's working directory (a getcwd and a stat, and a listing of
# the folder and a stat per file where one exists) and then, with loading off (Strands' default,
# and every Agent this project builds), skips every module it found: with loading off all it
# changes is `tool_config = None` (and a debug line that counts the modules it skipped). That is one
# Agent per turn and one per click resumed from the store (1.6% of a facade cycle's loop CPU,
# issue 34). 1.62 has no switch: with loading off `initialize_tools` only sets `tool_config`; with
# loading on it is Strands' own. tests/core/test_strands_tool_folder.py compares both on a working
# directory that holds a `tools/` folder with a tool in it.
_STRANDS_INITIALIZE_TOOLS: Callable[..., None] = ToolRegistry.initialize_tools


def initialize_tools_unless_off(self: ToolRegistry, load_tools_from_directory: bool = False) -> None:
    """Strands' `initialize_tools`, without looking for `./tools/` when it would load nothing from it."""
    if load_tools_from_directory:
        _STRANDS_INITIALIZE_TOOLS(self, load_tools_from_directory)
        return
    self.tool_config = None  # what Strands' own leaves changed with loading off


def skip_unloaded_tool_folder() -> None:
    """Install `initialize_tools_unless_off` on Strands' `ToolRegistry` (idempotent). A method
    another library replaced before start-up is left as it is."""
    if ToolRegistry.initialize_tools is _STRANDS_INITIALIZE_TOOLS:  # AttributeError: Strands moved it; see entry 13
        setattr(ToolRegistry, "initialize_tools", initialize_tools_unless_off)  # noqa: B010


# 14. A tool call's two async generators, Strands' `_run_tool` (the executor's terminal streams the
# tool through it) and `DecoratedFunctionTool.stream` (every @tool), each yield the call's last
# event (its result, or the interrupt that pauses it) and would end at their next step; but their
# consumer stops at that event and never takes the step, so both are left suspended, and when they
# are collected asyncio's async-generator finalizer closes each on the event loop: a wake-up of the
# loop through its self-pipe (a socket send, which hands the GIL to any waiting store thread) and a
# task to run `aclose()`. Three a turn paused and resumed (3.5-6% of a facade cycle's loop CPU,
# about 5% of Strands' own pause and resume in memory; issue 34). 1.62 has no switch: each is
# wrapped in `RunToItsEnd`, which takes that one more step right after a result or interrupt event,
# before handing the event on (Strands' generators run no code there: they return), and hands on
# anything the step yields or raises at the next step, in order. Other events are passed on as
# they come, without looking ahead. `_run_tool` is replaced in `strands.tools.executors._executor`
# (its terminal calls it by name); `stream` on `DecoratedFunctionTool` when it is Strands' own. The
# wrapper is an `AsyncGenerator` (asend, athrow, aclose reach the generator).
# tests/core/test_strands_run_to_end.py pins both functions' source, runs a paused and resumed turn
# and counts what reaches the finalizer.
_LAST_EVENTS = (ToolResultEvent, ToolInterruptEvent)
_STRANDS_RUN_TOOL: Callable[..., AsyncGenerator[Any, None]] = strands_executor._run_tool
_STRANDS_TOOL_STREAM: Callable[..., AsyncGenerator[Any, None]] = DecoratedFunctionTool.stream
_NONE_HELD: Any = object()


class _Ended:
    """What the step after a last event brought: the generator's end, or an exception to raise."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class RunToItsEnd(collections.abc.AsyncGenerator):
    """An async generator of Strands', stepped once more right after it yields a last event."""

    __slots__ = ("_gen", "_held")

    def __init__(self, gen: AsyncGenerator[Any, None]) -> None:
        self._gen = gen
        self._held: Any = _NONE_HELD  # an event, or _Ended, that the step after a last event brought

    async def __anext__(self) -> Any:
        return await self.asend(None)

    async def asend(self, value: Any) -> Any:
        held = self._held
        if held is not _NONE_HELD:
            self._held = _NONE_HELD
            if held.__class__ is _Ended:
                if held.error is not None:
                    raise held.error
                raise StopAsyncIteration
            return held
        event = await self._gen.asend(value)
        if isinstance(event, _LAST_EVENTS):
            try:
                self._held = await self._gen.asend(None)
            except StopAsyncIteration:
                self._held = _Ended(None)
            except Exception as e:  # raised where the consumer's next step would have met it
                self._held = _Ended(e)
        return event

    async def athrow(self, *args: Any) -> Any:  # (exception) or the older (type, value, traceback)
        self._held = _NONE_HELD
        return await self._gen.athrow(*args)

    async def aclose(self) -> None:
        self._held = _NONE_HELD
        await self._gen.aclose()


def run_tool_to_its_end(*args: Any, **kwargs: Any) -> RunToItsEnd:
    """Strands' `_run_tool`, run to its end after its last event."""
    return RunToItsEnd(_STRANDS_RUN_TOOL(*args, **kwargs))


def stream_to_its_end(self: DecoratedFunctionTool, *args: Any, **kwargs: Any) -> RunToItsEnd:
    """Strands' `DecoratedFunctionTool.stream`, run to its end after its last event."""
    return RunToItsEnd(_STRANDS_TOOL_STREAM(self, *args, **kwargs))


def run_tool_calls_to_their_end() -> None:
    """Install the two wrappers above (idempotent). A `stream` another library replaced before
    start-up is left as it is."""
    current = strands_executor._run_tool  # AttributeError: Strands moved it; see entry 14
    if current is not run_tool_to_its_end:
        if current is not _STRANDS_RUN_TOOL:
            raise RuntimeError("strands' _run_tool is not its own: core/agent/strands_compat.py entry 14")
        setattr(strands_executor, "_run_tool", run_tool_to_its_end)  # noqa: B010 (mypy cannot see it)
    if DecoratedFunctionTool.stream is _STRANDS_TOOL_STREAM:
        setattr(DecoratedFunctionTool, "stream", stream_to_its_end)  # noqa: B010


# 15. Every `Agent()` gets Strands' `AgentDelegation` plugin unless one of its plugins carries that
# plugin's name: four hooks (before and after each tool step, after each tool call, before each model
# call) and a middleware around every tool call, which wraps the call's events in two more async
# generators. All of it acts only for a tool made with `agent.as_tool(delegate=True)`; for an agent
# without one, every hook returns having changed nothing and the middleware passes the events on as
# they come (about 45 us of a turn paused and resumed, 5%; issue 34). The built-in agent
# (core/agent/factory.py) is given `DelegationIfDelegating` under that name: at construction, its
# tools already registered, it installs a real `AgentDelegation` when any tool delegates, and nothing
# otherwise. The built-in agent's tools are fixed when it is built; an agent from your factory keeps
# Strands' own plugin. 1.62 has no switch; the name check is in `Agent.__init__`.
# tests/core/test_strands_delegation.py pins `AgentDelegation` and the check, and compares the hooks
# and middleware of both agents, with a delegating tool and without.
class DelegationIfDelegating(Plugin):
    """Strands' `AgentDelegation` for an agent with a tool that delegates; nothing for any other."""

    name = "strands:agent-delegation"  # Strands' own plugin's name: it is then not added again

    def init_agent(self, agent: Agent) -> None:
        tools = agent.tool_registry
        if any(_delegates(t) for t in (*tools.registry.values(), *tools.dynamic_tools.values())):
            AgentDelegation().init_agent(agent)  # declares no @hook or @tool (entry 9): init is all it does


def _delegates(tool: Any) -> bool:
    """As Strands' `_is_delegation_tool`: an agent made a tool with `delegate=True`."""
    return isinstance(tool, _AgentAsTool) and tool.delegate
