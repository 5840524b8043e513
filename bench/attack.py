#!/usr/bin/env python3
"""Issue 26's high-severity attacks, all at once, against one toolpulse on loopback, while a
legitimate client keeps using it. Standard library only.

Attackers (each a loop that reconnects as soon as toolpulse closes or refuses):
  - pin:     HTTP/1 POSTs announcing 4 MiB bodies, sending 3.9 MiB, then stalling
             (half on the proxy's /v1/responses, half on the MCP front's /srv);
  - idle:    TCP connections that send nothing (proxy, MCP front; admin: half its cap);
  - trickle: POSTs whose body comes one byte every 2 s.
The legitimate client, every 250 ms: a streamed POST /v1/responses through the proxy (the
whole stream must arrive), GET /healthz on the admin listener, a POST to the MCP front.

Prints one JSON object: counts of what the attackers saw, the legitimate requests made and
failed, their worst latency. Loopback only; stops by itself after --seconds.
"""

import argparse
import asyncio
import json
import time

MIB = 1 << 20


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", type=int, required=True)
    p.add_argument("--mcp", type=int, required=True)
    p.add_argument("--admin", type=int, required=True)
    p.add_argument("--seconds", type=float, default=90)
    p.add_argument("--pin", type=int, default=40)
    p.add_argument("--idle", type=int, default=60)
    p.add_argument("--trickle", type=int, default=20)
    # Half the admin listener's cap ([admin] max_connections, 16): a cap can always be filled
    # by a peer that reconnects at once; what matters is that idle ones are closed.
    p.add_argument("--idle-admin", type=int, default=8)
    return p.parse_args()


class Counts:
    def __init__(self):
        self.c = {}

    def add(self, key, n=1):
        self.c[key] = self.c.get(key, 0) + n


async def status_of(reader, timeout):
    """The status code of the first response on `reader`, or 'closed'/'timeout'."""
    try:
        line = await asyncio.wait_for(reader.readline(), timeout)
    except asyncio.TimeoutError:
        return "timeout"
    except (ConnectionError, OSError):
        return "closed"
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "closed"


async def pin(port, path, deadline, counts, name):
    head = (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        f"content-length: {4 * MIB}\r\n\r\n"
    ).encode()
    chunk = b" " * (64 * 1024)
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts.add(f"{name}_connect_failed")
            await asyncio.sleep(0.1)
            continue
        try:
            writer.write(head)
            sent = 0
            while sent < 4 * MIB - 100 * 1024 and time.monotonic() < deadline:
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 5)
                sent += len(chunk)
            left = max(0.1, deadline - time.monotonic())
            counts.add(f"{name}_{await status_of(reader, left)}")
        except (ConnectionError, OSError, asyncio.TimeoutError):
            counts.add(f"{name}_cut")
        finally:
            writer.close()


async def idle(port, deadline, counts, name):
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            counts.add(f"{name}_connect_failed")
            await asyncio.sleep(0.1)
            continue
        started = time.monotonic()
        try:
            left = max(0.1, deadline - time.monotonic())
            data = await asyncio.wait_for(reader.read(1), left)
            counts.add(f"{name}_closed" if not data else f"{name}_answered")
            counts.add(f"{name}_held_ms", int((time.monotonic() - started) * 1000))
        except asyncio.TimeoutError:
            counts.add(f"{name}_still_open_at_end")
        except (ConnectionError, OSError):
            counts.add(f"{name}_closed")
        finally:
            writer.close()


async def trickle(port, path, deadline, counts, name):
    head = (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        "content-length: 100000\r\n\r\n"
    ).encode()
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        try:
            writer.write(head)
            answer = asyncio.ensure_future(status_of(reader, deadline - time.monotonic() + 1))
            while not answer.done() and time.monotonic() < deadline:
                writer.write(b" ")
                await writer.drain()
                await asyncio.wait([answer], timeout=2)
            counts.add(f"{name}_{await answer}")
        except (ConnectionError, OSError):
            counts.add(f"{name}_cut")
        finally:
            writer.close()


async def exchange(port, request, timeout=10):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(-1), timeout)
    finally:
        writer.close()


async def legit(args, deadline, counts):
    body = json.dumps({"model": "m", "input": "hi", "stream": True}).encode()
    stream = (
        f"POST /v1/responses?events=40&tool_every=20&ts=0 HTTP/1.1\r\nhost: x\r\n"
        f"connection: close\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    health = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    rpc = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    mcp = (
        f"POST /srv HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n"
        f"accept: application/json, text/event-stream\r\ncontent-length: {len(rpc)}\r\n\r\n"
    ).encode() + rpc
    worst = 0.0
    while time.monotonic() < deadline:
        for what, port, request, ok in (
            ("stream", args.proxy, stream, lambda a: a.startswith(b"HTTP/1.1 200") and b"response.completed" in a),
            ("health", args.admin, health, lambda a: a.startswith(b"HTTP/1.1 200")),
            # The bench upstream answers only …/responses: a 404 from it means it got through.
            ("mcp", args.mcp, mcp, lambda a: a.startswith(b"HTTP/1.1 404")),
        ):
            started = time.monotonic()
            try:
                answer = await exchange(port, request)
                good = ok(answer)
            except (OSError, asyncio.TimeoutError):
                answer, good = b"", False
            took = time.monotonic() - started
            worst = max(worst, took)
            counts.add(f"legit_{what}")
            if not good:
                counts.add(f"legit_{what}_failed")
                counts.add("legit_failed")
                print(f"legit {what} failed: {answer[:120]!r}", flush=True, file=__import__("sys").stderr)
        await asyncio.sleep(0.25)
    counts.c["legit_worst_ms"] = int(worst * 1000)


async def main():
    args = parse_args()
    counts = Counts()
    deadline = time.monotonic() + args.seconds
    tasks = [legit(args, deadline, counts)]
    for i in range(args.pin):
        port, path = (args.proxy, "/v1/responses") if i % 2 == 0 else (args.mcp, "/srv")
        tasks.append(pin(port, path, deadline, counts, "pin"))
    for i in range(args.idle):
        port = (args.proxy, args.mcp)[i % 2]
        tasks.append(idle(port, deadline, counts, "idle"))
    for _ in range(args.idle_admin):
        tasks.append(idle(args.admin, deadline, counts, "idle_admin"))
    for i in range(args.trickle):
        port, path = (args.proxy, "/v1/responses") if i % 2 == 0 else (args.mcp, "/srv")
        tasks.append(trickle(port, path, deadline, counts, "trickle"))
    await asyncio.gather(*tasks)
    print(json.dumps(counts.c, sort_keys=True))


if __name__ == "__main__":
    asyncio.run(main())
