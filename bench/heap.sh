#!/usr/bin/env bash
# Where an open stream's memory goes: toolpulse under heaptrack holding 1,000 slowly paced
# streams (the shape of bench/run.sh's rss phase), stopped with SIGTERM so heaptrack writes its
# file, then the peak consumers and the allocation sizes seen 500 times or more.
#
#   bash bench/heap.sh            needs heaptrack (apt-get install heaptrack) and the release
#                                 builds bench/run.sh makes (NO_BUILD=1 skips building)
#   OUT=DIR bash bench/heap.sh    keep the files in DIR (default: a fresh /tmp directory)
#   TOOLPULSE_BIN=F               profile this toolpulse binary (e.g. a build from before a change)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
command -v heaptrack >/dev/null || die "needs heaptrack (apt-get install heaptrack)"
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --locked >&2
  cargo build --release --locked --examples >&2
fi
TMP=${OUT:-$(mktemp -d /tmp/toolpulse-heap.XXXXXX)}
mkdir -p "$TMP"
ulimit -n 16384 2>/dev/null || true
UP_PID="" TP_PID=""
trap 'stop "$TP_PID"; stop "$UP_PID"' EXIT
printf '[[tools]]\nmatch = ["mcp__*"]\nkind = "mcp"\n' >"$TMP/toolpulse.toml"
pick_port UP_PORT
pick_port TP_PORT
pick_port ADMIN_PORT
target/release/examples/bench_upstream --listen "127.0.0.1:$UP_PORT" --exit-after-s 600 \
  >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
wait_port "$UP_PORT" "$UP_PID" upstream
TOOLPULSE=${TOOLPULSE_BIN:-target/release/toolpulse}
RUST_LOG=warn heaptrack -o "$TMP/heap" "$TOOLPULSE" --config "$TMP/toolpulse.toml" \
  --upstream "http://127.0.0.1:$UP_PORT" --listen "127.0.0.1:$TP_PORT" \
  --admin-listen "127.0.0.1:$ADMIN_PORT" >"$TMP/toolpulse.log" 2>&1 &
TP_PID=$!
wait_port "$TP_PORT" "$TP_PID" toolpulse
target/release/examples/bench_client --url "http://127.0.0.1:$TP_PORT/v1/responses" \
  --concurrency 1000 --streams 1000 --events 30 --pace-us 300000 --tool-every 10 \
  --tool-delay-us 1000000 --ramp-ms 2000 >"$TMP/client.json" 2>"$TMP/client.err"
log "streams ok: $(jnum streams_ok "$TMP/client.json"), failed: $(jnum streams_failed "$TMP/client.json")"
# SIGTERM to toolpulse itself (not heaptrack's wrapper), so that heaptrack writes its file.
pkill -TERM -P "$TP_PID" -x "$(basename "$TOOLPULSE" | cut -c1-15)" 2>/dev/null || true
wait "$TP_PID" || true
TP_PID=""
heaptrack_print -f "$TMP"/heap.*zst --print-histogram "$TMP/sizes.txt" --peak-limit 12 \
  >"$TMP/report.txt" 2>/dev/null
grep -E "^peak heap|^peak RSS" "$TMP/report.txt"
echo "allocation size, count (500 or more):"
sort -n "$TMP/sizes.txt" | awk '$1 >= 1024 && $2 >= 500'
log "peak consumers with their stacks: $TMP/report.txt"
