"""Python's official MCP SDK (`mcp`) through toolpulse's MCP front.

The server is the SDK's `MCPServer` (mcp 2's name for FastMCP) over Streamable HTTP
(mcp_server.py): its tool `crunch` calls `ctx.report_progress(k, n, message)` for each step.
The SDK's client (`streamable_http_client` + `ClientSession`) plays the gateway's MCP client and
calls the tool through the real toolpulse binary's MCP front (`[[mcp.servers]]` pointing at the
server), in both protocol eras the SDK speaks: the `initialize` handshake (2025-11-25, a session)
and `server/discover` (2026-07-28, stateless requests with their own envelope).

- Without a progress callback (no token of the client's), toolpulse adds its own token: the
  server reports progress, toolpulse consumes it, and the client gets the very result it gets
  from the server directly and no `notifications/progress` at all (checked on the wire).
- With the client's own callback (its own token), the client gets every report and the same
  result.
- The whole chain: the scripted gateway (gateway.py, scenario "toolpulse-held") streams a
  `demo_crunch` function_call through toolpulse's proxy and holds its output while the test,
  as the gateway would, runs the tool through the MCP front; the client stream (profile `tool`)
  shows the tool's reports as `tool_progress` between `tool_start` and `tool_end`, matched by
  the trace id (as `params._meta.traceparent` or as the HTTP header) or by name and arguments.

Environment: TOOLPULSE_BIN (default target/debug/toolpulse, relative to the repo root).
"""

from __future__ import annotations

import http.client
import json
import queue
import re
import sys
import threading
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gateway  # noqa: E402  (the gateway's script is the test's source of truth)
import mcp_server  # noqa: E402  (the tool's messages and result text)
from test_python_sdk import REQUEST_TIMEOUT_S, Proc, toolpulse_bin  # noqa: E402

SERVER_NAME = "steps"
CALL_NAME = "demo_{tool}"  # the gateway's name of the server's tool `crunch`: demo_crunch
STEP_MS = 150
# Well under STEP_MS, so that no report of a call is coalesced away by toolpulse's rate limit.
MIN_INTERVAL_MS = 20
ERAS = ["handshake", "modern"]
LABEL, STEPS = "the numbers", 3
HELD_CALL_ID, HELD_NAME, HELD_ARGUMENTS, _ = gateway.CALLS["held"]
PROGRESS_METHOD = b"notifications/progress"


def expected_reports(label: str = LABEL, steps: int = STEPS) -> list[tuple[float, float, str]]:
    return [(float(k), float(steps), mcp_server.message(k, steps, label)) for k in range(1, steps + 1)]


# ---------------------------------------------------------------- processes


@pytest.fixture(scope="module")
def server_url(request) -> str:
    argv = [sys.executable, "-u", str(HERE / "mcp_server.py"), "--port", "0", "--step-ms", str(STEP_MS)]
    proc = Proc("mcp server", argv, "stdout")
    request.addfinalizer(proc.stop)
    return proc.wait_for(r"listening on (http://\S+)")


@pytest.fixture(scope="module")
def gateway_addr(request) -> str:
    proc = Proc("gateway", [sys.executable, "-u", str(HERE / "gateway.py"), "--port", "0"], "stdout")
    request.addfinalizer(proc.stop)
    return proc.wait_for(r"listening on http://(\S+)")


@pytest.fixture(scope="module")
def toolpulse(request, server_url, gateway_addr, tmp_path_factory) -> dict[str, str]:
    """The real binary: its proxy before the gateway, its MCP front before the MCP server."""
    config = tmp_path_factory.mktemp("toolpulse-mcp") / "toolpulse.toml"
    config.write_text(f"""
[[tools]]
match = ["demo_*"]
kind = "mcp"

[mcp]
listen = "127.0.0.1:0"

[[mcp.servers]]
name = "{SERVER_NAME}"
upstream = "{server_url}"
call_name = "{CALL_NAME}"

[progress]
min_interval_ms = {MIN_INTERVAL_MS}
""")
    argv = [str(toolpulse_bin()), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
            "--upstream", f"http://{gateway_addr}", "--config", str(config)]
    proc = Proc("toolpulse", argv, "stderr")
    request.addfinalizer(proc.stop)
    line = proc.wait_for(r"(toolpulse listening.*)")
    addrs = dict(re.findall(r'\b(listen|admin|mcp)="?([0-9.]+:[0-9]+)', line))
    assert set(addrs) == {"listen", "admin", "mcp"}, line
    assert all(a.startswith("127.0.0.1:") for a in addrs.values()), line
    return addrs


