#!/usr/bin/env python3
"""CPU of one toolpulse holding N client connections that each sent one byte and then nothing
(`P`, the start of the HTTP/2 preface; `G`, the start of an HTTP/1 GET; or none at all), read
from /proc/<pid>/stat (utime + stime) over --seconds while the connections are held, well
within the head timeout. Standard library only; loopback only.

    python3 bench/sniff_cpu.py --binary target/release/toolpulse --connections 4000

Prints one JSON line per byte: the connections, the seconds measured, the CPU % of one core.
"""

import argparse
import json
import os
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(pid, port, first, connections, seconds):
    held = []
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port))
        if first:
            s.sendall(first)
        held.append(s)
    time.sleep(1)
    start = cpu_seconds(pid)
    time.sleep(seconds)
    used = cpu_seconds(pid) - start
    for s in held:
        s.close()
    time.sleep(1)
    return round(100 * used / seconds, 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--connections", type=int, default=4000)
    p.add_argument("--seconds", type=float, default=10)
    args = p.parse_args()
    port, admin = free_port(), free_port()
    proc = subprocess.Popen(
        [args.binary, "--listen", f"127.0.0.1:{port}", "--admin-listen",
         f"127.0.0.1:{admin}", "--upstream", "http://127.0.0.1:9"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.1)
        for name, first in (("P", b"P"), ("G", b"G"), ("silent", b"")):
            cpu = measure(proc.pid, port, first, args.connections, args.seconds)
            print(json.dumps({"first_byte": name, "connections": args.connections,
                              "seconds": args.seconds, "cpu_percent": cpu}), flush=True)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
