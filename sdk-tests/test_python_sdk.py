"""openai-python end to end through toolpulse.

A scripted gateway (gateway.py) streams an agentic Responses turn with web_search, file_search
and MCP calls as `function_call` items; the real toolpulse binary sits in front of it and the
official SDK talks to toolpulse. The SDK builds events without validating them, so every event
it yields is validated strictly here against `ResponseStreamEvent`.

The expected stream is derived independently from the gateway's own script: the upstream
events in order, with the injected events inserted where the product brief puts them
(in_progress [+ searching] right after a classified call's `output_item.done`, the terminal
event right before its `function_call_output` item).

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
from openai.types.responses import Response, ResponseStreamEvent

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
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

[heartbeat]
interval_ms = {HEARTBEAT_MS}
"""

KIND_OF = {"web_search": "web_search", "file_search": "file_search",
           "github_search_issues": "mcp", "github_broken": "mcp"}
STARTED = {"web_search": ["response.web_search_call.in_progress", "response.web_search_call.searching"],
           "file_search": ["response.file_search_call.in_progress", "response.file_search_call.searching"],
           "mcp": ["response.mcp_call.in_progress"]}
INJECTED_PREFIXES = ("response.web_search_call.", "response.file_search_call.", "response.mcp_call.")

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


def make_client(addr: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{addr}/v1", api_key="sk-e2e-not-a-key",
                         timeout=REQUEST_TIMEOUT_S, max_retries=0)


@pytest.fixture()
def client(proxy_addr):
    with make_client(proxy_addr) as c:
        yield c


# ---------------------------------------------------------------- expectations


def expected_types(script: gateway.Script) -> list[str]:
    """The upstream event types with the injected ones where the brief puts them."""
    by_call_id = {}  # call_id -> tool name, for classified calls
    out: list[str] = []
    for _, event in script.steps:
        item = event.get("item") or {}
        if event["type"] == "response.output_item.added" and item.get("type") == "function_call_output":
            name = by_call_id.pop(item["call_id"])
            kind = KIND_OF[name]
            failed = item["output"].startswith("no executor found for tool ")
            if kind == "mcp":
                out.append("response.mcp_call.failed" if failed else "response.mcp_call.completed")
            else:
                out.append(f"response.{kind}_call.completed")
        out.append(event["type"])
        if event["type"] == "response.output_item.done" and item.get("type") == "function_call":
            by_call_id[item["call_id"]] = item["name"]
            out.extend(STARTED[KIND_OF[item["name"]]])
    assert not by_call_id, "the script leaves calls open"
    return out


def strict(event_dict: dict) -> object:
    """Strict validation: the SDK itself builds events with `construct` (no validation)."""
    try:
        return EVENT_ADAPTER.validate_python(event_dict)
    except pydantic.ValidationError as err:
        cls = EVENT_CLASSES.get(event_dict.get("type"))
        why = err if cls is None else _member_error(cls, event_dict)
        raise AssertionError(f"event rejected by ResponseStreamEvent ({getattr(cls, '__name__', '?')}): "
                             f"{why}\n{json.dumps(event_dict, default=str)[:2000]}") from None


def _member_error(cls: type, event_dict: dict) -> object:
    try:
        cls.model_validate(event_dict)
    except pydantic.ValidationError as err:
        return err
    return "accepted by its own class but not by the union"


def check_agentic(events: list[dict], times: list[float] | None = None) -> None:
    """Everything an SDK consumer should see in the agentic stream through toolpulse."""
    script = gateway.agentic_script(TOOL_MS / 1000)
    types = [e["type"] for e in events]
    assert types == expected_types(script)
    assert [e["sequence_number"] for e in events] == list(range(len(events))), "not dense"

    calls = {}  # item_id -> (output_index, name), from the function_call items
    for e in events:
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call":
            calls[e["item"]["id"]] = (e["output_index"], e["item"]["name"])
    for i, e in enumerate(events):
        if not e["type"].startswith(INJECTED_PREFIXES):
            continue
        assert "error" not in e
        assert e["item_id"] in calls, f"injected event for an unknown item: {e}"
        output_index, name = calls[e["item_id"]]
        assert e["output_index"] == output_index
        assert e.get("name") == name
        kind = KIND_OF[name]
        assert e["type"].startswith(f"response.{kind}_call."), e
        terminal = e["type"].endswith((".completed", ".failed"))
        if terminal:
            failed = name == "github_broken"
            assert e["outcome"] == ("failed" if failed else "completed"), e
            assert e["type"] == ("response.mcp_call.failed" if failed else f"response.{kind}_call.completed")
            assert isinstance(e["duration_ms"], int) and e["duration_ms"] >= 0, e
            nxt = events[i + 1]
            assert nxt["type"] == "response.output_item.added"
            assert nxt["item"]["type"] == "function_call_output"
            assert "fco_" + e["item_id"].removeprefix("fc_") == nxt["item"]["id"]
        else:
            assert "outcome" not in e and "duration_ms" not in e

    # Each injected in_progress is closed exactly once (the order is checked above).
    opened = [e["item_id"] for e in events if e["type"].endswith(".in_progress")
              and e["type"].startswith(INJECTED_PREFIXES)]
    closed = [e["item_id"] for e in events if e["type"].startswith(INJECTED_PREFIXES)
              and e["type"].endswith((".completed", ".failed"))]
    assert sorted(opened) == sorted(closed) == sorted(calls)

    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == gateway.FINAL_TEXT
    done = [e for e in events if e["type"] == "response.output_text.done"]
    assert [d["text"] for d in done] == [gateway.FINAL_TEXT]
    final = events[-1]
    assert final["type"] == "response.completed"
    assert final["response"]["status"] == "completed"
    assert len(final["response"]["output"]) == 9

    if times is not None:
        # Real time: the client has each in_progress while the tool still runs upstream.
        for item_id in calls:
            start = next(t for e, t in zip(events, times)
                         if e["type"].endswith(".in_progress") and e.get("item_id") == item_id)
            end = next(t for e, t in zip(events, times)
                       if e["type"].endswith((".completed", ".failed")) and e.get("item_id") == item_id)
            assert end - start >= REALTIME_GAP_S, f"{item_id}: in_progress came {end - start:.3f}s before the end"


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("done", ["0", "1"], ids=["openai-style", "antwort-style-DONE"])
def test_create_stream_true(client, done):
    stream = client.responses.create(model=gateway.MODEL, input="What is known about tool progress?",
                                     stream=True, extra_query={"done": done, "tool_ms": str(TOOL_MS)})
    events = []
    with stream:
        for event in stream:
            data = event.to_dict()
            strict(data)
            events.append(data)
    check_agentic(events)
    # The final Response validates strictly too.
    Response.model_validate(events[-1]["response"])


