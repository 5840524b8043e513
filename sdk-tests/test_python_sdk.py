"""openai-python end to end through toolpulse, in profile `openai` (companions, pinned with
`x-toolpulse-profiles: openai`) and in the default profile `hosted` (docs/hosted.md; the tests
named test_hosted_*, which send no profile header).

A scripted gateway (gateway.py) streams agentic Responses turns with web_search, file_search
and MCP calls as `function_call` items; the real toolpulse binary sits in front of it and the
official SDK talks to toolpulse. The SDK builds events without validating them, so every event
it yields is validated strictly here against `ResponseStreamEvent`, the companion items
(`mcp_call`, `web_search_call`, `file_search_call`) of `output_item.added/done` included.

The expected stream is derived independently from the gateway's own script by contract.py
(docs/profiles.md): the upstream events in order, renumbered, with a companion item per classified
call and its lifecycle events inserted where the contract puts them, later items' output_index
shifted, and the companions listed in `response.completed`. For `hosted`, contract.HostedOracle:
one `tph_` item per gateway-run call in place of its function_call and function_call_output,
OpenAI's own events, later indices moved down, and on the next turn the gateway's own pairs.
A gateway that emits its own lifecycle events on its function_call items (antwort's in-place lifecycle events,
gateway.py `?spec023=1`) must give a `hosted` client exactly the plain gateway's stream (the
test_hosted_*[…-spec023] cases).

Environment: TOOLPULSE_BIN (default target/debug/toolpulse, relative to the repo root).
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import typing
from pathlib import Path

import openai
import pydantic
import pytest
from openai.types.responses import (
    Response,
    ResponseFileSearchToolCall,
    ResponseFunctionWebSearch,
    ResponseStreamEvent,
)
from openai.types.responses.response_output_item import McpCall

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import contract  # noqa: E402  (the contract, derived independently of toolpulse)
import gateway  # noqa: E402  (the gateway's script is the test's source of truth)

STARTUP_TIMEOUT_S = 15
REQUEST_TIMEOUT_S = 30
TOOL_MS = 250
HEARTBEAT_MS = 60
# The tool pauses TOOL_MS upstream; a client reading the socket gets `in_progress` in real time
# when it sees at least this much between it and the tool's terminal event (a lower bound).
REALTIME_GAP_S = 0.1

CONFIG = f"""
[[tools]]
match = ["github_*"]
kind = "mcp"

[failure]
output_patterns = ["^no executor found for tool ", "^search failed: "]

[events]
profiles = ["hosted"]

[heartbeat]
interval_ms = {HEARTBEAT_MS}
"""

INJECTED_PREFIXES = ("response.web_search_call.", "response.file_search_call.", "response.mcp_call.")
COMPANION_CLASSES = {"mcp_call": McpCall, "web_search_call": ResponseFunctionWebSearch,
                     "file_search_call": ResponseFileSearchToolCall}
PROFILES_HEADER = "x-toolpulse-profiles"
# Fields the stream helper adds to the wire events (the text accumulated so far).
HELPER_EXTRA_KEYS = frozenset({"snapshot"})

# (model, query) of every agentic scenario the gateway has (see gateway.py).
SCENARIOS = {
    "agentic": (gateway.MODEL, {}),
    "agentic-DONE": (gateway.MODEL, {"done": "1"}),
    "agentic-1-based": (gateway.MODEL, {"base": "1"}),
    "parallel": (gateway.PARALLEL_MODEL, {}),
    "failures-and-unanswered": (gateway.FAILURES_MODEL, {"done": "1", "base": "1"}),
}

EVENT_ADAPTER = pydantic.TypeAdapter(ResponseStreamEvent)
# HELPER_DUMP_NOTE: the stream helper's events hold a generic `ParsedResponse[TextFormatT]`,
# whose dump makes pydantic warn "Expected `ParsedResponseOutputMessage[~TextFormatT]`" about
# the SDK's own classes, whatever the stream; `to_dict(warnings=False)` keeps that noise out.

# ResponseStreamEvent's discriminator is the SDK's own metadata, not pydantic's, so a rejected
# event lists every member's complaint; this finds the one member whose `type` it names.
EVENT_CLASSES = {
    cls.model_fields["type"].annotation.__args__[0]: cls
    for cls in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}


# ---------------------------------------------------------------- processes


class Proc:
    """A child process whose output lines are collected by a thread (so pipes never fill)."""

    def __init__(self, name: str, argv: list[str], stream: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        pipes = [self.proc.stderr] + ([self.proc.stdout] if stream == "stdout" else [])
        for pipe in pipes:
            threading.Thread(target=self._pump, args=(pipe,), daemon=True).start()

    def _pump(self, pipe) -> None:
        for line in pipe:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str) -> str:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                if self.proc.poll() is not None:
                    break
                continue
            if m := re.search(pattern, line):
                return m.group(1)
        self.stop()
        raise RuntimeError(f"{self.name} did not print {pattern!r} within {STARTUP_TIMEOUT_S}s; "
                           f"exit={self.proc.poll()}; output:\n" + "\n".join(self.lines))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def toolpulse_bin() -> Path:
    path = Path(os.environ.get("TOOLPULSE_BIN", "target/debug/toolpulse"))
    path = path if path.is_absolute() else REPO / path
    if not os.access(path, os.X_OK):
        pytest.fail(f"toolpulse binary not found at {path} (set TOOLPULSE_BIN; run `cargo build`)")
    return path


@pytest.fixture(scope="session")
def gateway_addr(request) -> str:
    proc = Proc("gateway", [sys.executable, "-u", str(HERE / "gateway.py"), "--port", "0"], "stdout")
    request.addfinalizer(proc.stop)
    return proc.wait_for(r"listening on http://(\S+)")


@pytest.fixture(scope="session")
def proxy_addr(request, gateway_addr, tmp_path_factory) -> str:
    config = tmp_path_factory.mktemp("toolpulse") / "toolpulse.toml"
    config.write_text(CONFIG)
    argv = [str(toolpulse_bin()), "--listen", "127.0.0.1:0",
            "--upstream", f"http://{gateway_addr}", "--config", str(config)]
    proc = Proc("toolpulse", argv, "stderr")
    request.addfinalizer(proc.stop)
    addr = proc.wait_for(r"listen=(\S+)")
    assert addr.startswith("127.0.0.1:"), addr
    return addr


def make_client(addr: str, profile: str | None = "openai") -> openai.OpenAI:
    """A client of `addr`; `profile` pins the presentation with x-toolpulse-profiles (None: the
    proxy's default, `hosted`)."""
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key="sk-e2e-not-a-key",
                         timeout=REQUEST_TIMEOUT_S, max_retries=0,
                         default_headers={PROFILES_HEADER: profile} if profile else None)