@pytest.fixture(scope="module")
def front_url(toolpulse) -> str:
    return f"http://{toolpulse['mcp']}/{SERVER_NAME}"


def server_calls(server_url: str) -> list[dict]:
    """The calls the MCP server saw (see mcp_server.py)."""
    return json.loads(_http("GET", server_url.removesuffix("/mcp") + "/_calls")[1])


def _http(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    m = re.fullmatch(r"http://([^/:]+):(\d+)(/.*)", url)
    assert m, url
    conn = http.client.HTTPConnection(m[1], int(m[2]), timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request(method, m[3], body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# ---------------------------------------------------------------- the MCP client


class WireRecorder(httpx2.AsyncBaseTransport):
    """An httpx2 transport that keeps every response body byte the client reads."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.received = bytearray()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        stream, recorder = response.stream, self

        class Recorded(httpx2.AsyncByteStream):
            async def __aiter__(self):
                async for chunk in stream:
                    recorder.received.extend(chunk)
                    yield chunk

            async def aclose(self) -> None:
                await stream.aclose()

        response.stream = Recorded()
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class Outcome:
    def __init__(self) -> None:
        self.result: dict | None = None
        self.protocol_version: str | None = None
        self.reports: list[tuple[float, float | None, str | None]] = []
        self.notifications: list[str] = []  # methods of every notification the session got
        self.wire = b""


async def _call(url: str, era: str, *, arguments: dict, with_callback: bool, meta: dict | None = None,
                headers: dict | None = None) -> Outcome:
    out = Outcome()
    recorder = WireRecorder()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        out.reports.append((progress, total, message))

    async def on_message(message) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method is not None:
            out.notifications.append(method)

    timeout = httpx2.Timeout(REQUEST_TIMEOUT_S)
    async with httpx2.AsyncClient(transport=recorder, headers=headers or {}, timeout=timeout) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, message_handler=on_message) as session:
                if era == "modern":
                    await session.discover()
                else:
                    await session.initialize()
                result = await session.call_tool(
                    mcp_server.TOOL, arguments, progress_callback=on_progress if with_callback else None,
                    meta=meta)
                out.protocol_version = session.protocol_version
        out.result = result.model_dump(mode="json", by_alias=True)
    out.wire = bytes(recorder.received)
    return out


def call(url: str, era: str, **kwargs) -> Outcome:
    return anyio.run(lambda: _call(url, era, **kwargs))


ERA_VERSION = {"handshake": "2025-11-25", "modern": "2026-07-28"}


# ---------------------------------------------------------------- (a) and (b)


@pytest.mark.parametrize("era", ERAS)
def test_without_a_client_token_the_result_is_the_servers_and_no_progress_reaches_the_client(
        era, server_url, front_url):
    arguments = {"label": f"quiet {era}", "steps": STEPS}
    direct = call(server_url, era, arguments=arguments, with_callback=False)
    through = call(front_url, era, arguments=arguments, with_callback=False)
    assert direct.protocol_version == through.protocol_version == ERA_VERSION[era]
    assert through.result == direct.result
    assert through.result["content"] == [{"type": "text", "text": mcp_server.result_text(f"quiet {era}", STEPS),
                                          "annotations": None, "_meta": None}]
    # The server did report progress, under toolpulse's own token, and toolpulse kept it.
    seen = [c for c in server_calls(server_url) if c["arguments"] == arguments]
    assert [c["progress_token"] for c in seen[:1]] == [None], "the direct call carries no token"
    assert len(seen) == 2 and re.fullmatch(r"tp-[0-9a-f]{32}", str(seen[1]["progress_token"])), seen
    assert PROGRESS_METHOD not in through.wire, through.wire.decode(errors="replace")
    assert "notifications/progress" not in through.notifications
    assert through.reports == []


@pytest.mark.parametrize("era", ERAS)
def test_with_the_clients_own_token_every_report_reaches_it(era, server_url, front_url):
    arguments = {"label": f"loud {era}", "steps": STEPS}
    direct = call(server_url, era, arguments=arguments, with_callback=True)
    through = call(front_url, era, arguments=arguments, with_callback=True)
    assert direct.reports == expected_reports(f"loud {era}")
    assert through.reports == direct.reports
    assert through.result == direct.result
    assert through.wire.count(PROGRESS_METHOD) == STEPS
    seen = [c for c in server_calls(server_url) if c["arguments"] == arguments]
    assert len(seen) == 2 and not str(seen[1]["progress_token"]).startswith("tp-"), seen


# ---------------------------------------------------------------- (c) the whole chain


class ClientStream:
    """A client's streamed turn through toolpulse's proxy, read off the socket in a thread."""

    def __init__(self, proxy: str, tag: str) -> None:
        self.events: queue.Queue[dict | None] = queue.Queue()
        self.seen: list[dict] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, args=(proxy, tag), daemon=True)
        self._thread.start()

    def _read(self, proxy: str, tag: str) -> None:
        host, port = proxy.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=REQUEST_TIMEOUT_S)
        try:
            conn.request("POST", "/v1/responses",
                         body=json.dumps({"model": gateway.HELD_MODEL, "input": "crunch", "stream": True}),
                         headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                  "x-toolpulse-profiles": "tool", gateway.TAG_HEADER: tag})
            resp = conn.getresponse()
            assert resp.status == 200, resp.read()
            data = []
            while line := resp.readline():
                line = line.decode().rstrip("\n")
                if line.startswith("data: "):
                    data.append(line[len("data: "):])
                elif not line and data:
                    self.events.put(json.loads("\n".join(data)))
                    data = []
        except BaseException as e:  # noqa: BLE001 (reported by the test thread)
            self.error = e
        finally:
            conn.close()
            self.events.put(None)

    def until(self, predicate) -> dict:
        while True:
            event = self.events.get(timeout=REQUEST_TIMEOUT_S)
            if event is None:
                raise AssertionError(f"the stream ended first ({self.error!r}); saw {self.seen}")
            self.seen.append(event)
            if predicate(event):
                return event

    def rest(self) -> list[dict]:
        while (event := self.events.get(timeout=REQUEST_TIMEOUT_S)) is not None:
            self.seen.append(event)
        assert self.error is None, self.error
        return self.seen


@pytest.mark.parametrize("correlation", ["meta-traceparent", "header-traceparent", "name-and-arguments"])
def test_the_tools_progress_reaches_the_client_stream(correlation, toolpulse, gateway_addr, server_url,
                                                       front_url):
    tag = f"chain-{correlation}"
    stream = ClientStream(toolpulse["listen"], tag)
    start = stream.until(lambda e: e.get("type") == "tool_start")
    assert (start["tool_call_id"], start["tool_name"]) == (HELD_CALL_ID, HELD_NAME)

    # The gateway (played here) runs the call as an MCP tools/call through the front.
    status, body = _http("GET", f"http://{gateway_addr}/_requests?tag={tag}")
    assert status == 200
    [recorded] = json.loads(body)
    traceparent = recorded["traceparent"]
    assert re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", traceparent or ""), recorded
    arguments = json.loads(HELD_ARGUMENTS)
    meta = headers = None
    if correlation == "meta-traceparent":
        meta = {"traceparent": traceparent}
    elif correlation == "header-traceparent":
        headers = {"traceparent": traceparent}
    else:
        arguments = dict(reversed(list(arguments.items())))  # JSON-equal, another key order
    outcome = call(front_url, "handshake", arguments=arguments, with_callback=False, meta=meta, headers=headers)
    assert PROGRESS_METHOD not in outcome.wire and outcome.reports == []
    [text] = [c["text"] for c in outcome.result["content"]]
    assert text == mcp_server.result_text(LABEL, STEPS)

    # The gateway puts the tool's result into the stream, which then ends.
    status, _ = _http("POST", f"http://{gateway_addr}/_outputs/{HELD_CALL_ID}", text.encode(),
                      {"Content-Type": "text/plain"})
    assert status == 200
    events = stream.rest()

    types = [e.get("type") for e in events]
    assert types.count("tool_start") == 1 and types.count("tool_end") == 1, types
    first, last = types.index("tool_start"), types.index("tool_end")
    progress = [e for e in events if e.get("type") == "tool_progress"]
    assert [(e["progress"], e["total"], e["message"]) for e in progress] == expected_reports(), progress
    assert all(first < events.index(e) < last for e in progress), types
    for e in progress:
        assert (e["tool_call_id"], e["tool_name"]) == (HELD_CALL_ID, HELD_NAME), e
    assert events[last]["status"] == "success" and text in json.dumps(events[last]["result"]), events[last]
    # The model's side saw none of it: the gateway got one request, the client's.
    status, body = _http("GET", f"http://{gateway_addr}/_requests?tag={tag}")
    assert len(json.loads(body)) == 1
