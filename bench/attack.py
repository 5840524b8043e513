#!/usr/bin/env python3
"""Attacks on one toolpulse on loopback, all at once, while a legitimate client keeps using every
listener. Standard library only. Each attacker is a loop that reconnects as soon as toolpulse
closes or refuses it; each comes from a loopback address of its own (127.0.0.N: Linux routes all
of 127/8 to lo), so per-peer limits meet the attacker, not the legitimate client (127.0.0.1).

Held connections and bodies:
  - pin:     HTTP/1 POSTs announcing 4 MiB bodies, sending 3.9 MiB, then stalling
             (half on the proxy's /v1/responses, half on the MCP front's /srv);
  - idle:    TCP connections that send nothing (proxy, MCP front; admin: half its cap);
  - trickle: POSTs whose body comes one byte every 2 s;
  - starve:  POSTs announcing 4 MiB (12 of them) or 64 KiB (260), one body byte each, held;
  - sniff:   connections that send the byte `P` and nothing more.
Through the gateway (bench/gateway.py):
  - amplify: a client with one hosted id of its own sends 40,000 `item_reference`s to it (3.2 MB);
  - grow:    streams whose gateway opens 300 web_search calls of 1 MiB arguments each, and a
             call whose name is 3 MiB (the client reads them whole);
  - stall:   streams whose gateway echoes 4 MiB of instructions first; the client never reads.
The legitimate client, every 250 ms: a streamed POST /v1/responses with a web search through
the proxy (the whole stream must arrive), its next turn with an `item_reference` to that search
(must be answered 200 and stream), GET /healthz on the admin listener, a POST to the MCP front.

--only NAME[,NAME] runs just those attackers (and no legitimate client unless `legit` is named).
Prints one JSON object: counts of what the attackers saw, the legitimate requests made and
failed, their worst latency. Loopback only; stops by itself after --seconds.
"""

import argparse
import asyncio
import json
import re
import sys
import time

MIB = 1 << 20
HOSTED_ID = re.compile(rb"tph_[A-Za-z0-9_.-]+")
# Each attacker's source address; the legitimate client is 127.0.0.1.
SOURCE = {
    "pin": "127.0.0.2", "idle": "127.0.0.2", "idle_admin": "127.0.0.2", "trickle": "127.0.0.2",
    "starve": "127.0.0.3", "amplify": "127.0.0.4", "grow": "127.0.0.5", "stall": "127.0.0.6",
    "sniff": "127.0.0.7",
}
ATTACKERS = ("pin", "idle", "trickle", "starve", "sniff", "amplify", "grow", "stall")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", type=int, required=True)
    p.add_argument("--mcp", type=int, required=True)
    p.add_argument("--admin", type=int, required=True)
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--only", default="", help="comma-separated attackers (and/or legit) to run")
    p.add_argument("--pin", type=int, default=40)
    p.add_argument("--idle", type=int, default=60)
    p.add_argument("--trickle", type=int, default=20)
    # Half the admin listener's cap ([admin] max_connections, 16): a cap can always be filled
    # by a peer that reconnects at once; what matters is that idle ones are closed.
    p.add_argument("--idle-admin", type=int, default=8)
    p.add_argument("--sniff", type=int, default=4000)
    p.add_argument("--sniff-byte", default="P", help="what each sniffer sends ('' for nothing)")
    p.add_argument("--stall", type=int, default=10)
    p.add_argument("--stall-kb", type=int, default=4096)
    p.add_argument("--references", type=int, default=40000)
    return p.parse_args()


class Counts:
    def __init__(self):
        self.c = {}

    def add(self, key, n=1):
        self.c[key] = self.c.get(key, 0) + n

    def most(self, key, n):
        self.c[key] = max(self.c.get(key, 0), n)


async def connect(port, name, **kw):
    source = SOURCE.get(name, "127.0.0.1")
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0), **kw)


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


def post(path, body_len, extra=""):
    return (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{extra}"
        f"content-length: {body_len}\r\n\r\n"
    ).encode()