@pytest.fixture()
def client(proxy_addr):
    """Pinned to profile `openai` (the companion shape), which is no longer the default."""
    with make_client(proxy_addr) as c:
        yield c


@pytest.fixture()
def hosted_client(proxy_addr):
    """No profile header: the proxy's default presentation, `hosted`."""
    with make_client(proxy_addr, profile=None) as c:
        yield c


# ---------------------------------------------------------------- expectations


def upstream_events(model: str, query: dict) -> list[dict]:
    """The gateway's own events for a scenario (its script, not a request: no proxy involved);
    the query's `base` and `spec023` (gateway.py) as the gateway reads them."""
    script = gateway.script_for(model, TOOL_MS / 1000, int(query.get("base", "0")), query.get("spec023") == "1")
    return [event for _, event in script.steps]


def expected(model: str, query: dict, profile: str = "openai") -> list[dict]:
    return contract.expected_stream(upstream_events(model, query), profile)


def strict(event_dict: dict) -> object:
    """Strict validation: the SDK itself builds events with `construct` (no validation)."""
    try:
        validated = EVENT_ADAPTER.validate_python(event_dict)
    except pydantic.ValidationError as err:
        cls = EVENT_CLASSES.get(event_dict.get("type"))
        why = err if cls is None else _member_error(cls, event_dict)
        raise AssertionError(f"event rejected by ResponseStreamEvent ({getattr(cls, '__name__', '?')}): "
                             f"{why}\n{json.dumps(event_dict, default=str)[:2000]}") from None
    item = event_dict.get("item")
    if isinstance(item, dict) and item.get("type") in COMPANION_CLASSES:
        # The union's smart mode picks the member whose `type` literal fits; make sure it did.
        assert isinstance(validated.item, COMPANION_CLASSES[item["type"]]), type(validated.item)
    return validated


def _member_error(cls: type, event_dict: dict) -> object:
    try:
        cls.model_validate(event_dict)
    except pydantic.ValidationError as err:
        return err
    return "accepted by its own class but not by the union"


def check_stream(events: list[dict], want: list[dict], extra_keys: frozenset = frozenset()) -> None:
    """Every event as the contract says (content, order, numbers), and the lifecycle invariants."""
    for e in events:
        strict(e)
    contract.assert_stream(events, want, extra_keys)
    assert [e["sequence_number"] for e in events] == list(range(len(events))), "not dense"
    # Each item's output_index is unique and the same on all its events.
    index_of: dict[str, int] = {}
    for e in events:
        if e["type"] in ("response.output_item.added", "response.output_item.done"):
            assert index_of.setdefault(e["item"]["id"], e["output_index"]) == e["output_index"], e
    assert len(set(index_of.values())) == len(index_of), f"an output_index is reused: {index_of}"
    # Every companion added once, done once; every injected in_progress closed exactly once.
    companions = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"
                  and e["item"]["id"].startswith(contract.COMPANION_PREFIX)]
    done = [e["item"]["id"] for e in events if e["type"] == "response.output_item.done"
            and e["item"]["id"].startswith(contract.COMPANION_PREFIX)]
    assert sorted(companions) == sorted(done) and len(set(companions)) == len(companions)
    opened = [e["item_id"] for e in events if e["type"].startswith(INJECTED_PREFIXES)
              and e["type"].endswith(".in_progress")]
    closed = [e["item_id"] for e in events if e["type"].startswith(INJECTED_PREFIXES)
              and e["type"].endswith((".completed", ".failed"))]
    assert sorted(opened) == sorted(closed) and len(set(opened)) == len(opened)
    assert not any("error" in e for e in events if e["type"].startswith(INJECTED_PREFIXES))


