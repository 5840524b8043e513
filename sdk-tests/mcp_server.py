#!/usr/bin/env python3
"""An MCP server made with Python's official `mcp` SDK, for test_mcp_front.py.

`MCPServer` (mcp 2's name for FastMCP) over Streamable HTTP at `/mcp`, with one tool:
`crunch(label, steps)` reports `ctx.report_progress(k, steps, "step k/steps: label")` for
k = 1..steps, pausing STEP_MS between reports, and answers `crunched <label> in <steps> steps`.
The SDK sends a report only when the call carries a progress token (`params._meta.progressToken`).

Every call is recorded (the token it carried, `params._meta.traceparent`, the HTTP `traceparent`
header, the arguments): `GET /_calls` answers them as a JSON list. So a test can see what
toolpulse's MCP front forwarded.

Usage: mcp_server.py [--port 0] [--step-ms 150]
       prints `mcp server listening on http://127.0.0.1:PORT/mcp` on stdout.
"""

from __future__ import annotations

import argparse
import socket
import threading

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

TOOL = "crunch"


def message(k: int, steps: int, label: str) -> str:
    return f"step {k}/{steps}: {label}"


def result_text(label: str, steps: int) -> str:
    return f"crunched {label} in {steps} steps"


def build(step_seconds: float) -> MCPServer:
    server = MCPServer("toolpulse-e2e-steps", version="1.0.0")
    calls: list[dict] = []
    lock = threading.Lock()

    @server.tool(name=TOOL, description="Crunches a label in steps, reporting each step's progress")
    async def crunch(label: str, steps: int, ctx: Context) -> str:
        request = ctx.request_context
        meta = (request.params or {}).get("_meta") or {}
        headers = ctx.headers or {}
        with lock:
            calls.append({
                "arguments": {"label": label, "steps": steps},
                "progress_token": meta.get("progressToken"),
                "meta_traceparent": meta.get("traceparent"),
                "header_traceparent": headers.get("traceparent"),
                "protocol_version": request.protocol_version,
            })
        for k in range(1, steps + 1):
            await ctx.report_progress(k, steps, message(k, steps, label))
            await anyio.sleep(step_seconds)
        return result_text(label, steps)

    @server.custom_route("/_calls", methods=["GET"])
    async def recorded(_: Request) -> JSONResponse:
        with lock:
            return JSONResponse(list(calls))

    return server


def serve(server: MCPServer, port: int) -> None:
    """Serves `server` over Streamable HTTP at `/mcp` on 127.0.0.1:`port` (0: any free port),
    printing `mcp server listening on http://127.0.0.1:PORT/mcp` once bound."""
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn_server = uvicorn.Server(config)
    print(f"mcp server listening on http://127.0.0.1:{port}/mcp", flush=True)
    uvicorn_server.run(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--step-ms", type=int, default=150)
    args = parser.parse_args()
    server = build(args.step_ms / 1000)
    serve(server, args.port)


if __name__ == "__main__":
    main()
