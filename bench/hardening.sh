#!/usr/bin/env bash
# The attacks on toolpulse together, against one toolpulse process (proxy, MCP front and admin
# listener) in front of a scripted gateway that is partly hostile (bench/gateway.py), while a
# legitimate client keeps using all three listeners (bench/attack.py): bodies announced at 4 MiB
# and stalled, silent connections, trickled bodies (held connections); 272 bodies announced and
# held after one byte (starve); 4,000 connections that send `P` (sniff); 40,000 references to
# one hosted id (amplify); a gateway that opens 300 calls of 1 MiB arguments and a 3 MiB tool
# name (grow); clients that never read a stream that starts with 4 MiB (stall). Each attacker
# reconnects as soon as it is closed or refused, from a loopback address of its own.
#
# First, toolpulse's CPU while 4,000 connections are held silent, then while 4,000 hold one
# byte each ($SNIFF_SECONDS s each). Then everything for $SECONDS_ s, toolpulse's RSS sampled
# every second.
# Checks:
#   - every legitimate request is served, throughout (streams, next turns, MCP, health);
#   - peak RSS stays within idle RSS + the body budget + what the stalled clients may hold
#     (2 x their first event each, until the send timeout) + the open calls' budget of the
#     grown streams + $RSS_SLACK_MIB;
#   - RSS is flat: the last third's peak is within $FLAT_SLACK_MIB of the middle third's;
#   - 4,000 connections that send `P` cost what silent ones cost (within $SNIFF_MAX_PCT points
#     of a core);
#   - the attacks were met: amplified bodies refused (400) and never sent on (the gateway's
#     largest body stays small), stalled clients closed at the send timeout, held bodies
#     refused, silent connections closed.
#
#   bash bench/hardening.sh                 # 2 minutes of attack (under 3 with the build done)
#   SECONDS_=30 PROFILE=debug NO_BUILD=1 bash bench/hardening.sh
#
# Writes bench/results/<date>-<time>-hardening.md (OUT=... to change), the RSS samples beside
# it as .csv. Exits 1 when a check fails. Loopback only; every process it starts is stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

PROFILE=${PROFILE:-release}
DURATION=${SECONDS_:-120}
SNIFF_SECONDS=${SNIFF_SECONDS:-15}
SNIFF_MAX_PCT=${SNIFF_MAX_PCT:-5}
RSS_SLACK_MIB=${RSS_SLACK_MIB:-64}
FLAT_SLACK_MIB=${FLAT_SLACK_MIB:-24}
BUDGET_MIB=64
# What the stalled clients may hold until the send timeout closes them: their first event
# (4 MiB of echoed instructions) about twice over, each.
STALL=${STALL:-10}
STALL_KIB=4096
SEND_TIMEOUT_MS=${SEND_TIMEOUT_MS:-5000}
# What one stream's open calls may hold: [limits] max_open_call_bytes, the default (8 MiB).
OPEN_CALL_MIB=8
STAMP=$(date +%Y-%m-%d-%H%M)
OUT=${OUT:-bench/results/$STAMP-hardening.md}
CSV=${OUT%.md}.csv

if [ "${NO_BUILD:-0}" != 1 ]; then
  log "building ($PROFILE)"
  flag=$([ "$PROFILE" = release ] && echo --release || true)
  cargo build $flag --locked >&2
fi
TOOLPULSE=target/$PROFILE/toolpulse
[ -x "$TOOLPULSE" ] || die "$TOOLPULSE is missing (run without NO_BUILD=1)"
command -v python3 >/dev/null || die "python3 is needed"
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true

TMP=$(mktemp -d /tmp/toolpulse-hardening.XXXXXX)
UP_PID="" TP_PID="" SAMPLER=""
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null || true
  stop "$TP_PID"
  stop "$UP_PID"
  rm -rf "$TMP"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pick_port UP_PORT
