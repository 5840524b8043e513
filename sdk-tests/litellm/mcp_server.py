#!/usr/bin/env python3
"""The MCP server that LiteLLM runs tools on (config.yaml: server `demo`), made with Python's
official `mcp` SDK (the version LiteLLM's venv resolves; 2.3.0 in requirements.txt).

`MCPServer` over Streamable HTTP at `/mcp`, two tools:
- `lookup_user(id: int)` answers the JSON record
  `{"id": 42, "name": "user42", "email": "user42@example.test", "active": true}` (for that id);
- `fail_tool()` raises; the SDK answers an error result whose text is only
  `Error executing tool fail_tool`, which LiteLLM passes on as the call's output.
Each tool first sleeps TOOL_MS (`--tool-ms`, or the environment variable MCP_TOOL_MS; default 0),
so a test can see what reaches the client while a tool runs. `POST /_hold` makes the next call
also wait, after its sleep, until `POST /_release` (at most HOLD_LIMIT_S): a test that releases
the tool only once its client has seen the call in progress does not depend on how fast the
machine is.

Every call is recorded with its wall-clock start and end (`time.time()`): `GET /_calls` answers
them as a JSON list, so a test can line the stream's events up with the tool's run.

Usage: mcp_server.py [--port 0] [--tool-ms 0]
       prints `mcp server listening on http://127.0.0.1:PORT/mcp` on stdout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import threading
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse


# serve() of the other suites' MCP server (../mcp_server.py; by path: this file has its name).
_spec = importlib.util.spec_from_file_location(
    "sdk_tests_mcp_server", Path(__file__).resolve().parent.parent / "mcp_server.py")
_shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_shared)
serve = _shared.serve


def user_record(user_id: int) -> str:
    return json.dumps({"id": user_id, "name": f"user{user_id}",
                       "email": f"user{user_id}@example.test", "active": True})


HOLD_LIMIT_S = 120


def build(tool_seconds: float) -> MCPServer:
    server = MCPServer("toolpulse-litellm-demo", version="1.0.0", log_level="WARNING")
    calls: list[dict] = []
    lock = threading.Lock()
    # The next call's hold, armed by /_hold, set by /_release.
    hold: dict = {"next": None}

    async def run(seconds: float) -> None:
        await anyio.sleep(seconds)
        with lock:
            held, hold["next"] = hold["next"], None
        if held is not None:
            with anyio.move_on_after(HOLD_LIMIT_S):
                await held.wait()

    def record(tool: str, arguments: dict) -> dict:
        call = {"tool": tool, "arguments": arguments, "started": time.time(), "ended": None}
        with lock:
            calls.append(call)
        return call

    @server.tool(name="lookup_user",
                 description="Look up a user by numeric id and return a small JSON record.")
    async def lookup_user(id: int) -> str:  # noqa: A002  (the tool's argument is called `id`)
        call = record("lookup_user", {"id": id})
        try:
            await run(tool_seconds)
            return user_record(id)
        finally:
            call["ended"] = time.time()

    @server.tool(name="fail_tool", description="A tool that always fails.")
    async def fail_tool() -> str:
        call = record("fail_tool", {})
        try:
            await run(tool_seconds)
            raise RuntimeError("fail_tool always fails")
        finally:
            call["ended"] = time.time()

    released: list = []

    @server.custom_route("/_hold", methods=["POST"])
    async def arm(_: Request) -> JSONResponse:
        event = anyio.Event()
        with lock:
            hold["next"] = event
            released[:] = [event]
        return JSONResponse({"held": True})

    @server.custom_route("/_release", methods=["POST"])
    async def release(_: Request) -> JSONResponse:
        with lock:
            for event in released:
                event.set()
            released.clear()
        return JSONResponse({"released": True})

    @server.custom_route("/_calls", methods=["GET"])
    async def recorded(_: Request) -> JSONResponse:
        with lock:
            return JSONResponse([dict(c) for c in calls])

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tool-ms", type=int, default=int(os.environ.get("MCP_TOOL_MS") or 0),
                        help="how long each tool takes (default: $MCP_TOOL_MS or 0)")
    args = parser.parse_args()
    server = build(args.tool_ms / 1000)
    serve(server, args.port)


if __name__ == "__main__":
    main()