def check_final(final, want: list[dict]) -> None:
    """The helper's final Response: every gateway item plus the companions, as the contract's
    `response.completed` lists them, each validating as its native type."""
    Response.model_validate(final.to_dict(warnings=False))
    contract.assert_match(final.to_dict(warnings=False)["output"], contract.final_output(want), "final.output")
    for item in final.output:
        if item.id.startswith(contract.COMPANION_PREFIX):
            COMPANION_CLASSES[item.type].model_validate(item.to_dict())


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_create_stream_true(client, scenario):
    model, query = SCENARIOS[scenario]
    stream = client.responses.create(model=model, input="What is known about tool progress?",
                                     stream=True, extra_query={**query, "tool_ms": str(TOOL_MS)})
    with stream:
        events = [event.to_dict() for event in stream]
    want = expected(model, query)
    check_stream(events, want)
    assert events[-1]["type"] == "response.completed"
    Response.model_validate(events[-1]["response"])


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_stream_helper_and_final_response(client, scenario):
    model, query = SCENARIOS[scenario]
    with client.responses.stream(model=model, input="What is known about tool progress?",
                                 extra_query={**query, "tool_ms": str(TOOL_MS)}) as stream:
        events = [event.to_dict(warnings=False) for event in stream]  # see HELPER_DUMP_NOTE
        final = stream.get_final_response()
    want = expected(model, query)
    check_stream(events, want, HELPER_EXTRA_KEYS)
    text = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    # Helper-only extras survive (the accumulated snapshot on text deltas).
    assert [e for e in events if e["type"] == "response.output_text.delta"][-1]["snapshot"] == text

    assert final.id == gateway.RESPONSE_ID
    assert final.status == "completed"
    assert final.output_text == text
    check_final(final, want)
    companions = [item for item in final.output if item.id.startswith(contract.COMPANION_PREFIX)]
    assert companions and all(isinstance(item, tuple(COMPANION_CLASSES.values())) for item in companions)
    if scenario == "agentic":
        # The web search, file search and two MCP calls (one failed), each with its companion.
        assert [(item.type, item.status) for item in final.output if item.type != "function_call_output"] == [
            ("function_call", "completed"), ("web_search_call", "completed"),
            ("function_call", "completed"), ("file_search_call", "completed"),
            ("function_call", "completed"), ("mcp_call", "completed"),
            ("function_call", "completed"), ("mcp_call", "failed"),
            ("message", "completed")]
        assert len(final.output) == 13
        gh = next(item for item in companions if item.id == "tp_call_gh_1")
        assert (gh.server_label, gh.name, json.loads(gh.output)[0]["number"]) == ("gateway", "github_search_issues", 42)
        broken = next(item for item in companions if item.id == "tp_call_gb_1")
        assert broken.error.type == "mcp_tool_execution_error"
        assert broken.error.content == [{"type": "text", "text": gateway.BROKEN_OUTPUT}]  # `content: object`
        web = next(item for item in companions if item.type == "web_search_call")
        assert web.action.query == "tool lifecycle events SSE"


def test_stream_helper_async(proxy_addr):
    import asyncio

    async def run() -> tuple[list[dict], object]:
        async with openai.AsyncOpenAI(base_url=f"http://{proxy_addr}/v1", api_key="sk-e2e-not-a-key",
                                      timeout=REQUEST_TIMEOUT_S, max_retries=0,
                                      default_headers={PROFILES_HEADER: "openai"}) as aclient:
            async with aclient.responses.stream(model=gateway.MODEL, input="hi",
                                                extra_query={"done": "1", "tool_ms": "50"}) as stream:
                collected = [e.to_dict(warnings=False) async for e in stream]
                return collected, await stream.get_final_response()

    events, final = asyncio.run(asyncio.wait_for(run(), REQUEST_TIMEOUT_S))
    want = expected(gateway.MODEL, {})
    check_stream(events, want, HELPER_EXTRA_KEYS)
    assert final.output_text == gateway.FINAL_TEXT
    check_final(final, want)