pick_port TP_PORT
pick_port ADMIN_PORT
pick_port MCP_PORT
python3 bench/gateway.py --port "$UP_PORT" --out-kb 10 --stats "$TMP/gateway.json" >"$TMP/upstream.log" 2>&1 &
UP_PID=$!
wait_port "$UP_PORT" "$UP_PID" upstream
# Timeouts shorter than the defaults so that the attackers cycle many times within the run;
# the budgets are the defaults.
cat >"$TMP/toolpulse.toml" <<EOF
[clients]
head_timeout_ms = 3000
body_timeout_ms = 5000
idle_timeout_ms = 5000
send_timeout_ms = $SEND_TIMEOUT_MS
body_buffer_bytes = $((BUDGET_MIB << 20))

[mcp]
listen = "127.0.0.1:$MCP_PORT"

[[mcp.servers]]
name = "srv"
upstream = "http://127.0.0.1:$UP_PORT/mcp"
EOF
# As the image runs it (Dockerfile: glibc gives large freed blocks back to the system).
MALLOC_MMAP_THRESHOLD_=131072 RUST_LOG=warn "$TOOLPULSE" --config "$TMP/toolpulse.toml" --upstream "http://127.0.0.1:$UP_PORT" \
  --listen "127.0.0.1:$TP_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" >"$TMP/toolpulse.log" 2>&1 &
TP_PID=$!
wait_port "$TP_PORT" "$TP_PID" toolpulse
wait_port "$MCP_PORT" "$TP_PID" toolpulse

