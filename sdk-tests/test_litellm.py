"""The official Python clients through toolpulse in front of the REAL LiteLLM proxy (1.108.7),
profile `hosted` (docs/hosted.md), with toolpulse's LiteLLM config (config/litellm.toml).

The stack (litellm/stack.py, made by `bash sdk-tests/litellm/setup.sh`): LiteLLM with a scripted
chat model `fake-gpt` and an MCP server `demo` whose tools take TOOL_MS. A request carrying the
tool `MCP_TOOL` makes LiteLLM offer the model `demo-lookup_user` / `demo-fail_tool`, stream the
model's `function_call`, run the tool, stream its own `mcp_call` item (only then, all at once)
and the model's second round. Through toolpulse the client sees ONE `mcp_call` (`tph_…`) instead,
opened when the function_call starts (so in progress while the tool runs), with LiteLLM's output
and status folded in: a failing tool (LiteLLM: `completed`, output "Error executing tool …")
ends `failed` with an `mcp_tool_execution_error`.

- openai-python 3.57: the raw `responses.create(stream=True)` and the `responses.stream()` helper,
  for a working tool (lookup_user) and a failing one (fail_tool), with the events' arrival times
  lined up with the MCP server's record of the tool's run;
- a plain function tool the request declares: LiteLLM returns the function_call to the client,
  and toolpulse passes the stream untouched (compared with the same request sent directly);
- openai-agents 0.24: an Agent whose only tool is `HostedMCPTool(tool_config=MCP_TOOL)` (the SDK
  sends it to LiteLLM as it is; nothing runs locally), `Runner.run_streamed` through toolpulse.

- one response id from `response.created` to `response.completed`: LiteLLM 1.108.7 names the
  response anew in its terminal event (tests/fixtures/recordings/litellm-1.108.7/README.md), which
  openai-python's stream helper refuses ("Lifecycle response identity changed."); toolpulse puts
  the created id back (docs/stream-rules.md, rule `response_id`).

One stack and one toolpulse for the module (LiteLLM takes ~7 s to start).
Environment: TOOLPULSE_BIN (see test_python_sdk.py); LITELLM_START_TIMEOUT_S (stack.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import openai  # noqa: E402
import pytest  # noqa: E402
from agents import Agent, HostedMCPTool, Runner, set_tracing_disabled  # noqa: E402
from agents.items import MessageOutputItem, ToolCallItem  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402
from openai.types.responses.response_output_item import McpCall  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "litellm"))
import check as litellm_check  # noqa: E402  (its stream normaliser: ids and created_at aside)
from stack import MCP_TOOL, MODEL, LiteLLMStack  # noqa: E402
from test_python_sdk import Proc, strict, toolpulse_bin  # noqa: E402

set_tracing_disabled(True)

TOOL_MS = 1500
REQUEST_TIMEOUT_S = 60
CONFIG = REPO / "config" / "litellm.toml"
HOSTED_PREFIX = "tph_"
LITELLM_ITEM_PREFIX = "mcp_"  # LiteLLM's own mcp_call / mcp_list_tools ids (mcp_4c7e670c)
FAIL_OUTPUT = "Error executing tool fail_tool"
DONE_PREFIX = "Done. The tool said: "  # fake_model.py's answer to a tool result


@dataclass(frozen=True)
class Case:
    prompt: str
    tool: str  # the MCP server's tool name
    arguments: str  # as the model streams them
    ok: bool

    @property
    def name(self) -> str:  # as LiteLLM offers it to the model
        return f"demo-{self.tool}"


CASES = {
    "lookup_user": Case("Look up user 42", "lookup_user", '{"id": 42}', ok=True),
    "fail_tool": Case("Please call the fail tool", "fail_tool", "{}", ok=False),
}
FUNCTION_TOOL = {  # tests/fixtures/recordings/litellm-1.108.7/function_tool.request.json
    "type": "function", "name": "lookup_user", "description": "Look up a user by id",
    "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
}


# ---------------------------------------------------------------- the stack and toolpulse


@pytest.fixture(scope="module")
def lite():
    stack = LiteLLMStack(tool_ms=TOOL_MS)
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def lite_proxy(request, lite) -> str:
    # The admin listener on a free port: its default (127.0.0.1:9464) may be taken by another toolpulse.
    argv = [str(toolpulse_bin()), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
            "--upstream", lite.upstream, "--config", str(CONFIG)]
    proc = Proc("toolpulse", argv, "stderr")
    request.addfinalizer(proc.stop)
    addr = proc.wait_for(r"listen=(\S+)")
    assert addr.startswith("127.0.0.1:"), addr
    return addr


def direct_addr(lite: LiteLLMStack) -> str:
    return f"127.0.0.1:{lite.port}"


def make_client(addr: str, api_key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key=api_key, timeout=REQUEST_TIMEOUT_S, max_retries=0)


# ---------------------------------------------------------------- one turn, timed


@dataclass
class Turn:
    """A stream's events as the client got them, each with its arrival time (monotonic and wall
    clock, the latter to line up with the MCP server's record), and what the stack saw."""

    events: list = field(default_factory=list)
    at: list = field(default_factory=list)
    wall: list = field(default_factory=list)
    calls: list = field(default_factory=list)  # the MCP server's tool calls during the turn
    model_requests: list = field(default_factory=list)  # LiteLLM's chat calls during the turn

    def collect(self, stream, on_in_progress=None) -> None:
        for event in stream:
            self.at.append(time.monotonic())
            self.wall.append(time.time())
            self.events.append(event.to_dict(warnings=False))  # see test_python_sdk's HELPER_DUMP_NOTE
            if on_in_progress and self.events[-1]["type"] == "response.mcp_call.in_progress":
                on_in_progress()


