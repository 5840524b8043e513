#!/usr/bin/env python3
"""A scripted upstream gateway for toolpulse's SDK end-to-end tests (stdlib only).

It answers `POST /v1/responses` the way an agent gateway such as antwort does: the model
calls tools (`function_call` items), the gateway runs each one (a pause), appends its result
(`function_call_output` item) and streams the final message. By default `output_index` is
0-based and dense, as OpenAI's; `?base=1` starts it at 1, as antwort does.

Every event is an `event: <type>` line plus one `data:` line, numbered 0, 1, 2, … and
written as its own HTTP/1.1 chunk, flushed at once (real streaming, so a proxy has to
forward it in real time for a client to see it in real time).

The request's `model` picks the scenario:
  anything else          the agentic stream: web_search, file_search, two parallel MCP calls
                         (github_search_issues, and github_broken whose output is
                         "no executor found for tool github_broken"), then a message
  "toolpulse-plain"      a message only, no tool at all
  "toolpulse-parallel"   two calls of one turn interleaved: both function_call items are added
                         before either is done (github_search_issues at 0, web_search at 1),
                         the outputs come back in the other order, then a message
  "toolpulse-failures"   a web_search whose output is "search failed: …", a file_search with a
                         `queries` list, github_broken, and a github_search_issues call that
                         never gets an output before the message and `response.completed`
  "toolpulse-frontend"   a client's tool over two turns: a web_search the gateway runs, then a
                         call of confirm_action (a tool the request declares) with no output,
                         and `response.completed`; when the request's input has the output of
                         that call (the next turn), a message quoting it instead
  "toolpulse-cut"        a web_search call, then the stream breaks: the connection closes in
                         the middle of an event, without the chunked body's end
  "toolpulse-error"      no stream: HTTP 503 with an OpenAI-style error body (ERROR_MESSAGE)
  "toolpulse-held"       one call of demo_crunch (an MCP server's tool, run by the test), whose
                         output the gateway holds until the test posts it (below), then a message
A request with `"stream": false` (or none) gets the final Response object as JSON.
The query parameter `?done=1` appends `data: [DONE]` after the terminal event (antwort does,
OpenAI does not), `?base=1` makes `output_index` 1-based (antwort's), `?spec023=1` adds the
gateway's own tool lifecycle events (antwort's in-place lifecycle events, below), `?tool_ms=N` sets the tool
pause (default 250 ms) and `?hold=CALL_ID,…` makes the pause before those calls' outputs last
until the test releases it (`POST /_outputs/<call_id>`, as for a held output; an empty body
keeps the scripted output).

`?spec023=1`: every call the gateway runs (all of them: those whose output it streams, the one
that never gets an output, the held one) gets the gateway's own lifecycle events ON ITS
`function_call` ITEM (`item_id` the function_call's id, `output_index` its index; fields
`type`, `item_id`, `output_index`, `name` (the tool's), `sequence_number`, no
item), by tool: web_search →
`response.web_search_call.*`, file_search → `response.file_search_call.*`, anything else
(github_*, demo_crunch) → `response.mcp_call.*`. Right after the call's function_call
`output_item.done` (for parallel calls, after that call's own done): `.in_progress`, plus
`.searching` for the searches. Right before its function_call_output's `output_item.added`
(after the tool pause; for a held output, once it is released): `.completed`, or
`response.mcp_call.failed` for an MCP tool whose output is a failure (FAILED_OUTPUTS:
github_broken's); antwort's in-place events have no failed event for the searches, so they end `.completed`
whatever the output, and a held output is not known in advance: `.completed`. A call that never
gets an output gets its `.in_progress` only. Without the parameter the stream is byte for byte
what it was before the parameter existed.

Every `POST` is recorded (path, query, body, the `x-e2e-tag` and `traceparent` headers);
`GET /_requests` answers them as a JSON list, `GET /_requests?tag=T` only those whose `x-e2e-tag`
header was T. So a test can see what a proxy in front of the gateway forwarded.

A held output (scenario "toolpulse-held") is released by `POST /_outputs/<call_id>` with the
output text as the body: the stream waits for it (up to HELD_TIMEOUT_S, then the output is
HELD_TIMEOUT_OUTPUT). So a test can run the tool itself, the way the gateway would, while the
stream shows the call running.

Usage: gateway.py [--port 0]   prints `gateway listening on http://127.0.0.1:PORT` on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

RESPONSE_ID = "resp_toolpulse_e2e_0001"
MODEL = "gpt-toolpulse-e2e"
PLAIN_MODEL = "toolpulse-plain"
PARALLEL_MODEL = "toolpulse-parallel"
FAILURES_MODEL = "toolpulse-failures"
HELD_MODEL = "toolpulse-held"
FRONTEND_MODEL = "toolpulse-frontend"
CUT_MODEL = "toolpulse-cut"
ERROR_MODEL = "toolpulse-error"
ERROR_MESSAGE = "The model is overloaded; try again later."
FRONTEND_CALL = "call_confirm_1"
TAG_HEADER = "x-e2e-tag"
DEFAULT_TOOL_MS = 250

# The MCP failure text antwort writes when no executor handles a tool.
BROKEN_OUTPUT = "no executor found for tool github_broken"
# Outputs of MCP tools that failed (their in-place terminal event is `response.mcp_call.failed`).
FAILED_OUTPUTS = frozenset({BROKEN_OUTPUT})

FINAL_TEXT = (
    "I found two open issues about streaming stalls, the design doc explains the "
    "lifecycle events, and the web agrees: show progress while tools run."
)
PLAIN_TEXT = "Hello! No tools were needed for this one."
PARALLEL_TEXT = "Issue #42 and the web both say: show progress while tools run."
FAILURES_TEXT = "The web search failed and one tool never answered; here is what I have."
SEARCH_FAILED_OUTPUT = "search failed: upstream timeout"
HELD_TEXT = "Crunched, step by step."
HELD_TIMEOUT_S = 20
HELD_TIMEOUT_OUTPUT = "held output never posted"


def _function_tool(name: str, description: str, properties: dict) -> dict:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": sorted(properties),
            "additionalProperties": False,
        },
        "strict": True,
    }


TOOLS = [
    _function_tool("web_search", "Search the web", {"query": {"type": "string"}}),
    _function_tool("file_search", "Search the uploaded files", {"query": {"type": "string"}}),
    _function_tool(
        "github_search_issues",
        "MCP github: search issues",
        {"repo": {"type": "string"}, "query": {"type": "string"}},
    ),
    _function_tool("github_broken", "MCP github: a tool with no executor", {"id": {"type": "string"}}),
    _function_tool("demo_crunch", "MCP demo: crunch a label in steps",
                   {"label": {"type": "string"}, "steps": {"type": "integer"}}),
]

# (call_id, tool name, arguments JSON, output text), in the order the model calls them.
CALLS = {
    "web": ("call_web_1", "web_search", '{"query":"tool lifecycle events SSE"}',
            '[{"title":"Streaming tool progress","url":"https://example.com/a"}]'),
    "file": ("call_file_1", "file_search", '{"query":"lifecycle design doc"}',
             '[{"file_id":"file_1","filename":"design.md","score":0.92}]'),
    "gh": ("call_gh_1", "github_search_issues", '{"repo":"acme/agent","query":"stream stalls"}',
           '[{"number":42,"title":"Stream stalls during tool calls"},{"number":57,"title":"No progress shown"}]'),
    "broken": ("call_gb_1", "github_broken", '{"id":"7"}', BROKEN_OUTPUT),
    "web_fail": ("call_web_2", "web_search", '{"query":"flaky upstream"}', SEARCH_FAILED_OUTPUT),
    "file_multi": ("call_file_2", "file_search", '{"queries":["retry policy","backoff"]}',
                   '[{"file_id":"file_2","filename":"retries.md","score":0.71}]'),
    "gh_open": ("call_gh_2", "github_search_issues", '{"repo":"acme/agent","query":"timeouts"}', None),
    # A tool of the client's (the request declares it): the gateway never runs it.
    "confirm": (FRONTEND_CALL, "confirm_action", '{"question":"Open issue #42?"}', None),
    # Its output is posted by the test (see HeldOutput).
    "held": ("call_crunch_1", "demo_crunch", '{"label":"the numbers","steps":3}', None),
}


def lifecycle_type(name: str) -> str:
    """The in-place event prefix a tool gets (see `?spec023=1` in the module docstring)."""
    if name in ("web_search", "file_search"):
        return f"response.{name}_call"
    return "response.mcp_call"


class HeldOutput:
    """A pause that lasts until the output of `call_id` is posted (see the module docstring)."""

    def __init__(self, call_id: str) -> None:
        self.call_id = call_id


def base_response(status: str, output: list, created_at: int, usage: dict | None) -> dict:
    """A complete Responses `Response` object, shaped like OpenAI's."""
    return {
        "id": RESPONSE_ID,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "completed_at": created_at + 2 if status == "completed" else None,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "model": MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "prompt_cache_key": None,
        "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None,
        "service_tier": "default",
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": TOOLS,
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


USAGE = {
    "input_tokens": 812,
    "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
    "output_tokens": 96,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 908,
}


class Script:
    """Builds one stream: a list of (pause_before_seconds, event dict), numbered as it goes."""

    def __init__(self, tool_seconds: float, base: int = 0, spec023: bool = False) -> None:
        self.steps: list[tuple[float, dict]] = []
        self.output: list[dict] = []  # final items, in output_index order
        self.tool_seconds = tool_seconds
        self.base = base  # the first output_index: 0 (OpenAI) or 1 (antwort)
        self.spec023 = spec023  # the gateway's own lifecycle events (antwort's in-place lifecycle events)
        self.function_calls: dict[str, tuple[int, str]] = {}  # key -> (output_index, item id)
        self.created_at = int(time.time())

    def emit(self, event: dict, pause: float = 0.0) -> None:
        event = {"type": event.pop("type"), **event, "sequence_number": len(self.steps)}
        self.steps.append((pause, event))

    def start(self) -> None:
        for kind in ("response.created", "response.in_progress"):
            self.emit({"type": kind, "response": base_response("in_progress", [], self.created_at, None)})

    def next_index(self) -> int:
        return self.base + len(self.output)

    def function_call(self, key: str) -> int:
        return self.parallel_function_calls(key)[0]

    def parallel_function_calls(self, *keys: str) -> list[int]:
        """One function_call item per key, all added before the first one is done."""
        calls = []
        for key in keys:
            call_id, name, arguments, _ = CALLS[key]
            index = self.next_index()
            item_id = "fc_" + call_id.removeprefix("call_")
            added = {"id": item_id, "type": "function_call", "status": "in_progress",
                     "arguments": "", "call_id": call_id, "name": name}
            final = {**added, "status": "completed", "arguments": arguments}
            self.output.append(final)
            self.function_calls[key] = (index, item_id)
            self.emit({"type": "response.output_item.added", "output_index": index, "item": added})
            calls.append((index, item_id, arguments, final))
        for index, item_id, arguments, _ in calls:
            cut = len(arguments) // 2
            for delta in (arguments[:cut], arguments[cut:]):
                self.emit({"type": "response.function_call_arguments.delta", "item_id": item_id,
                           "output_index": index, "delta": delta})
        for key, (index, item_id, arguments, final) in zip(keys, calls):
            self.emit({"type": "response.function_call_arguments.done", "item_id": item_id,
                       "output_index": index, "arguments": arguments})
            self.emit({"type": "response.output_item.done", "output_index": index, "item": final})
            if self.spec023:
                prefix = lifecycle_type(final["name"])
                phases = ("in_progress",) if prefix == "response.mcp_call" else ("in_progress", "searching")
                for phase in phases:
                    self._lifecycle(key, f"{prefix}.{phase}")
        return [index for index, *_ in calls]

    def _lifecycle(self, key: str, event_type: str, pause: float | HeldOutput = 0.0) -> None:
        """An in-place event on the function_call item of `key` (see the module docstring)."""
        index, item_id = self.function_calls[key]
        name = CALLS[key][1]
        self.emit({"type": event_type, "item_id": item_id, "output_index": index, "name": name}, pause)

    def function_call_output(self, key: str, pause: float | HeldOutput) -> int:
        call_id, name, _, output = CALLS[key]
        index = self.next_index()
        item = {"id": "fco_" + call_id.removeprefix("call_"), "type": "function_call_output",
                "call_id": call_id, "output": output, "status": "completed"}
        self.output.append(item)
        if self.spec023:
            # The tool ran (the pause): its terminal event, then its output at once.
            prefix = lifecycle_type(name)
            failed = prefix == "response.mcp_call" and output in FAILED_OUTPUTS
            self._lifecycle(key, f"{prefix}.{'failed' if failed else 'completed'}", pause)
            pause = 0.0
        # antwort puts the whole output in both events, and marks failures "completed" too.
        self.emit({"type": "response.output_item.added", "output_index": index, "item": item}, pause)
        self.emit({"type": "response.output_item.done", "output_index": index, "item": item})
        return index

    def message(self, text: str, pieces: int = 5, pause: float = 0.0) -> None:
        index = self.next_index()
        item_id = f"msg_e2e_{len(self.output)}"
        part_empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        part_full = {**part_empty, "text": text}
        self.emit({"type": "response.output_item.added", "output_index": index,
                   "item": {"id": item_id, "type": "message", "status": "in_progress",
                            "role": "assistant", "content": []}}, pause)
        self.emit({"type": "response.content_part.added", "item_id": item_id,
                   "output_index": index, "content_index": 0, "part": part_empty})
        step = -(-len(text) // pieces)
        for start in range(0, len(text), step):
            self.emit({"type": "response.output_text.delta", "item_id": item_id,
                       "output_index": index, "content_index": 0,
                       "delta": text[start:start + step], "logprobs": []})
        self.emit({"type": "response.output_text.done", "item_id": item_id,
                   "output_index": index, "content_index": 0, "text": text, "logprobs": []})
        self.emit({"type": "response.content_part.done", "item_id": item_id,
                   "output_index": index, "content_index": 0, "part": part_full})
        final = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                 "content": [part_full]}
        self.output.append(final)
        self.emit({"type": "response.output_item.done", "output_index": index, "item": final})

    def finish(self) -> dict:
        final = base_response("completed", self.output, self.created_at, USAGE)
        self.emit({"type": "response.completed", "response": final})
        return final


def agentic_script(tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    s.function_call("web")
    s.function_call_output("web", tool_seconds)
    s.function_call("file")
    s.function_call_output("file", tool_seconds)
    # Two MCP calls of one turn run in parallel; the broken one answers first.
    s.function_call("gh")
    s.function_call("broken")
    s.function_call_output("broken", tool_seconds)
    s.function_call_output("gh", tool_seconds / 2)
    s.message(FINAL_TEXT)
    s.finish()
    return s


def plain_script(tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    s.message(PLAIN_TEXT, pieces=3)
    s.finish()
    return s


def parallel_script(tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    s.parallel_function_calls("gh", "web")
    s.function_call_output("web", tool_seconds)
    s.function_call_output("gh", tool_seconds / 2)
    s.message(PARALLEL_TEXT, pieces=3)
    s.finish()
    return s


def failures_script(tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    s.function_call("web_fail")
    s.function_call_output("web_fail", tool_seconds)
    s.function_call("file_multi")
    s.function_call_output("file_multi", tool_seconds)
    s.function_call("broken")
    s.function_call_output("broken", tool_seconds)
    # The gateway gives up on this call (say, a tool timeout it does not report): no output
    # item ever comes, and the response completes with the call listed but unanswered.
    s.function_call("gh_open")
    s.message(FAILURES_TEXT, pieces=3, pause=tool_seconds)
    s.finish()
    return s


def held_script(tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    s.function_call("held")
    # The output item's `output` (None here) is the posted text once released.
    s.function_call_output("held", HeldOutput(CALLS["held"][0]))
    s.message(HELD_TEXT, pieces=3)
    s.finish()
    return s


def frontend_script(tool_seconds: float, base: int = 0, spec023: bool = False,
                    answer: str | None = None) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    if answer is not None:
        s.message(f"The user answered: {answer}", pieces=3)
    else:
        s.function_call("web")
        s.function_call_output("web", tool_seconds)
        s.function_call("confirm")
    s.finish()
    return s


def cut_script(tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    s = Script(tool_seconds, base, spec023)
    s.start()
    s.function_call("web")
    return s


def frontend_answer(body: dict) -> str | None:
    """The output of the client's confirm_action call in a request's input, if any."""
    items = body.get("input") if isinstance(body.get("input"), list) else []
    for item in items:
        if isinstance(item, dict) and item.get("type") == "function_call_output" \
                and item.get("call_id") == FRONTEND_CALL:
            return item.get("output")
    return None


SCENARIOS = {PLAIN_MODEL: plain_script, PARALLEL_MODEL: parallel_script,
             FAILURES_MODEL: failures_script, HELD_MODEL: held_script}


def hold(script: Script, call_ids: set[str]) -> None:
    """`?hold=call_web_1,…`: the tool pause before each of those calls' outputs lasts until the
    test posts `/_outputs/<call_id>` (an empty body keeps the scripted output), so a test can
    look at the client while the gateway still runs the tool, whatever the machine's speed."""
    for i, (_, event) in enumerate(script.steps):
        item = event.get("item") or {}
        if event.get("type") != "response.output_item.added" or item.get("call_id") not in call_ids:
            continue
        if item.get("type") != "function_call_output":
            continue
        # The pause is on this step, or (with antwort's in-place events) on the terminal event before it.
        for j in range(i, -1, -1):
            pause = script.steps[j][0]
            if isinstance(pause, float) and pause > 0:
                script.steps[j] = (HeldOutput(item["call_id"]), script.steps[j][1])
                break


def script_for(model: str | None, tool_seconds: float, base: int = 0, spec023: bool = False) -> Script:
    """The scenario a request's `model` picks (the agentic stream for any other model);
    `spec023`: with the gateway's own lifecycle events (`?spec023=1`)."""
    return SCENARIOS.get(model or "", agentic_script)(tool_seconds, base, spec023)


def with_outputs(value, released: dict[str, str]):
    """`value` with the `output` of each function_call_output item whose call was released."""
    if isinstance(value, list):
        return [with_outputs(v, released) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: with_outputs(v, released) for k, v in value.items()}
    if value.get("type") == "function_call_output" and value.get("call_id") in released:
        value["output"] = released[value["call_id"]]
    return value


def encode(event: dict) -> bytes:
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "e2e-gateway/1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (stdlib signature)
        sys.stderr.write("gateway: " + (format % args) + "\n")

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/healthz":
            self._send_json(200, {"ok": True})
        elif url.path == "/_requests":
            tag = parse_qs(url.query).get("tag", [None])[0]
            with self.server.lock:
                recorded = [r for r in self.server.recorded if tag is None or r["tag"] == tag]
            self._send_json(200, recorded)
        else:
            self._send_json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        with self.server.lock:
            self.server.recorded.append({"path": url.path, "query": url.query,
                                         "tag": self.headers.get(TAG_HEADER), "body": body,
                                         "traceparent": self.headers.get("traceparent"),
                                         "raw": None if body is not None else raw.decode(errors="replace")})
        if url.path.startswith("/_outputs/"):
            with self.server.lock:
                self.server.outputs[url.path.removeprefix("/_outputs/")] = raw.decode()
                self.server.posted.notify_all()
            self._send_json(200, {"ok": True})
            return
        if body is None:
            self._send_json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if url.path != "/v1/responses":
            self._send_json(404, {"error": {"message": f"no route {url.path}", "type": "invalid_request_error"}})
            return
        tool_seconds = int(query.get("tool_ms", [DEFAULT_TOOL_MS])[0]) / 1000
        base = int(query.get("base", ["0"])[0])
        spec023 = query.get("spec023", ["0"])[0] == "1"
        model = body.get("model")
        if model == ERROR_MODEL:
            self._send_json(503, {"error": {"message": ERROR_MESSAGE, "type": "server_error",
                                            "param": None, "code": "overloaded"}})
            return
        if model == FRONTEND_MODEL:
            script = frontend_script(tool_seconds, base, spec023, frontend_answer(body))
        elif model == CUT_MODEL:
            script = cut_script(tool_seconds, base, spec023)
        else:
            script = script_for(model, tool_seconds, base, spec023)
        hold(script, set(query.get("hold", [""])[0].split(",")) - {""})
        if not body.get("stream"):
            self._send_json(200, script.steps[-1][1]["response"])
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = [(pause, event) for pause, event in script.steps]
        if query.get("done", ["0"])[0] == "1":
            chunks.append((0.0, None))
        released: dict[str, str] = {}
        try:
            for pause, event in chunks:
                if isinstance(pause, HeldOutput):
                    # An empty post releases the scripted output as it is.
                    output = self._wait_for_output(pause.call_id)
                    if output:
                        released[pause.call_id] = output
                elif pause:
                    time.sleep(pause)
                chunk = b"data: [DONE]\n\n" if event is None else encode(with_outputs(event, released))
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            if model == CUT_MODEL:
                # Half an event, then the connection closes without the body's last chunk.
                half = encode({"type": "response.output_item.added", "output_index": 1})[:30]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(half), half))
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _wait_for_output(self, call_id: str) -> str:
        with self.server.lock:
            self.server.posted.wait_for(lambda: call_id in self.server.outputs, HELD_TIMEOUT_S)
            return self.server.outputs.pop(call_id, HELD_TIMEOUT_OUTPUT)

    def _send_json(self, status: int, payload: dict | list) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.lock = threading.Lock()
    server.recorded = []  # every POST, in arrival order (see the module docstring)
    server.outputs = {}  # held outputs posted and not yet sent, by call_id
    server.posted = threading.Condition(server.lock)
    host, port = server.server_address[:2]
    print(f"gateway listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