metric() { # the sum of a metric's series whose labels contain $2 (if given)
  curl -s --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" |
    awk -v m="$1" -v l="${2:-}" '($1 == m || index($1, m "{") == 1) && index($1, l) { s += $2 } END { print s + 0 }'
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$TP_PID/stat"; }
attack() { # attack.py with the listeners' ports; its JSON on stdout
  python3 bench/attack.py --proxy "$TP_PORT" --mcp "$MCP_PORT" --admin "$ADMIN_PORT" \
    --stall "$STALL" --stall-kb "$STALL_KIB" "$@" 2>>"$TMP/attack.err" ||
    die "attack.py failed: $(tail -5 "$TMP/attack.err")"
}

sleep 1
BASE=$(status_kib VmRSS "$TP_PID")
HZ=$(getconf CLK_TCK)
# CPU, in % of a core, while 4,000 connections that send $1 (maybe nothing) are held for
# $SNIFF_SECONDS s, each closed at the head timeout and reconnecting at once.
sniff_cpu() {
  local before
  before=$(cpu_ticks)
  attack --only sniff --sniff-byte "$1" --seconds "$SNIFF_SECONDS" >"$TMP/sniff$1.json"
  echo $((($(cpu_ticks) - before) * 100 / HZ / SNIFF_SECONDS))
}
log "idle RSS $((BASE / 1024)) MiB; 4,000 silent connections, then 4,000 that send P, $SNIFF_SECONDS s each"
silent_pct=$(sniff_cpu "")
sniff_pct=$(sniff_cpu P)

log "attacking for $DURATION s"
echo "second,rss_kib" >"$CSV"
(
  i=0
  while kill -0 "$TP_PID" 2>/dev/null; do
    echo "$i,$(status_kib VmRSS "$TP_PID")" >>"$CSV"
    i=$((i + 1))
    sleep 1
  done
) &
SAMPLER=$!
# Three processes, so that the attackers' own work (Python) does not slow the legitimate
# client: the legitimate client; the connections and bodies held; the streams.
attack --only legit --seconds "$DURATION" >"$TMP/legit.json" &
LEGIT=$!
attack --only pin,idle,trickle,starve,sniff --seconds "$DURATION" >"$TMP/held.json" &
HELD=$!
attack --only amplify,grow,stall --seconds "$DURATION" >"$TMP/streams.json"
wait "$LEGIT" || die "the legitimate client failed"
wait "$HELD" || die "the attackers failed"
python3 -c "import json, sys; print(json.dumps({k: v for f in sys.argv[1:] for k, v in json.load(open(f)).items()}, sort_keys=True))" \
  "$TMP/legit.json" "$TMP/held.json" "$TMP/streams.json" >"$TMP/attack.json"
kill "$SAMPLER" 2>/dev/null || true
SAMPLER=""
kill -0 "$TP_PID" 2>/dev/null || die "toolpulse died: $(tail -5 "$TMP/toolpulse.log")"
sleep 2
AFTER=$(status_kib VmRSS "$TP_PID")
send_timeouts=$(metric toolpulse_client_connections_closed_total 'reason="send_timeout"')
budget=$(metric toolpulse_request_bodies_refused_total 'reason="budget"')
shares=$(($(metric toolpulse_request_bodies_refused_total 'reason="peer_share"') + $(metric toolpulse_request_bodies_refused_total 'reason="connection_share"')))
timeouts=$(metric toolpulse_request_bodies_refused_total 'reason="timeout"')
silent=$(metric toolpulse_client_connections_closed_total 'reason="no_request"')
stop "$UP_PID" # it writes its stats as it exits
UP_PID=""

FAILED=0
fail() {
  FAILED=$((FAILED + 1))
  log "FAIL: $*"
}
A=$TMP/attack.json
field() { python3 -c "import json,sys; print(json.load(open('$1')).get('$2', 0))"; }
fields() { python3 -c "import json; c = json.load(open('$A')); print({k: v for k, v in c.items() if k.startswith('$1') and k not in '$2'.split()} or 'none')"; }
peak=$(awk -F, 'NR > 1 && $2 > m { m = $2 } END { print m + 0 }' "$CSV")
samples=$(($(wc -l <"$CSV") - 1))
third=$((samples / 3))
mid_peak=$(awk -F, -v a="$third" -v b="$((2 * third))" 'NR > 1 && NR - 2 >= a && NR - 2 < b && $2 > m { m = $2 } END { print m + 0 }' "$CSV")
end_peak=$(awk -F, -v b="$((2 * third))" 'NR > 1 && NR - 2 >= b && $2 > m { m = $2 } END { print m + 0 }' "$CSV")
stall_mib=$((STALL * 2 * STALL_KIB / 1024))
bound=$((BASE + ((BUDGET_MIB + stall_mib + OPEN_CALL_MIB + RSS_SLACK_MIB) << 10)))
largest=$(field "$TMP/gateway.json" largest_body)

legit=$(($(field $A legit_stream) + $(field $A legit_next_turn) + $(field $A legit_health) + $(field $A legit_mcp)))
legit_failed=$(field $A legit_failed)
[ "$legit" -gt 0 ] || fail "no legitimate request was made"
[ "$legit_failed" = 0 ] || fail "$legit_failed of $legit legitimate requests failed: $(head -3 "$TMP/attack.err")"
[ "$peak" -le "$bound" ] || fail "peak RSS $((peak / 1024)) MiB over $((bound / 1024)) MiB"
[ $((end_peak - mid_peak)) -le $((FLAT_SLACK_MIB << 10)) ] ||
  fail "RSS grew: last third's peak $((end_peak / 1024)) MiB, middle third's $((mid_peak / 1024)) MiB"
[ "$sniff_pct" -le $((silent_pct + SNIFF_MAX_PCT)) ] ||
  fail "4,000 connections that send P took $sniff_pct % of a core, silent ones $silent_pct %"
[ "$(field $A amplify_400)" -gt 0 ] || fail "no amplified body was refused 400"
[ "$largest" -le $((4 << 20)) ] || fail "the gateway received a body of $largest bytes"
[ "$(field $A stall_closed_by_proxy)" -gt 0 ] || fail "no stalled client was closed"
[ "$(field $A stall_still_open)" = 0 ] || fail "stalled clients still open after the send timeout"
[ "$send_timeouts" -gt 0 ] || fail "no send timeout was counted"
[ "$(field $A grow_complete)" -gt 0 ] || fail "no grown stream reached its client whole"
[ $((budget + shares)) -gt 0 ] || fail "no body was refused for the budget or a share of it"
[ "$timeouts" -gt 0 ] || fail "no body was refused for time"
[ "$silent" -gt 0 ] || fail "no silent connection was closed"

{
  echo "# Hardening soak, $(date -u +'%Y-%m-%d %H:%M UTC')"
  echo
  echo "\`bash bench/hardening.sh\` ($PROFILE build, $(nproc) cores): toolpulse with \`[clients]"
  echo "head_timeout_ms = 3000, body_timeout_ms = 5000, idle_timeout_ms = 5000, send_timeout_ms ="
  echo "$SEND_TIMEOUT_MS\`, the default budgets, in front of \`bench/gateway.py\`. \`bench/attack.py\` runs"
  echo "for $DURATION s, each attacker reconnecting at once from a loopback address of its own: 40 body"
  echo "pinners (4 MiB announced, 3.9 MiB sent, stalled), 60 silent connections (8 more on the admin"
  echo "listener), 20 tricklers, 272 starvers (12 x 4 MiB and 260 x 64 KiB announced, one byte"
  echo "sent), 4,000 sniffers (the byte \`P\`), an amplifier (40,000 references to its own hosted"
  echo "id), a grower (300 calls of 1 MiB arguments, a 3 MiB tool name) and $STALL stalled readers"
  echo "(4 MiB first event); and a legitimate client every 250 ms on all three listeners (a turn"
  echo "with a web search, its next turn by \`item_reference\`, an MCP POST, \`/healthz\`)."
  echo
  echo "| check | result |"
  echo "|---|---|"
  echo "| legitimate requests | $legit made, $legit_failed failed ($(fields legit_ 'legit_stream legit_next_turn legit_health legit_mcp legit_worst_ms')); worst latency $(field $A legit_worst_ms) ms |"
  echo "| RSS | idle $((BASE / 1024)) MiB, peak $((peak / 1024)) MiB, $((AFTER / 1024)) MiB 2 s after (bound: idle + $BUDGET_MIB MiB budget + $stall_mib MiB stalled + $OPEN_CALL_MIB MiB open calls + $RSS_SLACK_MIB MiB = $((bound / 1024)) MiB) |"
  echo "| RSS flat | peak of the middle third $((mid_peak / 1024)) MiB, of the last third $((end_peak / 1024)) MiB (slack $FLAT_SLACK_MIB MiB) |"
  echo "| 4,000 connections held $SNIFF_SECONDS s, closed at the head timeout and reconnecting ($(field "$TMP/sniffP.json" sniff_closed) closed) | sending \`P\`: $sniff_pct % of a core; silent: $silent_pct % (at most $SNIFF_MAX_PCT points apart) |"
  echo "| amplify ($(field $A amplify_request_bytes) bytes a request) | $(field $A amplify_400) refused 400, others $(fields amplify_ 'amplify_400 amplify_request_bytes'); the gateway's largest body: $largest bytes |"
  echo "| stall | $(field $A stall_closed_by_proxy) closed by toolpulse, $(field $A stall_still_open) still open; $send_timeouts send timeouts counted |"
  echo "| grow | $(field $A grow_complete) streams whole at the client, $(field $A grow_incomplete) not, $(field $A grow_bytes) bytes |"
  echo "| held bodies | $budget refused for the budget, $shares for a peer's or a connection's share (503), $timeouts for time (408); starvers saw $(fields starve_ '') |"
  echo "| silent connections closed | $silent |"
  echo
  echo "What the attackers saw: \`$(cat "$A")\`"
  echo
  echo "RSS samples (one a second): \`$(basename "$CSV")\`."
  [ "$FAILED" = 0 ] && echo && echo "All checks passed." || { echo; echo "$FAILED checks FAILED."; }
} >"$OUT"
log "wrote $OUT"
cat "$OUT" >&2
[ "$FAILED" = 0 ]