@contextlib.contextmanager
def watched(lite: LiteLLMStack, turn: Turn):
    n_calls, n_requests = len(lite.mcp_calls()), len(lite.model_requests())
    try:
        yield turn
    finally:
        turn.calls = lite.mcp_calls()[n_calls:]
        turn.model_requests = lite.model_requests()[n_requests:]


@contextlib.contextmanager
def kept_on_failure(turn: Turn, path: Path):
    """On a failed check (or a client error), the events the client got go to `path` (one JSON a line)."""
    try:
        yield
    except Exception as err:
        path.write_text("".join(json.dumps(e) + "\n" for e in turn.events))
        err.add_note(f"the {len(turn.events)} events the client got: {path}")
        raise


# ---------------------------------------------------------------- checks


def items_of(event: dict) -> list[dict]:
    items = [event["item"]] if isinstance(event.get("item"), dict) else []
    return items + list((event.get("response") or {}).get("output") or [])


def expected_output(case: Case, item: dict) -> str:
    return item["output"] if case.ok else FAIL_OUTPUT


def check_item(item: dict, case: Case) -> None:
    """The hosted item in its final state: LiteLLM's output and status folded in."""
    assert (item["type"], item["name"], item["arguments"]) == ("mcp_call", case.name, case.arguments), item
    assert item["id"].startswith(HOSTED_PREFIX), item
    assert isinstance(item.get("server_label"), str) and item["server_label"], item
    assert "approval_request_id" not in item, f"LiteLLM's item leaked into the hosted one: {item}"
    if case.ok:
        assert (item["status"], item.get("error")) == ("completed", None), item
        assert "user42" in item["output"], item
        assert json.loads(item["output"]) == {"id": 42, "name": "user42", "email": "user42@example.test",
                                              "active": True}
    else:
        assert (item["status"], item.get("output")) == ("failed", None), item
        assert item["error"] == {"type": "mcp_tool_execution_error",
                                 "content": [{"type": "text", "text": FAIL_OUTPUT}]}, item


