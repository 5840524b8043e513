#!/usr/bin/env python3
"""A scripted OpenAI chat-completions model, for LiteLLM to call (config.yaml: `fake-gpt`).

Standard library only (it runs under any python3). `POST /v1/chat/completions` (also without the
`/v1`) answers by the script below, streamed as `chat.completion.chunk` SSE when the request says
`"stream": true`, as one `chat.completion` otherwise:

- the last message is a tool result (`role: tool`): the text "Done. The tool said: <result>",
  one word a delta ("Done.", " The", " tool", ...);
- the last message is the user's and tools are offered: ONE tool call, chosen by the prompt:
  "Look up user 42" -> the offered tool whose name ends in `lookup_user` (`demo-lookup_user` when
  LiteLLM offers an MCP server's tools, `lookup_user` for a plain function tool), arguments
  `{"id": 42}` streamed in two pieces (`{"id"`, `: 42}`); "... fail tool" -> the tool ending in
  `fail_tool`, `{}` in two pieces (`{`, `}`); a prompt naming an offered tool (its full name, or
  the part after the server prefix `demo-`) -> that tool, `{}`. No match: the text below;
- otherwise: "Hello from the fake backend." in five deltas.

Tool call ids are `call_` + 12 hex digits; every answer reports usage 11 + 7 = 18 tokens (also
as a last chunk when `stream_options.include_usage` is set). These match the recordings in
shared/recordings/litellm-1.108.7/.

`GET /_requests` answers the bodies of the chat-completions requests received so far (a JSON
list), so a test can see what LiteLLM sent the model (e.g. the tool result of round two).
`GET /v1/models` lists `fake-gpt`.

Usage: fake_model.py [--port 0] [--chunk-ms 0]
       prints `fake model listening on http://127.0.0.1:PORT/v1` on stdout.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "fake-gpt"
HELLO = "Hello from the fake backend."
NO_MATCH = "I have no tool for that."
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def text_of(content) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def tool_names(tools) -> list[str]:
    names = []
    for tool in tools or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            names.append(fn["name"])
    return names


def words(text: str) -> list[str]:
    """Deltas of one word each, the space before a word kept with it."""
    return re.findall(r"\s*\S+", text) or [text]


def choose(messages: list, tools) -> tuple[str, object]:
    """("text", [deltas]) or ("tool", (name, [argument pieces]))."""
    last = messages[-1] if messages else {}
    role = last.get("role")
    if role == "tool":
        return "text", words("Done. The tool said: " + text_of(last.get("content")))
    names = tool_names(tools)
    if role == "user" and names:
        prompt = text_of(last.get("content"))
        lower = prompt.lower()
        user = re.search(r"\buser\s+(\d+)", lower)
        if user:
            for name in names:
                if name.endswith("lookup_user"):
                    n = int(user.group(1))
                    return "tool", (name, ['{"id"', f": {n}}}"])
        if re.search(r"\bfail\b", lower):
            for name in names:
                if name.endswith("fail_tool"):
                    return "tool", (name, ["{", "}"])
        for name in names:
            short = name.split("-", 1)[-1]
            if name.lower() in lower or short.lower() in lower:
                return "tool", (name, ["{", "}"])
        return "text", words(NO_MATCH)
    return "text", words(HELLO)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model/1"
    chunk_seconds = 0.0
    requests: list = []
    lock = threading.Lock()

    def log_message(self, fmt, *args) -> None:  # quiet: stderr is for errors only
        pass

    def _json(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path == "/_requests":
            with self.lock:
                self._json(200, list(self.requests))
        elif path in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 0, "owned_by": "fake"}]})
        elif path in ("", "/health"):
            self._json(200, {"ok": True})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        with self.lock:
            self.requests.append(body)
        kind, what = choose(body.get("messages") or [], body.get("tools"))
        cid = "chatcmpl-" + uuid.uuid4().hex[:24]
        created = int(time.time())
        model = body.get("model") or MODEL
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(cid, created, model, kind, what, include_usage)
        else:
            self._json(200, self._whole(cid, created, model, kind, what))

    def _whole(self, cid, created, model, kind, what) -> dict:
        if kind == "text":
            message = {"role": "assistant", "content": "".join(what)}
            finish = "stop"
        else:
            name, pieces = what
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_" + uuid.uuid4().hex[:12], "type": "function",
                "function": {"name": name, "arguments": "".join(pieces)}}]}
            finish = "tool_calls"
        return {"id": cid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": dict(USAGE)}

    def _stream(self, cid, created, model, kind, what, include_usage) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

        def chunk(delta: dict, finish=None, usage=None, choices=True) -> None:
            event = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []}
            if usage is not None:
                event["usage"] = usage
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()
            if self.chunk_seconds:
                time.sleep(self.chunk_seconds)

        try:
            if kind == "text":
                chunk({"role": "assistant", "content": ""})
                for piece in what:
                    chunk({"content": piece})
                chunk({}, "stop")
            else:
                name, pieces = what
                call_id = "call_" + uuid.uuid4().hex[:12]
                chunk({"role": "assistant", "content": None, "tool_calls": [{
                    "index": 0, "id": call_id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]})
                for piece in pieces:
                    chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
                chunk({}, "tool_calls")
            if include_usage:
                chunk({}, usage=dict(USAGE), choices=False)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunk-ms", type=int, default=0, help="pause after each streamed chunk")
    args = parser.parse_args()
    Handler.chunk_seconds = args.chunk_ms / 1000
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"fake model listening on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
