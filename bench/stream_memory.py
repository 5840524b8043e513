#!/usr/bin/env python3
"""What a gateway that grows its streams costs toolpulse in memory: it streams many parallel
calls with large arguments (or large names) and never an output, holds the streams open, then
ends them. Standard library only; loopback; Linux (/proc).

  python3 bench/stream_memory.py target/release/toolpulse args 3

SCENARIO: `args`, 300 web searches (added, then done with 1 MB of arguments each); `name`, 100
calls named with 3 MB each (kind function). STREAMS of them at once, through one toolpulse with
the default config (profile hosted). Prints the process's VmRSS before the streams, while they
are held open (all sent), its peak (VmHWM), and VmRSS just after they ended and 5 s later.
The environment is passed on to toolpulse (e.g. MALLOC_MMAP_THRESHOLD_=131072, as the image
sets it)."""
import json, os, socket, subprocess, sys, threading, time

binary, scenario, streams = sys.argv[1], sys.argv[2], int(sys.argv[3])

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def event(obj):
    return f"event: {obj['type']}\ndata: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()

def chunk(b):
    return b"%x\r\n" % len(b) + b + b"\r\n"

def stream_events():
    yield event({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}})
    if scenario == "args":
        args = json.dumps({"query": "a" * (1_000_000 - 13)})
        for i in range(300):
            item = {"id": f"fc_{i}", "type": "function_call", "status": "in_progress",
                    "name": "web_search", "call_id": f"call_{i}", "arguments": ""}
            yield event({"type": "response.output_item.added", "output_index": i, "item": item})
            item = dict(item, arguments=args, status="completed")
            yield event({"type": "response.output_item.done", "output_index": i, "item": item})
    else:
        name = "n" * 3_000_000
        for i in range(100):
            item = {"id": f"fc_{i}", "type": "function_call", "status": "in_progress",
                    "name": name, "call_id": f"call_{i}", "arguments": ""}
            yield event({"type": "response.output_item.added", "output_index": i, "item": item})
            item = dict(item, arguments="{}", status="completed")
            yield event({"type": "response.output_item.done", "output_index": i, "item": item})

release = threading.Event()
sent_all = threading.Semaphore(0)

def serve_gateway(conn):
    f = conn.makefile("rb")
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    f.read(length)
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    for e in stream_events():
        conn.sendall(chunk(e))
    sent_all.release()
    release.wait()
    conn.sendall(chunk(event({"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}})))
    conn.sendall(b"0\r\n\r\n")
    time.sleep(0.5)
    conn.close()

def gateway(listener):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve_gateway, args=(conn,), daemon=True).start()

def client(port, done):
    s = socket.create_connection(("127.0.0.1", port))
    body = b'{"model":"m","stream":true,"input":"go"}'
    s.sendall(b"POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body) + body)
    n = 0
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    done.append(n)

def status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) // 1024  # MiB
    return -1

gport, pport, aport = free_port(), free_port(), free_port()
listener = socket.socket(); listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", gport)); listener.listen(64)
threading.Thread(target=gateway, args=(listener,), daemon=True).start()
cfg = f"/tmp/toolpulse-stream-memory-{os.getpid()}.toml"
open(cfg, "w").write(f'[proxy]\nlisten = "127.0.0.1:{pport}"\nupstream = "http://127.0.0.1:{gport}"\n'
                     f'[admin]\nlisten = "127.0.0.1:{aport}"\n')
proc = subprocess.Popen([binary, "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", pport)).close(); break
    except OSError:
        time.sleep(0.05)
before = status(proc.pid, "VmRSS")
done = []
threads = [threading.Thread(target=client, args=(pport, done)) for _ in range(streams)]
for t in threads: t.start()
for _ in range(streams): sent_all.acquire()
time.sleep(1.0)  # let the proxy read the last events
held = status(proc.pid, "VmRSS")
release.set()
for t in threads: t.join()
time.sleep(1.0)
after = status(proc.pid, "VmRSS")
time.sleep(5.0)
after5 = status(proc.pid, "VmRSS")
peak = status(proc.pid, "VmHWM")
proc.terminate(); proc.wait(); os.remove(cfg)
print(f"{scenario} x{streams}: before {before} MiB, held (streams open) {held} MiB, peak {peak} MiB, "
      f"after {after} MiB, after+5s {after5} MiB; client bytes {sorted(done)}")
