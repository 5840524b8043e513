#!/usr/bin/env bash
# Instructions per upstream event of the whole proxy path, toolpulse beside nginx, counted by
# valgrind's callgrind: a count, not a time, so the ratio does not move with the machine's load.
#
#   bash bench/proxy_instructions.sh [TOOLPULSE_BIN ...]   # default target/release/toolpulse
#
# Each proxy runs under callgrind (nginx: one process, `master_process off`) in front of
# examples/bench_upstream; examples/bench_client drives three small phases through it, the shapes
# of bench/run.sh's at a size valgrind's slowness allows: `paced` (20 streams, one event per write
# every 20 ms), `tools` (the same with a tool round every 10 deltas, tools running 50 ms) and
# `flood` (4 streams of 4,000 events as fast as they go). Before and after each phase
# `callgrind_control --dump` cuts the count, so a phase's instructions are its own: start-up and
# warm-up are left out. Instructions per event = the phase's instructions / the upstream's events.
# paced and tools read one event per write and give the same figure within about 2 % run to run;
# flood's reads take as many events as have arrived, which depends on timing. Instructions are user-space
# only: the kernel's work for each read and write (where nginx spends most of its CPU) is not in them.
# Needs valgrind, nginx, python3; builds the bench examples unless NO_BUILD=1. Markdown on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
for tool in valgrind callgrind_control nginx python3; do
  command -v "$tool" >/dev/null || die "$tool is required"
done
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --locked --bin toolpulse --example bench_upstream --example bench_client >&2
fi
[ $# -ge 1 ] || set -- target/release/toolpulse
UPSTREAM=target/release/examples/bench_upstream
CLIENT=target/release/examples/bench_client
TMP=$(mktemp -d "${TMPDIR:-/tmp}/toolpulse-proxy-instructions.XXXXXX")
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do stop "$pid"; done; rm -rf "$TMP"; }
trap cleanup EXIT

pick_port UP_PORT
"$UPSTREAM" --listen "127.0.0.1:$UP_PORT" --exit-after-s 3600 >"$TMP/upstream.log" 2>&1 &
PIDS+=($!)
wait_port "$UP_PORT" "$!" upstream

printf '[[tools]]\nmatch = ["mcp__*"]\nkind = "mcp"\n' >"$TMP/toolpulse.toml"

# start TARGET BIN: the proxy under callgrind, collecting from the start; sets PROXY_PID, PORT.
start() {
  local target=$1 bin=$2
  pick_port PORT
  local vg=(valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$target.%p")
  case $target in
    nginx) mkdir -p "$TMP/nginx"
      # As bench/run.sh configures it, in one process so callgrind sees all its work.
      NGINX_MASTER=off nginx_conf "$PORT" 1024 16384 >"$TMP/nginx/nginx.conf"
      "${vg[@]}" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" \
      -e "$TMP/nginx/error.log" >"$TMP/$target.log" 2>&1 & ;;
    *) pick_port ADMIN
      RUST_LOG=warn TOKIO_WORKER_THREADS=1 "${vg[@]}" "$bin" --config "$TMP/toolpulse.toml" \
        --upstream "http://127.0.0.1:$UP_PORT" --listen "127.0.0.1:$PORT" \
        --admin-listen "127.0.0.1:$ADMIN" >"$TMP/$target.log" 2>&1 & ;;
  esac
  PROXY_PID=$!
  PIDS+=("$PROXY_PID")
  # valgrind starts slowly: wait for the port for up to a minute.
  for _ in $(seq 600); do
    kill -0 "$PROXY_PID" 2>/dev/null || die "$target exited at start: $(tail -n 5 "$TMP/$target.log")"
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
    sleep 0.1
  done
  die "$target does not listen on $PORT after 60 s"
}

# dump: the instructions since the last dump (callgrind zeroes its counters at each dump).
dump() {
  local files before
  files() { { compgen -G "$TMP/cg.*.$PROXY_PID.*" || true; } | wc -l; }
  before=$(files)
  callgrind_control --dump "$PROXY_PID" >"$TMP/control.log" 2>&1 || die "callgrind_control: $(cat "$TMP/control.log")"
  for _ in $(seq 600); do
    [ "$(files)" -gt "$before" ] && break
    sleep 0.1
  done
  sleep 0.5 # the dump is written whole before it is read
  local file
  file=$(ls -t $(compgen -G "$TMP/cg.*.$PROXY_PID.*") | head -1)
  grep -m1 '^summary:' "$file" | awk '{print $2}'
}

client() { # ARGS...: prints the upstream events of the run
  "$CLIENT" --url "http://127.0.0.1:$PORT/v1/responses" "$@" >"$TMP/client.json" 2>"$TMP/client.err" \
    || die "client failed: $(tail -n 3 "$TMP/client.err")"
  jnum upstream_events "$TMP/client.json"
}

PHASES=(
  "paced|--concurrency 20 --streams 20 --events 100 --pace-us 20000"
  "tools|--concurrency 20 --streams 20 --events 100 --pace-us 20000 --tool-every 10 --tool-delay-us 50000"
  "flood|--concurrency 4 --streams 4 --events 4000"
)

declare -A IR
measure_target() { # TARGET BIN
  local target=$1 bin=$2
  start "$target" "$bin"
  client --concurrency 4 --streams 8 --events 50 >/dev/null # warm-up: connections, buffers
  dump >/dev/null
  local phase args events ir
  for entry in "${PHASES[@]}"; do
    phase=${entry%%|*} args=${entry#*|}
    # shellcheck disable=SC2086
    events=$(client $args)
    ir=$(dump)
    IR[$target,$phase]=$(python3 -c "print(round($ir / $events))")
    log "$target $phase: $ir instructions, $events events"
  done
  stop "$PROXY_PID"
}

TARGETS=(nginx)
measure_target nginx nginx
i=0
for bin in "$@"; do
  i=$((i + 1))
  measure_target "toolpulse-$i" "$bin"
  TARGETS+=("toolpulse-$i")
done

echo "| target | binary | paced | tools | flood |"
echo "|---|---|---|---|---|"
for target in "${TARGETS[@]}"; do
  case $target in nginx) what="nginx $(nginx -v 2>&1 | sed 's/.*nginx\///')" ;; *) n=${target#toolpulse-}; what=${!n} ;; esac
  row="| $target | $what |"
  for phase in paced tools flood; do
    ratio=$(python3 -c "print(f'{${IR[$target,$phase]:-0} / ${IR[nginx,$phase]}:.2f}')")
    row+=" ${IR[$target,$phase]} ($ratio×) |"
  done
  echo "$row"
done
echo
echo "Instructions per upstream event (the ratio to nginx's in brackets)."