def check_hosted_stream(events: list[dict], case: Case) -> int:
    """The stream of one MCP turn through toolpulse; returns the hosted item's index in
    `events`' done."""
    assert [e["sequence_number"] for e in events] == list(range(len(events))), \
        f"sequence_numbers not dense from 0: {[e['sequence_number'] for e in events]}"
    assert events[0]["type"] == "response.created"
    assert events[-1]["type"] == "response.completed", events[-1]["type"]
    ids = {e["response"]["id"] for e in events if isinstance(e.get("response"), dict)}
    assert len(ids) == 1, f"one response id from response.created on: {ids}"

    # Nothing of the gateway's function_call, nothing of LiteLLM's own MCP items.
    for e in events:
        assert not e["type"].startswith(("response.function_call_arguments.", "response.mcp_list_tools.")), e
        assert not str(e.get("item_id", "")).startswith(LITELLM_ITEM_PREFIX), e
        for item in items_of(e):
            assert item.get("type") not in ("function_call", "function_call_output", "mcp_list_tools"), \
                f"{e['type']} #{e['sequence_number']} lists {item}"
            assert not str(item.get("id", "")).startswith(LITELLM_ITEM_PREFIX), \
                f"LiteLLM's own item in {e['type']} #{e['sequence_number']}: {item}"

    # Exactly one hosted item, at index 0, then the message at 1.
    added = [e for e in events if e["type"] == "response.output_item.added"]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [(e["item"]["type"], e["output_index"]) for e in added] == [("mcp_call", 0), ("message", 1)]
    assert [(e["item"]["type"], e["output_index"]) for e in done] == [("mcp_call", 0), ("message", 1)]
    hosted_id = added[0]["item"]["id"]
    assert hosted_id.startswith(HOSTED_PREFIX) and done[0]["item"]["id"] == hosted_id, (hosted_id, done[0])
    opened = added[0]["item"]
    assert (opened["status"], opened["name"], opened["arguments"]) == ("in_progress", case.name, ""), opened

    # Its events: OpenAI's sequence, each valid for openai-python (strictly; LiteLLM's own events
    # lack fields the SDK's types require, e.g. `logprobs`: not toolpulse's to add).
    mine = [e for e in events if e.get("item_id") == hosted_id or (e.get("item") or {}).get("id") == hosted_id]
    types = [e["type"] for e in mine]
    terminal = "response.mcp_call.completed" if case.ok else "response.mcp_call.failed"
    assert types[:2] == ["response.output_item.added", "response.mcp_call.in_progress"], types
    assert types[-3:] == ["response.mcp_call_arguments.done", terminal, "response.output_item.done"], types
    assert types[2:-3] and set(types[2:-3]) == {"response.mcp_call_arguments.delta"}, types
    for e in mine:
        strict(e)
        assert e["output_index"] == 0, e
    assert "".join(e["delta"] for e in mine if e["type"].endswith("arguments.delta")) == case.arguments
    assert mine[-3]["arguments"] == case.arguments
    check_item(done[0]["item"], case)

    # The model's answer, from the tool's output (LiteLLM gave the model the same output).
    text = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    assert text == DONE_PREFIX + expected_output(case, done[0]["item"]), text

    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert [i["type"] for i in final["output"]] == ["mcp_call", "message"]
    assert final["output"][0] == done[0]["item"], "response.completed lists the hosted item in another state"
    McpCall.model_validate(final["output"][0])
    return events.index(done[0])


def check_stack_side(turn: Turn, case: Case) -> None:
    """LiteLLM ran the tool once, with the model's arguments, and made its two model rounds."""
    assert [(c["tool"], c["arguments"]) for c in turn.calls] == [(case.tool, json.loads(case.arguments))], turn.calls
    assert len(turn.model_requests) == 2, [r.get("messages") for r in turn.model_requests]
    last = turn.model_requests[1]["messages"][-1]
    assert last["role"] == "tool", last


def check_timing(turn: Turn, done_index: int) -> None:
    """The hosted item is in progress on the client while the MCP server still runs the tool."""
    [call] = turn.calls
    assert call["ended"], call
    started = next(i for i, e in enumerate(turn.events) if e["type"] == "response.mcp_call.in_progress")
    gap = turn.at[done_index] - turn.at[started]
    timeline = (f"in_progress at {turn.wall[started] - call['started']:+.3f}s and output_item.done at "
                f"{turn.wall[done_index] - call['started']:+.3f}s from the tool's start; the tool ran "
                f"{call['ended'] - call['started']:.3f}s")
    # The tool was held until the client saw in_progress (`lite.hold_next_call`), so these do
    # not depend on the machine's speed: a stream that showed nothing until the output would keep
    # the tool waiting its whole hold limit and fail the first.
    assert turn.wall[started] < call["ended"], f"in_progress came after the tool finished: {timeline}"
    assert turn.wall[done_index] >= call["ended"], f"the item was done before the tool finished: {timeline}"
    assert gap > 0, f"in_progress not before the item's done: {timeline}"


# ---------------------------------------------------------------- openai-python


@pytest.mark.parametrize("key", list(CASES))
def test_raw_create_stream(lite, lite_proxy, key, tmp_path):
    case = CASES[key]
    turn = Turn()
    with kept_on_failure(turn, tmp_path / f"{key}.events.jsonl"):
        with make_client(lite_proxy, lite.api_key) as client, watched(lite, turn):
            lite.hold_next_call()
            stream = client.responses.create(model=MODEL, input=case.prompt, tools=[MCP_TOOL], stream=True)
            with stream:
                turn.collect(stream, on_in_progress=lite.release_call)
        done_index = check_hosted_stream(turn.events, case)
        check_stack_side(turn, case)
        check_timing(turn, done_index)


