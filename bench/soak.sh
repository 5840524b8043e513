#!/usr/bin/env bash
# Hostile load on one toolpulse process, in front of the scripted gateway
# (examples/bench_upstream.rs), with its memory and file descriptors watched:
#
#   1. slow reader: one stream of ~1 GiB of events, with tool rounds, read by curl at
#      $SLOW_RATE bytes/s while the gateway writes as fast as it can; toolpulse's RSS is
#      sampled throughout: backpressure must hold it flat, its peak at most $SLOW_SLACK_KIB
#      KiB over its size before.
#   2. concurrent: $CONC streams with tool calls open at once, every body checked by the
#      invariant checker (bench_client --verify).
#   3. sequential: $SEQ streams one after another, a new connection each, every body checked;
#      RSS and open fds sampled every $SAMPLE_S s. After warm-up (the first 20 % of the
#      samples) neither may grow: RSS by at most $RSS_SLACK_KIB KiB, fds not at all.
#
#   bash bench/soak.sh                    # the full run (a few minutes after the build)
#   QUICK=1 bash bench/soak.sh            # CI's smoke run: 64 MiB, 200 at once, 2,000 in a row
#   PROFILE=debug NO_BUILD=1 ...          # use target/debug binaries (built by `cargo test`)
#
# Writes bench/results/<date>-<time>-soak[-quick].md (OUT=... to change), the RSS/fd samples
# beside it as .csv. Exits 1 when a check fails. Loopback only; every wait is bounded; every
# process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

QUICK=${QUICK:-0}
PROFILE=${PROFILE:-release}
if [ "$QUICK" = 1 ]; then
  SLOW_EVENTS=${SLOW_EVENTS:-360000} # ~64 MiB (~190 bytes an event)
  CONC=${CONC:-200}
  SEQ=${SEQ:-2000}
  SAMPLE_S=${SAMPLE_S:-1}
else
  SLOW_EVENTS=${SLOW_EVENTS:-5800000} # ~1 GiB
  CONC=${CONC:-1000}
  SEQ=${SEQ:-50000}
  SAMPLE_S=${SAMPLE_S:-5}
fi
SLOW_RATE=${SLOW_RATE:-50M}
RSS_SLACK_KIB=${RSS_SLACK_KIB:-2048}
# The slow reader's slack: it grew by about 1 MiB (a few read and write buffers) in the runs in
# bench/results; without backpressure it would grow by much of the stream (64 MiB quick, 1 GiB
# full) that the gateway writes faster than the reader takes it.
SLOW_SLACK_KIB=${SLOW_SLACK_KIB:-8192}
STAMP=$(date +%Y-%m-%d-%H%M)
OUT=${OUT:-bench/results/$STAMP-soak$([ "$QUICK" = 1 ] && echo -quick || true).md}
CSV=${OUT%.md}.csv

if [ "${NO_BUILD:-0}" != 1 ]; then
  log "building ($PROFILE)"
  flag=$([ "$PROFILE" = release ] && echo --release || true)
  cargo build $flag --locked >&2
  cargo build $flag --locked --example bench_upstream --example bench_client >&2
fi
TOOLPULSE=target/$PROFILE/toolpulse
UPSTREAM=target/$PROFILE/examples/bench_upstream
CLIENT=target/$PROFILE/examples/bench_client
for bin in "$TOOLPULSE" "$UPSTREAM" "$CLIENT"; do
  [ -x "$bin" ] || die "$bin is missing (run without NO_BUILD=1)"
done
command -v curl >/dev/null || die "curl is needed"
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true