def test_stream_helper_and_final_response(client):
    events = []
    with client.responses.stream(model=gateway.MODEL, input="What is known about tool progress?",
                                 extra_query={"tool_ms": str(TOOL_MS)}) as stream:
        for event in stream:
            data = event.to_dict(warnings=False)  # see HELPER_DUMP_NOTE
            strict(data)
            events.append(data)
        final = stream.get_final_response()
    check_agentic(events)
    # Helper-only extras survive (the accumulated snapshot on text deltas).
    assert [e for e in events if e["type"] == "response.output_text.delta"][-1]["snapshot"] == gateway.FINAL_TEXT

    assert final.id == gateway.RESPONSE_ID
    assert final.status == "completed"
    assert final.output_text == gateway.FINAL_TEXT
    assert [item.type for item in final.output] == (
        ["function_call", "function_call_output"] * 2 + ["function_call"] * 2
        + ["function_call_output"] * 2 + ["message"])
    Response.model_validate(final.to_dict())


def test_stream_helper_async(proxy_addr):
    import asyncio

    async def run() -> tuple[list[dict], object]:
        async with openai.AsyncOpenAI(base_url=f"http://{proxy_addr}/v1", api_key="sk-e2e-not-a-key",
                                      timeout=REQUEST_TIMEOUT_S, max_retries=0) as aclient:
            async with aclient.responses.stream(model=gateway.MODEL, input="hi",
                                                extra_query={"done": "1", "tool_ms": "50"}) as stream:
                collected = [e.to_dict(warnings=False) async for e in stream]
                return collected, await stream.get_final_response()

    events, final = asyncio.run(asyncio.wait_for(run(), REQUEST_TIMEOUT_S))
    for e in events:
        strict(e)
    check_agentic(events)
    assert final.output_text == gateway.FINAL_TEXT


def _normalized(events: list[dict]) -> list[dict]:
    # created_at comes from the gateway's clock per request.
    for e in events:
        if "response" in e:
            e["response"].pop("created_at", None)
            e["response"].pop("completed_at", None)
    return events


def test_no_tools_stream_is_untouched(client, gateway_addr):
    def collect(c: openai.OpenAI) -> list[dict]:
        with c.responses.stream(model=gateway.PLAIN_MODEL, input="hello") as stream:
            events = [e.to_dict(warnings=False) for e in stream]
            assert stream.get_final_response().output_text == gateway.PLAIN_TEXT
        return events

    proxied = collect(client)
    with make_client(gateway_addr) as direct_client:
        direct = collect(direct_client)
    for e in proxied:
        strict(e)
    assert _normalized(proxied) == _normalized(direct)
    assert not any(e["type"].startswith(INJECTED_PREFIXES) for e in proxied)


def test_non_streaming_request_passes_through(client):
    response = client.responses.create(model=gateway.MODEL, input="no stream please")
    Response.model_validate(response.to_dict())
    assert response.output_text == gateway.FINAL_TEXT
    assert len(response.output) == 9


def _raw_stream(addr: str) -> list[tuple[float, str]]:
    """The stream's blocks (events and comments) as read off the socket, each with its arrival time."""
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", f"/v1/responses?tool_ms={TOOL_MS}",
                     body=json.dumps({"model": gateway.MODEL, "input": "x", "stream": True}),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
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
    every upstream event is there, in order, with only its number changed, and each injected
    in_progress reaches the client while its tool still runs upstream (timed on the socket,
    where the client does no work that could delay the reading)."""
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
    for data in parsed:
        strict(data)
    check_agentic(parsed, times)

    upstream = [json.loads(b[len("event: "):].split("\ndata: ", 1)[1]) for _, b in _raw_stream(gateway_addr)]
    forwarded = [e for e in parsed if not e["type"].startswith(INJECTED_PREFIXES)]

    def unnumbered(events: list[dict]) -> list[dict]:
        return _normalized([{k: v for k, v in e.items() if k != "sequence_number"} for e in events])

    assert unnumbered(forwarded) == unnumbered(upstream)
