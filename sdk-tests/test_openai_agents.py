"""openai-agents (the OpenAI Agents SDK) end to end through toolpulse, profile `hosted`.

An Agent with no tools, on `OpenAIResponsesModel` pointed at toolpulse in front of the scripted
gateway (gateway.py), streamed with `Runner.run_streamed`. The gateway runs its tools itself;
toolpulse shows each call as a native hosted item (docs/hosted.md), which the SDK records as a
`ToolCallItem` and does not try to run, so the turn completes with the gateway's message and
one model request. Straight from the gateway (or with the companion profile `openai`, which
leaves the `function_call` items in the response) the SDK looks for a function tool of that name
and fails: `ModelBehaviorError: Tool web_search not found in agent …`.

The next turn is `result.to_input_list()` plus a user message: the hosted items go back to
toolpulse, and the gateway must get its own `function_call` + `function_call_output` pairs.
Both turns run once against the plain gateway and once against one that emits antwort's in-place lifecycle events
lifecycle events on its function_call items (gateway.py `?spec023=1`): the same run.

Tracing is off (the SDK would otherwise export traces to OpenAI's servers).
Environment: TOOLPULSE_BIN (see test_python_sdk.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"

import openai  # noqa: E402
import pytest  # noqa: E402
from agents import Agent, ModelBehaviorError, Runner, set_tracing_disabled  # noqa: E402
from agents.items import MessageOutputItem, ToolCallItem  # noqa: E402
from agents.models.openai_responses import OpenAIResponsesModel  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import contract  # noqa: E402
import gateway  # noqa: E402
from test_python_sdk import (  # noqa: E402,F401  (the fixtures: the gateway and toolpulse in front of it)
    HOSTED_CLASSES,
    PROFILES_HEADER,
    REQUEST_TIMEOUT_S,
    _recorded,
    check_next_turn,
    gateway_addr,
    hosted_expected,
    proxy_addr,
)

set_tracing_disabled(True)

TOOL_MS = "30"
QUESTION = "What is known about tool progress?"
AGENTIC_CALLS = [gateway.CALLS[k] for k in ("web", "file", "gh", "broken")]


class Turn:
    """One `Runner.run_streamed` turn of a tool-less agent through `addr`, with the request
    bodies the SDK sent (an httpx request hook) and every stream event."""

    def __init__(self, addr: str, tag: str, profile: str | None = None, query: dict | None = None) -> None:
        self.addr, self.tag, self.profile = addr, tag, profile
        self.query = {"tool_ms": TOOL_MS, **(query or {})}
        self.sent: list[dict] = []
        self.events: list = []
        self.result = None

    async def _run(self, input) -> None:
        async def keep(request) -> None:
            await request.aread()
            self.sent.append(json.loads(request.content))

        headers = {gateway.TAG_HEADER: self.tag, **({PROFILES_HEADER: self.profile} if self.profile else {})}
        http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [keep]})
        async with openai.AsyncOpenAI(base_url=f"http://{self.addr}/v1", api_key="sk-e2e-not-a-key",
                                      default_headers=headers, default_query=self.query, http_client=http,
                                      timeout=REQUEST_TIMEOUT_S, max_retries=0) as client:
            agent = Agent(name="assistant", instructions="Answer from what the tools found.",
                          model=OpenAIResponsesModel(model=gateway.MODEL, openai_client=client))
            self.result = Runner.run_streamed(agent, input)
            async for event in self.result.stream_events():
                self.events.append(event)

    def run(self, input) -> "Turn":
        asyncio.run(asyncio.wait_for(self._run(input), REQUEST_TIMEOUT_S))
        return self

    def items(self, kind: type) -> list:
        return [e.item for e in self.events if e.type == "run_item_stream_event" and isinstance(e.item, kind)]


# The plain gateway, and one that emits antwort's in-place lifecycle events on its function_call
# items (gateway.py `?spec023=1`), which toolpulse folds into its hosted items: the same run.
GATEWAY_MODES = {"plain gateway": {}, "spec023 gateway": {"spec023": "1"}}


@pytest.mark.parametrize("mode", list(GATEWAY_MODES))
def test_a_tool_less_agent_completes_the_turn_and_the_next_gives_the_gateway_its_pairs(proxy_addr, gateway_addr, mode):
    query = GATEWAY_MODES[mode]
    tag = f"agents-turn-{'spec023-' if query else ''}"
    first = Turn(proxy_addr, f"{tag}1", query=query).run(QUESTION)
    result = first.result
    assert result.is_complete and result.final_output == gateway.FINAL_TEXT

    # One ToolCallItem per gateway-run call, each the native hosted item, in the gateway's order.
    calls = first.items(ToolCallItem)
    assert [type(c.raw_item).__name__ for c in calls] == [
        "ResponseFunctionWebSearch", "ResponseFileSearchToolCall", "McpCall", "McpCall"]
    assert [c.raw_item.type for c in calls] == ["web_search_call", "file_search_call", "mcp_call", "mcp_call"]
    assert all(isinstance(c.raw_item, tuple(HOSTED_CLASSES.values())) for c in calls)
    assert [c.raw_item.id.startswith(contract.HOSTED_PREFIX) for c in calls] == [True] * 4
    assert len({c.raw_item.id for c in calls}) == 4
    assert [(c.raw_item.name, c.raw_item.arguments) for c in calls[2:]] == [
        (name, arguments) for _, name, arguments, _ in AGENTIC_CALLS[2:]]
    assert calls[2].raw_item.output == gateway.CALLS["gh"][3]
    assert calls[3].raw_item.status == "failed" and calls[3].raw_item.output is None
    assert calls[0].raw_item.action.query == json.loads(gateway.CALLS["web"][2])["query"]
    assert calls[1].raw_item.queries == [json.loads(gateway.CALLS["file"][2])["query"]]
    # No item the agent would run, no output item of its own: the gateway ran them.
    assert [e.name for e in first.events if e.type == "run_item_stream_event"] == ["tool_called"] * 4 + [
        "message_output_created"]
    messages = first.items(MessageOutputItem)
    assert len(messages) == 1 and [c.text for c in messages[0].raw_item.content] == [gateway.FINAL_TEXT]

    # One model request reached the gateway (the SDK did not loop to "run" a tool).
    assert len(first.sent) == 1
    recorded = _recorded(gateway_addr, f"{tag}1")
    assert len(recorded) == 1 and recorded[0]["body"]["model"] == gateway.MODEL
    # The response as the SDK got it is the contract's (ids bound here, for the next turn).
    want, ids = hosted_expected(gateway.MODEL, query)
    [response] = result.raw_responses
    contract.assert_match([item.model_dump(mode="json") for item in response.output],
                          contract.final_output(want), "raw_responses[0].output")

    # Turn 2: the SDK's own transcript plus a new question.
    history = result.to_input_list()
    hosted_in_history = [i for i in history if str(i.get("id", "")).startswith(contract.HOSTED_PREFIX)]
    assert [i["type"] for i in hosted_in_history] == ["web_search_call", "file_search_call", "mcp_call", "mcp_call"]
    second = Turn(proxy_addr, f"{tag}2", query=query).run(history + [{"role": "user", "content": "And what about retries?"}])
    assert second.result.final_output == gateway.FINAL_TEXT
    assert len(second.sent) == 1
    [recorded] = _recorded(gateway_addr, f"{tag}2")
    body = recorded["body"]
    assert body is not None, recorded
    # Exactly what the SDK sent, each hosted item replaced by the gateway's pair, in place.
    check_next_turn(body, second.sent[0]["input"], ids, 4)
    pairs = [(i["type"], i["call_id"], i.get("name"), i.get("arguments"), i.get("output"))
             for i in body["input"] if i.get("type") in ("function_call", "function_call_output")]
    assert pairs == [p for call_id, name, arguments, output in AGENTIC_CALLS
                     for p in (("function_call", call_id, name, arguments, None),
                               ("function_call_output", call_id, None, None, output))]
    kinds = {i.get("type") for i in body["input"]}
    assert not kinds & {"mcp_call", "web_search_call", "file_search_call", "item_reference"}, kinds


@pytest.mark.parametrize("where", ["gateway directly", "toolpulse, profile openai (companions)"])
def test_without_hosted_items_the_agent_fails_on_the_gateways_calls(where, proxy_addr, gateway_addr):
    """The problem profile `hosted` solves: the gateway's function_call items make the SDK look
    for a function tool it does not have."""
    turn = Turn(gateway_addr, f"agents-fail-{where}") if where.startswith("gateway") else \
        Turn(proxy_addr, f"agents-fail-{where}", profile="openai")
    with pytest.raises(ModelBehaviorError, match=r"^Tool web_search not found in agent assistant$"):
        turn.run(QUESTION)
    assert len(turn.sent) == 1
