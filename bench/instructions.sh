#!/usr/bin/env bash
# Instructions per event of the rewriting core, counted by valgrind's callgrind: a count, not a
# time, so it does not move with the machine's load (the same binary and input give the same
# figure within a few hundred instructions). For A/Bs between builds and for bench/results.
#
#   bash bench/instructions.sh BIN [BIN ...]    # e.g. a build of the base and one of the change
#
# Each BIN runs `BIN rewrite FILE` (the whole process: config, the rewriter fed 64 KiB reads as
# a flood of events arrives, stdout) under callgrind on generated antwort-shaped streams, the same
# shapes as benches/rewrite.rs: `text` (text deltas only: every event forwarded untouched),
# `tools` (a web search every 50 events: hosted items injected, later events renumbered) and
# `tools-openai` (the same under profile `openai`). `text-paced` and `tools-paced` are `text` and
# `tools` fed one event per `feed_into` call (`rewrite --event-per-read`), as the proxy feeds a
# paced upstream that sends one event per read: the per-call overhead counts there; a build
# without that option shows `n/a` for them. The cost per event is
#   (instructions for EVENTS events - instructions for one event) / (EVENTS - 1),
# so start-up and exit cancel out. Needs valgrind and python3; prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash bench/instructions.sh BIN [BIN ...]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench/instructions.sh: valgrind is required" >&2; exit 2; }
EVENTS=${EVENTS:-5000}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/toolpulse-instructions.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

python3 - "$TMP" "$EVENTS" <<'PY'
import sys
out, events = sys.argv[1], int(sys.argv[2])
def event(seq, kind, rest):
    return f'event: {kind}\ndata: {{"type":"{kind}","sequence_number":{seq},{rest}}}\n\n'
def stream(n, tool_every):
    seq, call, parts = 0, 0, []
    while seq < n:
        if tool_every and seq % tool_every == tool_every - 1:
            call += 1
            item = f'"output_index":1,"item":{{"id":"fc_{call}","type":"function_call","name":"web_search","call_id":"c{call}","arguments":"{{}}"}}'
            parts.append(event(seq, "response.output_item.added", item)); seq += 1
            parts.append(event(seq, "response.output_item.done", item)); seq += 1
            output = f'"output_index":2,"item":{{"id":"o_{call}","type":"function_call_output","call_id":"c{call}","output":"3 results","status":"completed"}}'
            parts.append(event(seq, "response.output_item.added", output)); seq += 1
        else:
            delta = '"item_id":"msg_1","output_index":3,"content_index":0,"delta":"some words of text "'
            parts.append(event(seq, "response.output_text.delta", delta)); seq += 1
    return "".join(parts)
for name, every in (("text", None), ("tools", 50)):
    for n, tag in ((events, "n"), (1, "1")):
        open(f"{out}/{name}-{tag}.sse", "w").write(stream(n, every))
PY

count() { # BIN FILE [PROFILES [PACED]]: the instructions callgrind collected
  local bin=$1 file=$2 profiles=${3:-} paced=${4:-}
  local args=(rewrite "$file")
  [ -n "$profiles" ] && args+=(--profiles "$profiles")
  [ -n "$paced" ] && args+=(--event-per-read)
  env -u TOOLPULSE_CONFIG RUST_LOG=off valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$bin" "${args[@]}" 2>"$TMP/vg.log" >/dev/null || { cat "$TMP/vg.log" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$TMP/vg.log"
}

echo "| build | scenario | instructions per event |"
echo "|---|---|---|"
for bin in "$@"; do
  label=$("$bin" --version 2>/dev/null | head -1 || echo "$bin")
  for scenario in text tools tools-openai text-paced tools-paced; do
    file=${scenario%-*}
    profiles="" paced=""
    [ "$scenario" = tools-openai ] && profiles=openai
    if [ "${scenario#*-}" = paced ]; then
      paced=1
      env -u TOOLPULSE_CONFIG "$bin" rewrite --event-per-read "$TMP/text-1.sse" >/dev/null 2>&1 ||
        { echo "| $bin | $scenario | n/a |"; continue; }
    fi
    many=$(count "$bin" "$TMP/$file-n.sse" "$profiles" "$paced")
    one=$(count "$bin" "$TMP/$file-1.sse" "$profiles" "$paced")
    per=$(python3 -c "print(f'{($many - $one) / ($EVENTS - 1):,.0f}')")
    echo "| $bin | $scenario | $per |"
  done
done