@pytest.mark.parametrize("key", list(CASES))
def test_stream_helper_and_final_response(lite, lite_proxy, key, tmp_path):
    case = CASES[key]
    turn = Turn()
    with kept_on_failure(turn, tmp_path / f"{key}.helper-events.jsonl"):
        with make_client(lite_proxy, lite.api_key) as client, watched(lite, turn):
            lite.hold_next_call()
            with client.responses.stream(model=MODEL, input=case.prompt, tools=[MCP_TOOL]) as stream:
                turn.collect(stream, on_in_progress=lite.release_call)
                final = stream.get_final_response()
        done_index = check_hosted_stream(turn.events, case)
        check_stack_side(turn, case)
        check_timing(turn, done_index)
        assert final.id == turn.events[0]["response"]["id"]
        assert final.status == "completed"
        assert [item.type for item in final.output] == ["mcp_call", "message"]
        assert isinstance(final.output[0], McpCall)
        check_item(final.output[0].to_dict(), case)
        assert final.output[0].to_dict() == turn.events[done_index]["item"]
        assert final.output_text == DONE_PREFIX + expected_output(case, final.output[0].to_dict())


def post_raw(addr: str, body: dict, api_key: str) -> bytes:
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", "/v1/responses", body=json.dumps(body),
                     headers={"content-type": "application/json", "authorization": f"Bearer {api_key}"})
        resp = conn.getresponse()
        raw = resp.read()
        assert resp.status == 200, raw[:2000]
        return raw
    finally:
        conn.close()


def shape(events: list[dict]) -> list[tuple]:
    return [(e["type"], (e.get("item") or {}).get("type")) for e in events]


def test_a_plain_function_tool_passes_untouched(lite, lite_proxy):
    """A function tool the request declares is the client's: LiteLLM streams the model's
    function_call and ends the turn; toolpulse changes nothing (the same bytes as directly, ids
    and created_at aside), and openai-python gets the function_call to run."""
    body = {"model": MODEL, "input": "Look up user 42", "tools": [FUNCTION_TOOL], "stream": True}
    turn = Turn()
    with watched(lite, turn):
        direct = post_raw(direct_addr(lite), body, lite.api_key)
        proxied = post_raw(lite_proxy, body, lite.api_key)
    assert litellm_check.normalise(proxied.decode()) == litellm_check.normalise(direct.decode())
    assert turn.calls == [] and len(turn.model_requests) == 2

    def sdk_events(addr: str) -> list[dict]:
        with make_client(addr, lite.api_key) as client:
            with client.responses.create(model=MODEL, input="Look up user 42", tools=[FUNCTION_TOOL],
                                         stream=True) as stream:
                return [e.to_dict() for e in stream]

    through, straight = sdk_events(lite_proxy), sdk_events(direct_addr(lite))
    assert shape(through) == shape(straight)
    assert shape(through) == [
        ("response.created", None), ("response.in_progress", None),
        ("response.output_item.added", "function_call"), ("response.function_call_arguments.delta", None),
        ("response.function_call_arguments.delta", None), ("response.function_call_arguments.done", None),
        ("response.output_item.done", "function_call"), ("response.completed", None)]
    call = next(e["item"] for e in through if e["type"] == "response.output_item.done")
    assert (call["name"], call["arguments"], call["status"]) == ("lookup_user", '{"id": 42}', "completed")
    assert call["id"].startswith("fc_") and call["call_id"].startswith("call_")
    assert [i["type"] for i in through[-1]["response"]["output"]] == ["function_call"]
    assert HOSTED_PREFIX not in json.dumps(through)


# ---------------------------------------------------------------- openai-agents