def test_openai_inline_profile_keeps_the_old_shape(client):
    """`x-toolpulse-profiles: openai-inline`: lifecycle events on the function_call item itself,
    no companion, no index shift (and openai-python's helper, which checks no item types,
    consumes it)."""
    headers = {PROFILES_HEADER: "openai-inline"}
    stream = client.responses.create(model=gateway.MODEL, input="x", stream=True, extra_headers=headers,
                                     extra_query={"tool_ms": str(TOOL_MS)})
    with stream:
        events = [event.to_dict() for event in stream]
    want = expected(gateway.MODEL, {}, profile="openai-inline")
    check_stream(events, want)
    assert not any(e.get("item", {}).get("id", "").startswith(contract.COMPANION_PREFIX) for e in events)
    injected = [e for e in events if e["type"].startswith(INJECTED_PREFIXES)]
    assert injected and all(e["item_id"].startswith("fc_") for e in injected)

    with client.responses.stream(model=gateway.FAILURES_MODEL, input="x", extra_headers=headers,
                                 extra_query={"tool_ms": str(TOOL_MS)}) as helper:
        events = [e.to_dict(warnings=False) for e in helper]
        final = helper.get_final_response()
    check_stream(events, expected(gateway.FAILURES_MODEL, {}, profile="openai-inline"), HELPER_EXTRA_KEYS)
    assert len(final.output) == 8  # the gateway's items only


def _normalized(events: list[dict]) -> list[dict]:
    # created_at comes from the gateway's clock per request.
    for e in events:
        if "response" in e:
            e["response"].pop("created_at", None)
            e["response"].pop("completed_at", None)
    return events


@pytest.mark.parametrize("profile", ["hosted (default)", "openai"])
def test_no_tools_stream_is_untouched(profile, proxy_addr, gateway_addr):
    def collect(c: openai.OpenAI) -> list[dict]:
        with c.responses.stream(model=gateway.PLAIN_MODEL, input="hello") as stream:
            events = [e.to_dict(warnings=False) for e in stream]
            assert stream.get_final_response().output_text == gateway.PLAIN_TEXT
        return events

    with make_client(proxy_addr, None if profile.startswith("hosted") else profile) as client:
        proxied = collect(client)
    with make_client(gateway_addr, profile=None) as direct_client:
        direct = collect(direct_client)
    for e in proxied:
        strict(e)
    assert _normalized(proxied) == _normalized(direct)
    assert not any(e["type"].startswith(INJECTED_PREFIXES) for e in proxied)


def test_non_streaming_request_passes_through(client):
    response = client.responses.create(model=gateway.MODEL, input="no stream please")
    Response.model_validate(response.to_dict())
    assert response.output_text == gateway.FINAL_TEXT
    assert len(response.output) == 9  # not a stream: nothing injected, no companion


def _recorded(gateway_addr: str, tag: str) -> list[dict]:
    """The request bodies the gateway received with this tag (see gateway.py)."""
    host, port = gateway_addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("GET", f"/_requests?tag={tag}")
        resp = conn.getresponse()
        assert resp.status == 200
        return json.loads(resp.read())
    finally:
        conn.close()


def _replay(client, gateway_addr: str, tag: str, items: list, stream_it: bool) -> dict:
    """Sends `items` as the next turn's input (streamed or not) and returns the body the gateway
    got for it."""
    headers = {gateway.TAG_HEADER: tag}
    if stream_it:
        with client.responses.stream(model=gateway.PLAIN_MODEL, input=items, extra_headers=headers) as s:
            assert s.get_final_response().output_text == gateway.PLAIN_TEXT
    else:
        response = client.responses.create(model=gateway.PLAIN_MODEL, input=items, extra_headers=headers)
        assert response.output_text == gateway.PLAIN_TEXT
    recorded = _recorded(gateway_addr, tag)
    assert len(recorded) == 1, recorded
    body = recorded[0]["body"]
    assert body is not None, f"the gateway got a body that is not JSON: {recorded[0]['raw']!r}"
    return body


def test_replay_reaches_the_gateway_without_companions(client, gateway_addr):
    """The next turn built from the first response's output, as clients build it, reaches the
    gateway without toolpulse's own items: inline (each output item as an input item, as
    openai-agents' `to_input_list()` does with `model_dump(exclude_unset=True)`) and as
    `item_reference`s (as the Vercel AI SDK does when `store` is on), streamed or not."""
    with client.responses.stream(model=gateway.MODEL, input="What is known about tool progress?",
                                 extra_query={"tool_ms": "20"}) as stream:
        for _ in stream:
            pass
        first = stream.get_final_response()
    companions = {item.id for item in first.output if item.id.startswith(contract.COMPANION_PREFIX)}
    assert companions == {"tp_call_web_1", "tp_call_file_1", "tp_call_gh_1", "tp_call_gb_1"}

    user = {"type": "message", "role": "user", "content": "And what about retries?"}
    inline = [user, *[item.model_dump(exclude_unset=True, mode="json") for item in first.output], user]
    references = [user, *[{"type": "item_reference", "id": item.id} for item in first.output]]
    for tag, items, stream_it in (("replay-inline", inline, True), ("replay-refs", references, False),
                                  ("replay-inline-nostream", inline, False)):
        assert sum(1 for i in items if i.get("id", "").startswith(contract.COMPANION_PREFIX)) == 4
        body = _replay(client, gateway_addr, tag, items, stream_it)
        # Exactly the client's input, less the companions (order and content kept).
        assert body["input"] == [i for i in items if not i.get("id", "").startswith(contract.COMPANION_PREFIX)]
        assert body["model"] == gateway.PLAIN_MODEL
        assert "tp_" not in json.dumps(body["input"])


