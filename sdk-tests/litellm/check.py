#!/usr/bin/env python3
"""Checks the harness against the recordings: starts the stack (stack.py), POSTs each recorded
request body (`*.request.json`) to LiteLLM's `/v1/responses`, saves the raw streams, and compares
each with its recording after replacing ids (`id`, `item_id`, `call_id`, `approval_request_id`,
consistently within a stream) and `created_at`: every event, its fields and their order. Prints
each event's arrival time (since the request was sent) and, for the MCP requests, when the
MCP server ran the tool, so one can see what arrives while a tool runs.

With --toolpulse BIN, also sends the MCP requests through that toolpulse (in front of LiteLLM)
and saves those streams as through-toolpulse-NAME.sse (no comparison: printed only).

Standard library only. Exits 1 when a stream differs from its recording.

Usage: check.py [--tool-ms 1500] [--out /tmp/litellm-check] [--recordings DIR]
                [--toolpulse BIN [--toolpulse-config FILE]]
"""

from __future__ import annotations

import argparse
import difflib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stack  # noqa: E402

DEFAULT_RECORDINGS = HERE.parent.parent.parent / "shared" / "recordings" / "litellm-1.108.7"
NAMES = ["no_tools", "function_tool", "mcp_lookup_user", "mcp_fail_tool"]
ID_KEYS = {"id", "item_id", "call_id", "approval_request_id"}


def post_stream(host: str, port: int, path: str, body: bytes, headers: dict) -> Tuple[int, bytes, List[Tuple[float, str]]]:
    """POST and read the SSE answer: (status, raw bytes, [(seconds since send, event data)])."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    sent = time.monotonic()
    conn.request("POST", path, body=body, headers={"content-type": "application/json", **headers})
    resp = conn.getresponse()
    raw = b""
    events: List[Tuple[float, str]] = []
    buf = b""
    while True:
        chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
        if not chunk:
            break
        now = time.monotonic() - sent
        raw += chunk
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            for line in block.decode("utf-8", "replace").splitlines():
                if line.startswith("data:"):
                    events.append((now, line[5:].strip()))
                elif line.startswith(":"):
                    events.append((now, "#" + line))
    conn.close()
    return resp.status, raw, events


def normalise(raw: str) -> List[str]:
    ids: dict = {}
    out = []
    for line in raw.splitlines():
        if not line.startswith("data: "):
            if line:
                out.append("RAW " + line)
            continue
        data = line[6:]
        if data == "[DONE]":
            out.append("[DONE]")
            continue

        def walk(v, key=None):
            if isinstance(v, dict):
                return {k: walk(x, k) for k, x in v.items()}
            if isinstance(v, list):
                return [walk(x) for x in v]
            if key in ID_KEYS and isinstance(v, str):
                ids.setdefault(v, f"<{key}#{len(ids)}>")
                return ids[v]
            if key == "created_at":
                return "<created_at>"
            return v

        out.append(json.dumps(walk(json.loads(data))))
    return out


def describe(data: str) -> str:
    if data.startswith("#"):
        return data[1:]
    if data == "[DONE]":
        return "[DONE]"
    e = json.loads(data)
    item = e.get("item") or {}
    bits = [f"#{e.get('sequence_number', '-')}", e.get("type", "?")]
    if "output_index" in e:
        bits.append(f"[{e['output_index']}]")
    if item:
        bits.append(f"{item.get('type')}:{item.get('name') or ''}".rstrip(":"))
    if "delta" in e:
        bits.append(json.dumps(e["delta"]))
    return " ".join(bits)


def print_timeline(events, calls, t0_wall: float) -> None:
    for t, data in events:
        print(f"    {t * 1000:7.0f} ms  {describe(data)}")
    for c in calls:
        start = (c["started"] - t0_wall) * 1000
        end = ((c["ended"] or c["started"]) - t0_wall) * 1000
        print(f"    tool {c['tool']} ran {start:.0f} -> {end:.0f} ms")


def start_toolpulse(binary: str, upstream: str, config: str, out: Path) -> Tuple[subprocess.Popen, int]:
    port = stack.free_port()
    admin = stack.free_port()
    argv = [binary, "--listen", f"127.0.0.1:{port}", "--upstream", upstream, "--admin-listen", f"127.0.0.1:{admin}"]
    if config:
        argv += ["--config", config]
    log = open(out / "toolpulse.log", "wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=1)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"toolpulse not ready; log:\n{(out / 'toolpulse.log').read_text(errors='replace')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-ms", type=int, default=1500)
    parser.add_argument("--out", default="/tmp/litellm-check")
    parser.add_argument("--recordings", default=str(DEFAULT_RECORDINGS))
    parser.add_argument("--toolpulse", help="a toolpulse binary to send the MCP requests through too")
    parser.add_argument("--toolpulse-config", default="", help="its --config (default: none)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recordings = Path(args.recordings)
    failed = False

    with stack.LiteLLMStack(tool_ms=args.tool_ms, log_dir=out / "logs", keep_logs=True) as lite:
        print(f"stack up: LiteLLM ready in {lite.startup_s:.1f}s at {lite.base_url}; tools take {args.tool_ms} ms")
        auth = {"authorization": f"Bearer {lite.api_key}"}
        for name in NAMES:
            body = (recordings / f"{name}.request.json").read_bytes()
            n_calls = len(lite.mcp_calls())
            t0_wall = time.time()
            status, raw, events = post_stream("127.0.0.1", lite.port, "/v1/responses", body, auth)
            (out / f"{name}.sse").write_bytes(raw)
            live = normalise(raw.decode("utf-8", "replace"))
            recorded = normalise((recordings / f"{name}.sse").read_text(encoding="utf-8"))
            diff = list(difflib.unified_diff(recorded, live, "recorded", "live", lineterm="", n=0))
            verdict = "same as the recording" if not diff and status == 200 else f"DIFFERS (HTTP {status})"
            failed |= bool(diff) or status != 200
            print(f"== {name}: {len(events)} events, {verdict}")
            for line in diff[:40]:
                print("    " + line[:300])
            print_timeline(events, lite.mcp_calls()[n_calls:], t0_wall)

        if args.toolpulse:
            proc, port = start_toolpulse(args.toolpulse, lite.upstream, args.toolpulse_config, out)
            try:
                for name in ("mcp_lookup_user", "mcp_fail_tool"):
                    body = (recordings / f"{name}.request.json").read_bytes()
                    n_calls = len(lite.mcp_calls())
                    t0_wall = time.time()
                    status, raw, events = post_stream("127.0.0.1", port, "/v1/responses", body, auth)
                    (out / f"through-toolpulse-{name}.sse").write_bytes(raw)
                    live = normalise(raw.decode("utf-8", "replace"))
                    direct = normalise((out / f"{name}.sse").read_text(encoding="utf-8"))
                    diff = list(difflib.unified_diff(direct, live, "direct", "through toolpulse", lineterm="", n=0))
                    print(f"== through toolpulse: {name}: HTTP {status}, {len(events)} events; "
                          f"{'no difference to the direct stream (ids aside)' if not diff else 'differs from the direct stream:'}")
                    for line in diff[:60]:
                        print("    " + line[:300])
                    print_timeline(events, lite.mcp_calls()[n_calls:], t0_wall)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(5)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