class AgentTurn:
    """One `Runner.run_streamed` turn of an Agent whose only tool is the hosted MCP tool (LiteLLM
    runs it), with the request bodies the SDK sent and every stream event."""

    def __init__(self, addr: str, api_key: str) -> None:
        self.addr, self.api_key = addr, api_key
        self.sent: list[dict] = []
        self.events: list = []
        self.result = None
        self.error: BaseException | None = None

    async def _run(self, prompt: str) -> None:
        async def keep(request) -> None:
            await request.aread()
            self.sent.append(json.loads(request.content))

        http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [keep]})
        async with openai.AsyncOpenAI(base_url=f"http://{self.addr}/v1", api_key=self.api_key, http_client=http,
                                      timeout=REQUEST_TIMEOUT_S, max_retries=0) as client:
            agent = Agent(name="assistant", instructions="Use the tools.",
                          model=OpenAIResponsesModel(model=MODEL, openai_client=client),
                          tools=[HostedMCPTool(tool_config=MCP_TOOL)])
            self.result = Runner.run_streamed(agent, prompt)
            async for event in self.result.stream_events():
                self.events.append(event)

    def run(self, prompt: str, catch: bool = False) -> "AgentTurn":
        try:
            asyncio.run(asyncio.wait_for(self._run(prompt), REQUEST_TIMEOUT_S))
        except Exception as err:  # noqa: BLE001  (only for the direct run, which documents)
            if not catch:
                raise
            self.error = err
        return self

    def raw_events(self) -> list[dict]:
        return [e.data.to_dict() for e in self.events if e.type == "raw_response_event"]


@pytest.mark.parametrize("key", list(CASES))
def test_openai_agents_hosted_mcp_tool(lite, lite_proxy, key):
    case = CASES[key]
    turn = Turn()
    with watched(lite, turn):
        agent_turn = AgentTurn(lite_proxy, lite.api_key).run(case.prompt)
    result = agent_turn.result
    # ONE /v1/responses request, carrying the MCP tool as it is; LiteLLM made its two model rounds.
    assert len(agent_turn.sent) == 1
    assert agent_turn.sent[0]["tools"] == [MCP_TOOL]
    check_stack_side(turn, case)

    assert result.is_complete
    assert result.final_output.startswith("Done.")
    items = [e.item for e in agent_turn.events if e.type == "run_item_stream_event"]
    assert [e.name for e in agent_turn.events if e.type == "run_item_stream_event"] == [
        "tool_called", "message_output_created"]
    assert [type(i) for i in result.new_items] == [ToolCallItem, MessageOutputItem]
    assert [i.raw_item.id for i in result.new_items] == [i.raw_item.id for i in items]
    call = result.new_items[0].raw_item
    assert isinstance(call, McpCall), type(call)
    check_item(call.to_dict(), case)
    assert result.final_output == DONE_PREFIX + expected_output(case, call.to_dict())
    # The model's stream as the SDK got it: the same as the raw client's.
    check_hosted_stream(agent_turn.raw_events(), case)


def test_openai_agents_directly_against_litellm_documented(lite, capsys):
    """Not a check of toolpulse: what the same agent makes of LiteLLM's own stream (printed).

    Observed with LiteLLM 1.108.7 / openai-agents 0.24: the run completes (no "Tool … not found":
    the SDK takes the turn's items from `response.completed`, which LiteLLM lists as
    [mcp_call, message] without the function_call), with LiteLLM's own `mcp_call` (`mcp_…` id) as
    the ToolCallItem; but the streamed raw events carry the `function_call` demo-<tool> and an
    `mcp_list_tools` done that was never added, and the failing tool's McpCall says `completed`,
    error None, output "Error executing tool fail_tool" (through toolpulse: `failed` with an
    `mcp_tool_execution_error`)."""
    case = CASES["fail_tool"]
    turn = Turn()
    with watched(lite, turn):
        agent_turn = AgentTurn(direct_addr(lite), lite.api_key).run(case.prompt, catch=True)
    assert len(agent_turn.sent) == 1 and agent_turn.sent[0]["tools"] == [MCP_TOOL]
    result = agent_turn.result
    raw_items = sorted({(i.get("type"), i.get("name")) for e in agent_turn.raw_events() for i in items_of(e)},
                       key=str)
    lines = [f"openai-agents directly against LiteLLM ({case.prompt!r}):",
             f"  outcome: {'raised ' + type(agent_turn.error).__name__ + ': ' + str(agent_turn.error) if agent_turn.error else 'completed, final output ' + repr(result.final_output)}",
             f"  items streamed (type, name): {raw_items}"]
    if result is not None and not agent_turn.error:
        for item in result.new_items:
            raw = item.raw_item
            lines.append(f"  run item {type(item).__name__}: {getattr(raw, 'type', '?')} id={getattr(raw, 'id', '?')} "
                         f"status={getattr(raw, 'status', '?')} error={getattr(raw, 'error', None)!r} "
                         f"output={getattr(raw, 'output', None)!r}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