def _raw_stream(addr: str, model: str = gateway.MODEL, profile: str = "openai") -> list[tuple[float, str]]:
    """The stream's blocks (events and comments) as read off the socket, each with its arrival time."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", f"/v1/responses?tool_ms={TOOL_MS}",
                     body=json.dumps({"model": model, "input": "x", "stream": True}),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                              PROFILES_HEADER: profile})
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type", "").startswith("text/event-stream")
        blocks, lines = [], []
        while line := resp.readline():
            line = line.decode().rstrip("\n")
            if line:
                lines.append(line)
            elif lines:
                blocks.append((time.monotonic(), "\n".join(lines)))
                lines = []
        assert not lines, "the stream ends inside an event"
        return blocks
    finally:
        conn.close()


def test_wire_framing_and_real_time(proxy_addr, gateway_addr):
    """What the SDK does not show: `event:` lines match the JSON type, heartbeats are comments,
    the events are the contract's (every upstream event in order, only its numbers changed, the
    companions inserted), and each companion and its in_progress reach the client while its tool
    still runs upstream (timed on the socket, where the client does no work that could delay
    the reading)."""
    blocks = _raw_stream(proxy_addr)
    comments = [b for _, b in blocks if all(line.startswith(":") for line in b.split("\n"))]
    assert comments, "no heartbeat while tools ran (heartbeat interval_ms is set below the tool pause)"
    parsed, times = [], []
    for at, block in blocks:
        if block in comments:
            continue
        lines = block.split("\n")
        assert len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "), block
        data = json.loads(lines[1][len("data: "):])
        assert lines[0][len("event: "):] == data["type"]
        parsed.append(data)
        times.append(at)
    check_stream(parsed, expected(gateway.MODEL, {}))

    # Real time: the client has each companion in progress while the tool still runs upstream.
    for cid in ("tp_call_web_1", "tp_call_file_1", "tp_call_gh_1", "tp_call_gb_1"):
        start = next(t for e, t in zip(parsed, times)
                     if e["type"].endswith(".in_progress") and e.get("item_id") == cid)
        end = next(t for e, t in zip(parsed, times)
                   if e["type"].endswith((".completed", ".failed")) and e.get("item_id") == cid)
        assert end - start >= REALTIME_GAP_S, f"{cid}: in_progress came {end - start:.3f}s before the end"

    # The gateway's own stream, read the same way, is the one the contract was derived from.
    upstream = [json.loads(b[len("event: "):].split("\ndata: ", 1)[1]) for _, b in _raw_stream(gateway_addr)]
    assert _normalized(upstream) == _normalized(upstream_events(gateway.MODEL, {}))


# ---------------------------------------------------------------- profile hosted (the default)
# docs/hosted.md: a gateway-run call reaches the client as one native item (`tph_…`) in place of
# its function_call and function_call_output, with OpenAI's own events; on the next turn toolpulse
# puts the gateway's pair back. These tests send no profile header: `hosted` is the default.

HOSTED_TOOL_MS = 40
# Every agentic scenario, with OpenAI's 0-based and antwort's 1-based output_index, with and
# without antwort's trailing `data: [DONE]`.
HOSTED_SCENARIOS = {
    f"{name}{'-1-based' if base else ''}{'-DONE' if done else ''}": (model, {
        **({"base": "1"} if base else {}), **({"done": "1"} if done else {})})
    for name, model in (("agentic", gateway.MODEL), ("parallel", gateway.PARALLEL_MODEL),
                        ("failures", gateway.FAILURES_MODEL))
    for base in (0, 1) for done in (0, 1)
}
# antwort's in-place lifecycle events (gateway.py `?spec023=1`): the gateway's own lifecycle events on its
# function_call items. Under `hosted` they fold into toolpulse's hosted item: the client sees what
# it sees from the plain gateway (the same expected stream: test_hosted_oracle_folds_spec023_events).
HOSTED_SPEC023_SCENARIOS = {
    f"{name}-spec023": (HOSTED_SCENARIOS[name][0], {**HOSTED_SCENARIOS[name][1], "spec023": "1"})
    for name in ("agentic", "parallel", "failures-1-based-DONE")
}
HOSTED_AND_SPEC023 = {**HOSTED_SCENARIOS, **HOSTED_SPEC023_SCENARIOS}
HOSTED_CLASSES = COMPANION_CLASSES
# The gateway-run calls of each scenario, in the order the gateway adds them.
SCENARIO_CALLS = {gateway.MODEL: ["web", "file", "gh", "broken"],
                  gateway.PARALLEL_MODEL: ["gh", "web"],
                  gateway.FAILURES_MODEL: ["web_fail", "file_multi", "broken", "gh_open"]}


def hosted_expected(model: str, query: dict, declared=()) -> tuple[list[dict], contract.HostedIds]:
    ids = contract.HostedIds()
    return contract.expected_stream(upstream_events(model, query), "hosted", declared, ids), ids


def check_hosted_stream(events: list[dict], want: list[dict], base: int, extra_keys: frozenset = frozenset(),
                        client_calls: frozenset = frozenset()) -> None:
    """The contract's stream, event by event (check_stream), and the hosted shape's invariants:
    each gateway-run call is one `tph_` item, added once and done once, with no function_call or
    function_call_output of its own; ids unique; output indices dense from `base`.
    `client_calls`: call_ids that stay the client's function_calls (declared function tools)."""
    check_stream(events, want, extra_keys)
    added = [e["item"] for e in events if e["type"] == "response.output_item.added"]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert len({i["id"] for i in added}) == len(added), f"an item added twice: {[i['id'] for i in added]}"
    assert sorted(i["id"] for i in added) == sorted(i["id"] for i in done), "an item added but not done"
    hosted = [i for i in added if i["id"].startswith(contract.HOSTED_PREFIX)]
    assert hosted and all(i["type"] in HOSTED_CLASSES for i in hosted), hosted
    leaked = [i for i in added if i["type"] in ("function_call", "function_call_output")
              and i["call_id"] not in client_calls]
    assert not leaked, f"a gateway-run call's own item reached the client: {leaked}"
    indices = sorted({e["output_index"] for e in events if "output_index" in e})
    assert indices == list(range(base, base + len(added))), f"indices not dense from {base}: {indices}"
    injected = [e for e in events if e["type"].startswith(INJECTED_PREFIXES)
                or e["type"].startswith("response.mcp_call_arguments.")]
    assert all(e["item_id"].startswith(contract.HOSTED_PREFIX) for e in injected)


