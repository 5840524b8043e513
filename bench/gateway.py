#!/usr/bin/env python3
"""A scripted Responses gateway for bench/hardening.sh, honest or hostile by query string, on
raw asyncio TCP (standard library only). HTTP/1.1, keep-alive, chunked SSE answers.

  POST …/responses                      a turn with one web_search whose output is --out-kb KiB
                                        (what the next-turn store keeps), then a short message
  POST …/responses?mode=grow&calls=N&arg_kb=K
                                        N web_search calls opened at once, K KiB of arguments
                                        each, no output for any; then response.completed
  POST …/responses?mode=bigname&name_kb=K
                                        one function call whose name is K KiB
  POST …/responses?mode=echo&instr_kb=K
                                        response.created echoing K KiB of instructions, then an
                                        event every 10 ms until the peer goes away (or 10 min)
  anything else                         404

Every request body is read to its end and counted: --stats writes, at exit, the bytes received
per path and the largest body, the evidence that a refused body never reached the gateway.
Loopback only.
"""

import argparse
import asyncio
import json
import signal
import sys

MIB = 1 << 20


def event(kind, seq, **fields):
    data = json.dumps({"type": kind, "sequence_number": seq, **fields}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def response(status):
    return {"id": "resp_1", "object": "response", "status": status, "model": "m", "output": []}


def call_item(call_id, name, arguments, status):
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "name": name,
        "call_id": call_id,
        "arguments": arguments,
    }


class Turn:
    """The events of one answer, numbered as they are made."""

    def __init__(self):
        self.seq = 0

    def __call__(self, kind, **fields):
        out = event(kind, self.seq, **fields)
        self.seq += 1
        return out


def honest(turn, out_kb, n):
    call_id = f"call_{n}"
    args = json.dumps({"query": f"query {n}"})
    output = ("result " * (out_kb * 1024 // 7 + 1))[: out_kb * 1024]
    yield turn("response.created", response=response("in_progress"))
    yield turn("response.output_item.added", output_index=0, item=call_item(call_id, "web_search", "", "in_progress"))
    yield turn("response.function_call_arguments.delta", item_id=f"fc_{call_id}", output_index=0, delta=args)
    yield turn("response.function_call_arguments.done", item_id=f"fc_{call_id}", output_index=0, arguments=args)
    yield turn("response.output_item.done", output_index=0, item=call_item(call_id, "web_search", args, "completed"))
    out_item = {"id": f"fco_{call_id}", "type": "function_call_output", "call_id": call_id, "output": output, "status": "completed"}
    yield turn("response.output_item.added", output_index=1, item=out_item)
    yield turn("response.output_item.done", output_index=1, item=out_item)
    msg = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    yield turn("response.output_item.added", output_index=2, item=msg)
    for word in ("Here ", "is ", "what ", "I ", "found."):
        yield turn("response.output_text.delta", item_id="msg_1", output_index=2, content_index=0, delta=word)
    done = dict(msg, status="completed", content=[{"type": "output_text", "text": "Here is what I found."}])
    yield turn("response.output_item.done", output_index=2, item=done)
    yield turn("response.completed", response=response("completed"))
    yield b"data: [DONE]\n\n"


def grow(turn, calls, arg_kb):
    yield turn("response.created", response=response("in_progress"))
    blob = "x" * (arg_kb * 1024)
    for i in range(calls):
        call_id = f"call_{i}"
        yield turn("response.output_item.added", output_index=i, item=call_item(call_id, "web_search", "", "in_progress"))
        delta = '{"query":"' + blob + '"}'
        yield turn("response.function_call_arguments.delta", item_id=f"fc_{call_id}", output_index=i, delta=delta)
        yield turn("response.function_call_arguments.done", item_id=f"fc_{call_id}", output_index=i, arguments=delta)
        yield turn("response.output_item.done", output_index=i, item=call_item(call_id, "web_search", delta, "completed"))
    yield turn("response.completed", response=response("completed"))


def bigname(turn, name_kb):
    name = "n" * (name_kb * 1024)
    yield turn("response.created", response=response("in_progress"))
    yield turn("response.output_item.added", output_index=0, item=call_item("call_big", name, "", "in_progress"))
    yield turn("response.output_item.done", output_index=0, item=call_item("call_big", name, "{}", "completed"))
    yield turn("response.completed", response=response("completed"))


async def chunk(writer, data):
    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
    await writer.drain()


async def answer(writer, target, counter, out_kb):
    path, _, query = target.partition("?")
    params = dict(p.partition("=")[::2] for p in query.split("&") if p)
    if not path.endswith("/responses"):
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        return
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    turn = Turn()
    mode = params.get("mode", "")
    if mode == "echo":
        instructions = "i" * (int(params.get("instr_kb", 4096)) * 1024)
        created = dict(response("in_progress"), instructions=instructions)
        await chunk(writer, turn("response.created", response=created))
        for _ in range(60_000):  # 10 minutes at most
            await chunk(writer, turn("response.in_progress", response=response("in_progress")))
            await asyncio.sleep(0.01)
        return
    if mode == "grow":
        events = grow(turn, int(params.get("calls", 300)), int(params.get("arg_kb", 1024)))
    elif mode == "bigname":
        events = bigname(turn, int(params.get("name_kb", 3072)))
    else:
        counter[0] += 1
        events = honest(turn, int(params.get("out_kb", out_kb)), counter[0])
    for data in events:
        await chunk(writer, data)
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def read_body(reader, headers):
    if headers.get("transfer-encoding", "").lower().endswith("chunked"):
        total = 0
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b""):
                    pass
                return total
            await reader.readexactly(size + 2)
            total += size
    length = int(headers.get("content-length", "0"))
    left = length
    while left:
        left -= len(await reader.read(min(left, MIB)))
    return length


async def serve(reader, writer, stats, counter, out_kb):
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers = {}
            while (h := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = h.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            received = await read_body(reader, headers)
            key = target.split("?")[0]
            stats[key] = stats.get(key, 0) + received
            stats["largest_body"] = max(stats.get("largest_body", 0), received)
            stats["requests"] = stats.get("requests", 0) + 1
            await answer(writer, target, counter, out_kb)
    except (ConnectionError, OSError, ValueError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out-kb", type=int, default=10)
    p.add_argument("--stats", help="write the bytes received per path here (JSON) at exit")
    args = p.parse_args()
    stats, counter = {}, [0]
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, stats, counter, args.out_kb), "127.0.0.1", args.port, limit=64 * MIB
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"gateway.py listening on 127.0.0.1:{args.port}", flush=True)
    async with server:
        await stop.wait()
    if args.stats:
        with open(args.stats, "w") as f:
            json.dump(stats, f)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