async def pin(port, path, deadline, counts, name):
    head = post(path, 4 * MIB)
    chunk = b" " * (64 * 1024)
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(port, name)
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


async def held(port, deadline, counts, name, first=b""):
    """A connection that sends `first` (maybe nothing) and waits to be closed or answered."""
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(port, name)
        except OSError:
            counts.add(f"{name}_connect_failed")
            await asyncio.sleep(0.1)
            continue
        started = time.monotonic()
        try:
            if first:
                writer.write(first)
                await writer.drain()
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
    head = post(path, 100000)
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(port, name)
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


async def starve(port, length, deadline, counts, name):
    """Announces `length` bytes, sends one, holds the connection until it is answered."""
    head = post("/v1/responses", length) + b"{"
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(port, name)
        except OSError:
            counts.add(f"{name}_connect_failed")
            await asyncio.sleep(0.1)
            continue
        try:
            writer.write(head)
            await writer.drain()
            counts.add(f"{name}_{await status_of(reader, max(0.1, deadline - time.monotonic()))}")
        except (ConnectionError, OSError):
            counts.add(f"{name}_cut")
        finally:
            writer.close()


async def exchange(port, request, timeout=30, name="legit"):
    reader, writer = await connect(port, name, limit=64 * MIB)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(-1), timeout)
    finally:
        writer.close()


def turn(input_items, query=""):
    body = json.dumps({"model": "m", "input": input_items, "stream": True}).encode()
    head = post(f"/v1/responses{query}", len(body), "connection: close\r\n")
    return head + body


async def hosted_id(port, name):
    """A hosted id of the caller's own: the web search of one turn through the proxy."""
    answer = await exchange(port, turn("search something"), name=name)
    found = HOSTED_ID.search(answer)
    return found.group(0).decode() if found else None


async def amplify(port, references, deadline, counts, name):
    own = None
    while own is None and time.monotonic() < deadline:
        try:
            own = await hosted_id(port, name)
        except (OSError, asyncio.TimeoutError):
            await asyncio.sleep(0.5)
    request = turn([{"type": "item_reference", "id": own}] * references)
    counts.most(f"{name}_request_bytes", len(request))
    while time.monotonic() < deadline:
        try:
            answer = await exchange(port, request, name=name)
            counts.add(f"{name}_{answer.split(b' ', 2)[1].decode() if answer else 'closed'}")
        except (OSError, asyncio.TimeoutError, IndexError):
            counts.add(f"{name}_cut")
        await asyncio.sleep(0.2)


async def grow(port, deadline, counts, name):
    for query in ("?mode=grow&calls=300&arg_kb=1024", "?mode=bigname&name_kb=3072"):
        if time.monotonic() >= deadline:
            return
        try:
            reader, writer = await connect(port, name, limit=64 * MIB)
        except OSError:
            counts.add(f"{name}_connect_failed")
            continue
        try:
            writer.write(turn("grow", query))
            await writer.drain()
            got = 0
            tail = b""
            while chunk := await asyncio.wait_for(reader.read(MIB), 60):
                got += len(chunk)
                tail = (tail + chunk)[-256:]
            counts.add(f"{name}_bytes", got)
            counts.add(f"{name}_{'complete' if b'response.completed' in tail else 'incomplete'}")
        except (OSError, asyncio.TimeoutError):
            counts.add(f"{name}_cut")
        finally:
            writer.close()


async def grow_loop(port, deadline, counts, name):
    while time.monotonic() < deadline:
        await grow(port, deadline, counts, name)