def check_hosted_final(final, want: list[dict], extra_keys: frozenset = frozenset()) -> None:
    """The final Response: the contract's listing (hosted items where the function_calls were,
    no function_call_output), each hosted item validating as its native type."""
    as_dict = final.to_dict(warnings=False)  # see HELPER_DUMP_NOTE
    Response.model_validate(as_dict)
    contract.assert_match(as_dict["output"], contract.final_output(want), "final.output", extra_keys)
    for item in final.output:
        if item.id.startswith(contract.HOSTED_PREFIX):
            assert isinstance(item, HOSTED_CLASSES[item.type]), type(item)
            HOSTED_CLASSES[item.type].model_validate(item.to_dict())


def check_scenario_items(final, model: str, ids: contract.HostedIds) -> None:
    """What the scenario's hosted items say, spelled out (beyond the oracle)."""
    by_id = {item.id: item for item in final.output}
    items = [by_id[ids[gateway.CALLS[key][0]]] for key in SCENARIO_CALLS[model]]
    assert [i.id for i in final.output if i.id.startswith(contract.HOSTED_PREFIX)] == [i.id for i in items]
    for key, item in zip(SCENARIO_CALLS[model], items):
        call_id, name, arguments, output = gateway.CALLS[key]
        args = json.loads(arguments)
        if item.type == "mcp_call":
            assert (item.name, item.server_label, item.arguments) == (name, "gateway", arguments)
            if output is not None and not contract.is_failure(output):
                assert (item.status, item.output, item.error) == ("completed", output, None)
            else:
                text = output if output is not None else contract.HOSTED_NO_OUTPUT_TEXT
                assert (item.status, item.output) == ("failed", None)
                assert item.to_dict()["error"] == {"type": "mcp_tool_execution_error",
                                                   "content": [{"type": "text", "text": text}]}
        elif item.type == "web_search_call":
            assert (item.action.type, item.action.query) == ("search", args["query"])
            assert item.status == ("failed" if contract.is_failure(output) else "completed")
        else:
            assert item.type == "file_search_call" and name == "file_search"
            assert item.queries == args.get("queries", [args.get("query")])
            assert (item.status, item.results) == ("completed", None)
    text = {gateway.MODEL: gateway.FINAL_TEXT, gateway.PARALLEL_MODEL: gateway.PARALLEL_TEXT,
            gateway.FAILURES_MODEL: gateway.FAILURES_TEXT}[model]
    assert final.output_text == text
    assert len(final.output) == len(items) + 1  # the hosted items and the message


def test_hosted_oracle_folds_spec023_events():
    """The contract itself (no proxy): a gateway that emits antwort's in-place events on its function_call
    items gives the client exactly the stream the plain gateway gives, numbers dense."""
    for name, (model, query) in HOSTED_SCENARIOS.items():
        plain = upstream_events(model, query)
        spec023 = upstream_events(model, {**query, "spec023": "1"})
        lifecycle = [e for e in spec023 if e["type"].startswith(INJECTED_PREFIXES)]
        # Per call: in_progress, searching for the searches, a terminal event once it has an output.
        assert len(lifecycle) == sum(1 + (name in ("web_search", "file_search")) + (output is not None)
                                     for _, name, _, output in map(gateway.CALLS.get, SCENARIO_CALLS[model])), name
        assert all(e["item_id"].startswith("fc_") for e in lifecycle), name
        assert len(spec023) == len(plain) + len(lifecycle), name
        assert contract.to_plain(contract.expected_stream(spec023, "hosted")) == \
            contract.to_plain(contract.expected_stream(plain, "hosted")), name