TMP=$(mktemp -d /tmp/toolpulse-soak.XXXXXX)
UP_PID="" TP_PID=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  stop "$TP_PID"
  stop "$UP_PID"
  if [ "${KEEP_TMP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pick_port UP_PORT
pick_port TP_PORT
pick_port ADMIN_PORT
"$UPSTREAM" --listen "127.0.0.1:$UP_PORT" --exit-after-s 7200 >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
wait_port "$UP_PORT" "$UP_PID" upstream
cat >"$TMP/toolpulse.toml" <<'EOF'
[[tools]]
match = ["mcp__*"]
kind = "mcp"

[failure]
output_patterns = ["^search failed: "]
EOF
RUST_LOG=warn "$TOOLPULSE" --config "$TMP/toolpulse.toml" --upstream "http://127.0.0.1:$UP_PORT" \
  --listen "127.0.0.1:$TP_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" >"$TMP/toolpulse.log" 2>&1 &
TP_PID=$!
wait_port "$TP_PORT" "$TP_PID" toolpulse
URL=http://127.0.0.1:$TP_PORT/v1/responses

fds() { find "/proc/$TP_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss() { status_kib VmRSS "$TP_PID"; }
metric() { # the sum of a metric's series on the admin listener
  curl -s --max-time 2 "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}
FAILED=0
fail() {
  FAILED=$((FAILED + 1))
  log "FAIL: $*"
}
RESULTS=()
result() { RESULTS+=("$*"); log "$*"; }

# ---------------------------------------------------------------------------------------------
log "1. slow reader: $SLOW_EVENTS events, a tool round every 1,000, read at $SLOW_RATE/s"
base=$(rss)
(curl -sS --max-time 1800 --limit-rate "$SLOW_RATE" -X POST -H 'content-type: application/json' \
  -d '{"stream":true}' "$URL?events=$SLOW_EVENTS&tool_every=1000&ts=0" |
  tee >(wc -c >"$TMP/slow.bytes") | tail -c 2000 >"$TMP/slow.tail") &
reader=$!
peak=$base
for _ in $(seq 7200); do
  kill -0 "$reader" 2>/dev/null || break
  r=$(rss)
  [ "$r" -gt "$peak" ] && peak=$r
  sleep 0.25
done
wait "$reader" || fail "slow reader: curl failed"
sleep 0.5
bytes=$(cat "$TMP/slow.bytes" 2>/dev/null || echo 0)
grep -q '"type":"response.completed"' "$TMP/slow.tail" || fail "slow reader: no response.completed at the end"
result "slow reader: $((bytes / 1048576)) MiB through at $SLOW_RATE/s; toolpulse RSS $((base / 1024)) MiB before, peak $((peak / 1024)) MiB (+$(((peak - base) / 1024)) MiB)"
SLOW_GROWTH=$((peak - base))
[ "$SLOW_GROWTH" -le "$SLOW_SLACK_KIB" ] ||
  fail "slow reader: RSS grew by $SLOW_GROWTH KiB (from $base to $peak), over the $SLOW_SLACK_KIB KiB slack"

# ---------------------------------------------------------------------------------------------
log "2. concurrent: $CONC streams at once, tool rounds, every body verified"
base=$(rss)
peak=$base
"$CLIENT" --url "$URL" --concurrency "$CONC" --streams "$CONC" --events 60 --pace-us 20000 \
  --tool-every 20 --tool-delay-us 300000 --ramp-ms 1000 --verify >"$TMP/conc.json" 2>"$TMP/conc.err" &
client=$!
active_max=0
for _ in $(seq 2400); do
  kill -0 "$client" 2>/dev/null || break
  r=$(rss)
  [ "$r" -gt "$peak" ] && peak=$r
  a=$(metric toolpulse_streams_active)
  [ "$a" -gt "$active_max" ] && active_max=$a
  sleep 0.25
done
wait "$client" || fail "concurrent: $(jstr first_error "$TMP/conc.json") $(tail -n 2 "$TMP/conc.err")"
verified=$(jnum verified "$TMP/conc.json")
[ "${verified:-0}" = "$CONC" ] || fail "concurrent: $verified of $CONC streams verified"
result "concurrent: $verified/$CONC streams verified ($(jnum injected_events "$TMP/conc.json") events injected), up to $active_max open at once; RSS $((base / 1024)) MiB before, peak $((peak / 1024)) MiB"

# ---------------------------------------------------------------------------------------------
log "3. sequential: $SEQ streams, a new connection each, every body verified"
echo "seconds,streams,rss_kib,fds" >"$CSV"
"$CLIENT" --url "$URL" --concurrency 1 --streams "$SEQ" --events 40 --tool-every 20 \
  --fresh-connections --verify >"$TMP/seq.json" 2>"$TMP/seq.err" &
client=$!
t0=$(date +%s)
for _ in $(seq $((7200 / SAMPLE_S))); do
  kill -0 "$client" 2>/dev/null || break
  echo "$(($(date +%s) - t0)),$(metric toolpulse_streams_total),$(rss),$(fds)" >>"$CSV"
  sleep "$SAMPLE_S"
done
wait "$client" || fail "sequential: $(jstr first_error "$TMP/seq.json") $(tail -n 2 "$TMP/seq.err")"
sleep 0.5
echo "$(($(date +%s) - t0)),$(metric toolpulse_streams_total),$(rss),$(fds)" >>"$CSV"
verified=$(jnum verified "$TMP/seq.json")
[ "${verified:-0}" = "$SEQ" ] || fail "sequential: $verified of $SEQ streams verified"
# Warm-up: the first 20 % of the samples. Growth: the last sample over the warm-up's maximum.
read -r n warm_rss warm_fds last_rss last_fds max_rss < <(awk -F, 'NR > 1 { rss[++n] = $3; fd[n] = $4 }
  END {
    w = int(n / 5); if (w < 1) w = 1
    for (i = 1; i <= w; i++) { if (rss[i] > wr) wr = rss[i]; if (fd[i] > wf) wf = fd[i] }
    for (i = 1; i <= n; i++) if (rss[i] > m) m = rss[i]
    print n, wr, wf, rss[n], fd[n], m
  }' "$CSV")
[ $((last_rss - warm_rss)) -le "$RSS_SLACK_KIB" ] || fail "sequential: RSS grew from $warm_rss to $last_rss KiB"
[ "$last_fds" -le "$warm_fds" ] || fail "sequential: open fds grew from $warm_fds to $last_fds"
wall=$(jnum wall_s "$TMP/seq.json")
result "sequential: $verified/$SEQ streams verified in $wall s ($n samples); RSS after warm-up $((warm_rss / 1024)) MiB, max $((max_rss / 1024)) MiB, at the end $((last_rss / 1024)) MiB ($((last_rss - warm_rss)) KiB); open fds after warm-up $warm_fds, at the end $last_fds"

# ---------------------------------------------------------------------------------------------
mkdir -p "$(dirname "$OUT")"
{
  echo "# toolpulse soak, $(date '+%Y-%m-%d %H:%M %Z')"
  echo
  echo "- command: \`$([ "$QUICK" = 1 ] && echo "QUICK=1 ")bash bench/soak.sh\` ($PROFILE build)"
  echo "- machine: $(nproc) CPUs, Linux $(uname -r); toolpulse $(git rev-parse --short HEAD 2>/dev/null || echo "?")"
  echo "- samples: $(basename "$CSV") (seconds, streams done, RSS KiB, open fds)"
  echo
  for line in "${RESULTS[@]}"; do echo "- $line"; done
  echo
  [ "$FAILED" = 0 ] && echo "All checks passed." || echo "**$FAILED check(s) failed.**"
} | tee "$OUT"
[ "$FAILED" = 0 ]
