#!/usr/bin/env bash
# User and system CPU per upstream event, toolpulse builds beside nginx, taken in turn: where a
# proxy's CPU goes (its own code or the kernel's), and an A/B of builds alternated in one sitting.
#
#   bash bench/cpu_split.sh [TOOLPULSE_BIN ...]    # default target/release/toolpulse
#
# The shape of bench/run.sh's paced phase (PACED="concurrency streams events pace_us": 200 400
# 250 20000 by default), the proxy pinned to CPU 1 and the upstream and client to CPU 0, ROUNDS
# rounds (default 3) of every build and nginx, the order turned by one place each round. utime
# and stime are /proc's, read before and after the measured client (a warm-up first); the split
# between them is sampled by the kernel, their sum is not. Time, so quote ratios within one run.
# Markdown on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
command -v nginx >/dev/null || die "nginx is required"
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --locked --bin toolpulse --example bench_upstream --example bench_client >&2
fi
[ $# -ge 1 ] || set -- target/release/toolpulse
read -r CONC STREAMS EVENTS PACE <<<"${PACED:-200 400 250 20000}"
ROUNDS=${ROUNDS:-3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/toolpulse-cpu-split.XXXXXX")
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do stop "$pid"; done; rm -rf "$TMP"; }
trap cleanup EXIT

pick_port UP_PORT
taskset -c 0 target/release/examples/bench_upstream --listen "127.0.0.1:$UP_PORT" \
  --exit-after-s 3600 >"$TMP/upstream.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT" "$!" upstream
printf '[[tools]]\nmatch = ["mcp__*"]\nkind = "mcp"\n' >"$TMP/toolpulse.toml"

# stat PID: utime and stime in clock ticks.
stat_ticks() {
  local s f
  s=$(cat "/proc/$1/stat")
  s=${s##*) }
  read -r -a f <<<"$s"
  echo "${f[11]} ${f[12]}"
}

measure() { # LABEL BIN|nginx: one row
  local label=$1 bin=$2 pid u0 s0 u1 s1 events
  pick_port PORT
  if [ "$bin" = nginx ]; then
    mkdir -p "$TMP/nginx"
    NGINX_MASTER=off nginx_conf "$PORT" 8192 16384 >"$TMP/nginx/nginx.conf"
    taskset -c 1 nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" \
      >"$TMP/$label.log" 2>&1 &
  else
    pick_port ADMIN
    RUST_LOG=warn taskset -c 1 "$bin" --config "$TMP/toolpulse.toml" \
      --upstream "http://127.0.0.1:$UP_PORT" --listen "127.0.0.1:$PORT" \
      --admin-listen "127.0.0.1:$ADMIN" >"$TMP/$label.log" 2>&1 &
  fi
  pid=$!
  PIDS+=("$pid")
  wait_port "$PORT" "$pid" "$label"
  local client=(taskset -c 0 target/release/examples/bench_client
    --url "http://127.0.0.1:$PORT/v1/responses")
  "${client[@]}" --concurrency 4 --streams 8 --events 50 >/dev/null 2>&1 # warm-up
  read -r u0 s0 <<<"$(stat_ticks "$pid")"
  "${client[@]}" --concurrency "$CONC" --streams "$STREAMS" --events "$EVENTS" \
    --pace-us "$PACE" >"$TMP/client.json" 2>"$TMP/client.err" \
    || die "$label: client failed: $(tail -n 3 "$TMP/client.err")"
  read -r u1 s1 <<<"$(stat_ticks "$pid")"
  events=$(jnum upstream_events "$TMP/client.json")
  stop "$pid"
  python3 -c "
hz, e = $(getconf CLK_TCK), $events
u, s = ($u1 - $u0) / hz * 1e6 / e, ($s1 - $s0) / hz * 1e6 / e
print(f'| $label | $round | {e} | {u:.2f} | {s:.2f} | {u + s:.2f} |')"
}

echo "| target | round | events | user µs/event | system µs/event | CPU µs/event |"
echo "|---|---|---|---|---|---|"
# The order turns by one place each round: a target measured later in a round tends to cost more
# (three builds measured first, second and third in turn gave up to 10 % apart for their slot
# alone), so no target keeps the first place.
LABELS=() TARGETS=()
i=0
for bin in "$@"; do
  i=$((i + 1))
  LABELS+=("toolpulse-$i") TARGETS+=("$bin")
done
LABELS+=(nginx) TARGETS+=(nginx)
for round in $(seq "$ROUNDS"); do
  n=${#TARGETS[@]}
  for k in $(seq 0 $((n - 1))); do
    j=$(((k + round - 1) % n))
    measure "${LABELS[$j]}" "${TARGETS[$j]}"
  done
done
echo
echo "toolpulse-N: $*; paced shape $CONC × $STREAMS × $EVENTS, an event every $PACE µs."