@pytest.mark.parametrize("scenario", list(HOSTED_AND_SPEC023))
def test_hosted_create_stream_true(hosted_client, scenario):
    model, query = HOSTED_AND_SPEC023[scenario]
    stream = hosted_client.responses.create(model=model, input="What is known about tool progress?", stream=True,
                                            extra_query={**query, "tool_ms": str(HOSTED_TOOL_MS)})
    with stream:
        events = [event.to_dict() for event in stream]
    want, ids = hosted_expected(model, query)
    check_hosted_stream(events, want, int(query.get("base", "0")))
    assert events[-1]["type"] == "response.completed"
    final = Response.model_validate(events[-1]["response"])
    check_scenario_items(final, model, ids)


@pytest.mark.parametrize("scenario", list(HOSTED_AND_SPEC023))
def test_hosted_stream_helper_and_final_response(hosted_client, scenario):
    model, query = HOSTED_AND_SPEC023[scenario]
    with hosted_client.responses.stream(model=model, input="What is known about tool progress?",
                                        extra_query={**query, "tool_ms": str(HOSTED_TOOL_MS)}) as stream:
        events = [event.to_dict(warnings=False) for event in stream]  # see HELPER_DUMP_NOTE
        final = stream.get_final_response()
    want, ids = hosted_expected(model, query)
    check_hosted_stream(events, want, int(query.get("base", "0")), HELPER_EXTRA_KEYS)
    assert (final.id, final.status) == (gateway.RESPONSE_ID, "completed")
    check_hosted_final(final, want)
    check_scenario_items(final, model, ids)


@pytest.mark.parametrize("scenario", list(HOSTED_SCENARIOS))
def test_hosted_stream_helper_async(proxy_addr, scenario):
    import asyncio

    model, query = HOSTED_SCENARIOS[scenario]

    async def run() -> tuple[list[dict], object]:
        async with openai.AsyncOpenAI(base_url=f"http://{proxy_addr}/v1", api_key="sk-e2e-not-a-key",
                                      timeout=REQUEST_TIMEOUT_S, max_retries=0) as aclient:
            async with aclient.responses.stream(model=model, input="hi",
                                                extra_query={**query, "tool_ms": str(HOSTED_TOOL_MS)}) as stream:
                collected = [e.to_dict(warnings=False) async for e in stream]
                return collected, await stream.get_final_response()

    events, final = asyncio.run(asyncio.wait_for(run(), REQUEST_TIMEOUT_S))
    want, ids = hosted_expected(model, query)
    check_hosted_stream(events, want, int(query.get("base", "0")), HELPER_EXTRA_KEYS)
    check_hosted_final(final, want)
    check_scenario_items(final, model, ids)


WEB_SEARCH_FUNCTION = {"type": "function", "name": "web_search", "description": "my own web search",
                       "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                      "required": ["query"], "additionalProperties": False},
                       "strict": True}


@pytest.mark.parametrize("helper", [False, True], ids=["create", "stream-helper"])
def test_hosted_a_declared_function_tool_stays_the_clients(hosted_client, helper):
    """A request that declares `web_search` as its own function tool gets the gateway's
    web_search function_call (and its output) untouched; the undeclared gateway-run calls of the
    same stream are still hosted."""
    kwargs = dict(model=gateway.MODEL, input="x", tools=[WEB_SEARCH_FUNCTION],
                  extra_query={"tool_ms": str(HOSTED_TOOL_MS)})
    if helper:
        with hosted_client.responses.stream(**kwargs) as stream:
            events = [e.to_dict(warnings=False) for e in stream]
            final = stream.get_final_response()
    else:
        with hosted_client.responses.create(stream=True, **kwargs) as stream:
            events = [e.to_dict() for e in stream]
        final = Response.model_validate(events[-1]["response"])
    want, ids = hosted_expected(gateway.MODEL, {}, declared={"web_search"})
    web_id = gateway.CALLS["web"][0]
    # The helper parses a declared function tool's arguments (`parsed_arguments`).
    extra = HELPER_EXTRA_KEYS | {"parsed_arguments"} if helper else frozenset()
    check_hosted_stream(events, want, 0, extra, frozenset({web_id}))
    assert not any(e["type"].startswith("response.web_search_call.") for e in events)
    assert not any(e.get("item", {}).get("type") == "web_search_call" for e in events)
    assert [(i.type, getattr(i, "call_id", None) or getattr(i, "name", None)) for i in final.output] == [
        ("function_call", web_id), ("function_call_output", web_id), ("file_search_call", None),
        ("mcp_call", "github_search_issues"), ("mcp_call", "github_broken"), ("message", None)]
    fc = final.output[0]
    assert (fc.id, fc.name, fc.arguments, fc.status) == ("fc_web_1", "web_search", gateway.CALLS["web"][2], "completed")
    check_hosted_final(final, want, extra)
    assert {ids[gateway.CALLS[k][0]] for k in ("file", "gh", "broken")} == {
        i.id for i in final.output if i.id.startswith(contract.HOSTED_PREFIX)}