async def stall(port, kb, deadline, counts, name):
    """Asks for a stream that starts with a large event and never reads it (asyncio stops
    reading at 128 KiB buffered); after the hold, reads what is left: an end means toolpulse
    closed the connection, an endless stream means it still holds it."""
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(port, name, limit=64 * 1024)
        except OSError:
            counts.add(f"{name}_connect_failed")
            await asyncio.sleep(0.1)
            continue
        started = time.monotonic()
        try:
            writer.write(turn("stall", f"?mode=echo&instr_kb={kb}"))
            await writer.drain()
            writer.transport.pause_reading()  # the client stops reading
            await asyncio.sleep(max(0, min(deadline - time.monotonic(), 20)))
            writer.transport.resume_reading()
            ended = False
            quiet_until = time.monotonic() + 5
            while time.monotonic() < quiet_until:
                try:
                    if not await asyncio.wait_for(reader.read(MIB), 5):
                        ended = True
                        break
                except (ConnectionError, OSError):
                    ended = True
                    break
            counts.add(f"{name}_{'closed_by_proxy' if ended else 'still_open'}")
            counts.add(f"{name}_held_ms", int((time.monotonic() - started) * 1000))
        except asyncio.TimeoutError:
            counts.add(f"{name}_still_open")
        except (ConnectionError, OSError):
            counts.add(f"{name}_closed_by_proxy")
        finally:
            writer.close()


async def legit(args, deadline, counts):
    health = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    rpc = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    mcp = post("/srv", len(rpc), "connection: close\r\naccept: application/json, text/event-stream\r\n") + rpc
    streamed = lambda a: a.startswith(b"HTTP/1.1 200") and b"response.completed" in a
    worst = 0.0
    own = None
    while time.monotonic() < deadline:
        next_turn = [{"role": "user", "content": "hi"}]
        if own:
            next_turn.append({"type": "item_reference", "id": own})
        for what, port, request, ok in (
            ("stream", args.proxy, turn("search something"), streamed),
            ("next_turn", args.proxy, turn(next_turn), streamed),
            ("health", args.admin, health, lambda a: a.startswith(b"HTTP/1.1 200")),
            # The gateway answers only …/responses: a 404 from it means it got through.
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
            if what == "stream" and good and (found := HOSTED_ID.search(answer)):
                own = found.group(0).decode()
            if not good:
                counts.add(f"legit_{what}_failed")
                counts.add("legit_failed")
                print(f"legit {what} failed: {answer[:160]!r}", flush=True, file=sys.stderr)
        await asyncio.sleep(0.25)
    counts.c["legit_worst_ms"] = int(worst * 1000)


async def main():
    args = parse_args()
    only = set(filter(None, args.only.split(",")))
    run = lambda name: not only or name in only
    counts = Counts()
    deadline = time.monotonic() + args.seconds
    tasks = []
    if run("legit"):
        tasks.append(legit(args, deadline, counts))
    if run("pin"):
        for i in range(args.pin):
            port, path = (args.proxy, "/v1/responses") if i % 2 == 0 else (args.mcp, "/srv")
            tasks.append(pin(port, path, deadline, counts, "pin"))
    if run("idle"):
        for i in range(args.idle):
            tasks.append(held((args.proxy, args.mcp)[i % 2], deadline, counts, "idle"))
        for _ in range(args.idle_admin):
            tasks.append(held(args.admin, deadline, counts, "idle_admin"))
    if run("trickle"):
        for i in range(args.trickle):
            port, path = (args.proxy, "/v1/responses") if i % 2 == 0 else (args.mcp, "/srv")
            tasks.append(trickle(port, path, deadline, counts, "trickle"))
    if run("starve"):
        for length, n in ((4 * MIB, 12), (64 * 1024, 260)):
            tasks.extend(starve(args.proxy, length, deadline, counts, "starve") for _ in range(n))
    if run("sniff"):
        first = args.sniff_byte.encode()
        tasks.extend(held(args.proxy, deadline, counts, "sniff", first) for _ in range(args.sniff))
    if run("amplify"):
        tasks.append(amplify(args.proxy, args.references, deadline, counts, "amplify"))
    if run("grow"):
        tasks.append(grow_loop(args.proxy, deadline, counts, "grow"))
    if run("stall"):
        tasks.extend(stall(args.proxy, args.stall_kb, deadline, counts, "stall") for _ in range(args.stall))
    await asyncio.gather(*tasks)
    print(json.dumps(counts.c, sort_keys=True))


if __name__ == "__main__":
    asyncio.run(main())