def test_hosted_non_streaming_response(hosted_client, gateway_addr):
    """A JSON response (no `stream`) gets the same presentation in its `output`, and its pairs
    are kept for the next turn the same way."""
    response = hosted_client.responses.create(model=gateway.MODEL, input="no stream please")
    Response.model_validate(response.to_dict())
    want, ids = hosted_expected(gateway.MODEL, {})
    contract.assert_match(response.to_dict()["output"], contract.final_output(want), "output")
    check_scenario_items(response, gateway.MODEL, ids)

    items = [{"type": "item_reference", "id": item.id} for item in response.output]
    again = hosted_client.responses.create(model=gateway.PLAIN_MODEL, input=items,
                                           extra_headers={gateway.TAG_HEADER: "hosted-json-replay"})
    assert again.output_text == gateway.PLAIN_TEXT
    [recorded] = _recorded(gateway_addr, "hosted-json-replay")
    check_next_turn(recorded["body"], items, ids, 4)


def gateway_pair(call_id: str) -> list[dict]:
    """The gateway's own function_call and function_call_output of `call_id`, as the next turn
    must give them back to the gateway: call id, name, arguments and output exactly as
    gateway.py's CALLS; `id` and `status`, if sent, as the gateway streamed them."""
    key = next(k for k, c in gateway.CALLS.items() if c[0] == call_id)
    _, name, arguments, output = gateway.CALLS[key]
    suffix = call_id.removeprefix("call_")
    return [{"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
             "id": contract.MaybeAbsent(f"fc_{suffix}"), "status": contract.MaybeAbsent("completed")},
            {"type": "function_call_output", "call_id": call_id, "output": output,
             "id": contract.MaybeAbsent(f"fco_{suffix}"), "status": contract.MaybeAbsent("completed")}]


def expected_next_turn(sent: list[dict], ids: contract.HostedIds) -> list[object]:
    """What the gateway must get for a client's `input`: every hosted item toolpulse made, and
    every item_reference to one, replaced by the gateway's pair; everything else as sent."""
    out: list[object] = []
    for item in sent:
        call_id = ids.call_of.get(item.get("id")) if isinstance(item, dict) else None
        if call_id is not None and item.get("type") in ("item_reference", *HOSTED_CLASSES):
            out += gateway_pair(call_id)
        else:
            out.append(item)
    return out


def check_next_turn(body: dict, sent: list[dict], ids: contract.HostedIds, n_calls: int) -> None:
    contract.assert_match(body["input"], expected_next_turn(sent, ids), "gateway input")
    assert len(body["input"]) == len(sent) + n_calls  # each hosted item became two
    text = json.dumps(body["input"])
    assert contract.HOSTED_PREFIX not in text and '"tp_' not in text, text
    assert not any(i.get("type") in HOSTED_CLASSES for i in body["input"])


def test_hosted_next_turn_gives_the_gateway_its_own_pairs(hosted_client, gateway_addr):
    """The next turn built from the first response's output, inline (as openai-agents'
    `to_input_list()` does) and as `item_reference`s (as the Vercel AI SDK does with store on),
    streamed or not: the gateway gets its own function_call + function_call_output per call,
    in place, and nothing toolpulse made."""
    with hosted_client.responses.stream(model=gateway.MODEL, input="What is known about tool progress?",
                                        extra_query={"tool_ms": "20"}) as stream:
        events = [e.to_dict(warnings=False) for e in stream]
        first = stream.get_final_response()
    want, ids = hosted_expected(gateway.MODEL, {})
    check_hosted_stream(events, want, 0, HELPER_EXTRA_KEYS)
    assert len(ids.by_call) == 4

    user = {"type": "message", "role": "user", "content": "And what about retries?"}
    inline = [user, *[item.model_dump(exclude_unset=True, mode="json") for item in first.output], user]
    references = [user, *[{"type": "item_reference", "id": item.id} for item in first.output]]
    for tag, items, stream_it in (("hosted-replay-inline", inline, True), ("hosted-replay-refs", references, False),
                                  ("hosted-replay-inline-nostream", inline, False),
                                  ("hosted-replay-refs-stream", references, True)):
        assert sum(1 for i in items if i.get("id", "").startswith(contract.HOSTED_PREFIX)) == 4
        body = _replay(hosted_client, gateway_addr, tag, items, stream_it)
        assert body["model"] == gateway.PLAIN_MODEL
        check_next_turn(body, items, ids, 4)
