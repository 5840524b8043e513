#!/usr/bin/env bash
# End-to-end load benchmark: one scripted Responses gateway (examples/bench_upstream.rs) reached
# directly, through nginx (proxy_buffering off) and through toolpulse, all in the same run, by
# the load client (examples/bench_client.rs). bench/README.md explains what is measured.
#
#   bash bench/run.sh              # the default run: about 3 minutes of measuring after the build
#   QUICK=1 bash bench/run.sh      # a smoke run: under a minute
#   PHASES=scale bash bench/run.sh # 10,000 streams at once over HTTP/2: about 3 minutes
#
# Options (environment variables):
#   QUICK=1         small phases (a smoke check of the whole pipeline)
#   PHASES="..."    which phases, in order; default "flood paced tools ag_ui rss"; phase ag_ui
#                   runs the tools phase's streams through toolpulse's AG-UI endpoint
#                   ([ag_ui], target "toolpulse-ag-ui": the same process, POST /ag-ui, the run's
#                   AG-UI events read, no latency: they carry no stamps) right after the plain
#                   proxy (/v1/responses), so the two compare in CPU per upstream event;
#                   phase scale (never in the default: PHASES=scale) opens 10,000 streams at once
#                   (QUICK: 1,000) over 100 HTTP/2 connections (h2c, prior knowledge; QUICK: 10)
#                   to each target, a fresh process each (the upstream too), paced one event a
#                   second, tool rounds in one stream of ten, and records memory per open
#                   stream, CPU per event and added latency; it raises `ulimit -n` to the hard
#                   limit and stops if that is below what it needs (streams + 300)
#   PIN=0|1         1 (default with >= 2 CPUs): the proxy under test runs on CPU $PROXY_CPU, the
#                   upstream and the client on CPU $LOAD_CPU, the same for every target
#   PROXY_CPU=1 LOAD_CPU=0
#   TP_WORKERS=N    toolpulse's tokio worker threads (TOKIO_WORKER_THREADS); default: tokio's own
#                   choice, the CPUs the process may run on (1 when pinned)
#   TP_LOG=warn     RUST_LOG of toolpulse (nginx runs with access_log off; `info` adds a log line
#                   per request)
#   OUT=FILE        results file (default bench/results/<date>-<time>[-quick].md)
#   NO_BUILD=1      use the binaries already in target/release
#   TOOLPULSE_BIN=F measure this toolpulse binary (e.g. a build from before a change)
#   KEEP_TMP=1      keep the temp dir (configs, logs, the client's JSON) and print its path
#   OTLP=1          also measure a second toolpulse that exports OpenTelemetry spans to a local
#                   OTLP/HTTP receiver (examples/bench_collector.rs): target "toolpulse-otlp",
#                   verified with the others and measured in the tools phase only (where spans
#                   are made), beside plain toolpulse in the same run
#   COMPANION=1     also measure a toolpulse with profile `openai` (companion items beside the
#                   gateway's function_calls, the default before `hosted`): target
#                   "toolpulse-openai", measured in the tools phase right after plain toolpulse
#                   (profile `hosted`, the default), so the two profiles compare in one run
#   BUS=1           the cost of the progress bus: starts a redis-server (Debian's, on a
#                   free loopback port, no persistence) and two more toolpulse processes, measured
#                   in the tools phase only: toolpulse-mcp (an [mcp] listener: the in-process
#                   registry of open calls) and toolpulse-bus (the same plus [progress] bus on that
#                   Redis), so the bus is their only difference; the report adds their CPU per
#                   event, the ratio and Redis's own CPU. Off (default): the run is unchanged.
#   BUS_ROUNDS=N    with BUS=1: measure the pair N times in the tools phase, alternating which
#                   goes first (mcp, bus; bus, mcp; …), and sum the rounds; default 1
#   REDIS_SERVER=F  the redis-server binary (default: redis-server on PATH, else /usr/bin's)
#
# Every process it starts is stopped on exit (trap); every wait is bounded; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

QUICK=${QUICK:-0}
OTLP=${OTLP:-0}
COMPANION=${COMPANION:-0}
PHASES=${PHASES:-flood paced tools ag_ui rss}
CPUS=$(nproc)
if [ "$CPUS" -ge 2 ]; then PIN=${PIN:-1}; else PIN=0; fi
PROXY_CPU=${PROXY_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
TP_LOG=${TP_LOG:-warn}
BUS=${BUS:-0}
BUS_ROUNDS=${BUS_ROUNDS:-1}
[[ "$BUS_ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "BUS_ROUNDS must be a positive integer" >&2; exit 1; }
STAMP=$(date +%Y-%m-%d-%H%M)
OUT=${OUT:-bench/results/$STAMP$([ "$QUICK" = 1 ] && echo -quick || true).md}
CLIENT_TIMEOUT=600 # seconds, for one client run
CLK_TCK=$(getconf CLK_TCK)

# Phase sizes: concurrency, streams, text deltas per stream, pace (µs), tool round every N
# deltas, tool run time (µs), ramp (ms).
if [ "$QUICK" = 1 ]; then
  FLOOD=(64 256 2000 0 0 0 0)
  PACED=(200 200 100 20000 0 0 1000)
  TOOLS=(200 200 100 20000 50 100000 1000)
  RSS=(1000 1000 12 300000 10 1000000 2000)
  VERIFY=(4 8 400 0 50 0 0)
  SCALE=(1000 10 20 250000 10 500000 2000 10)
else
  FLOOD=(64 1024 4000 0 0 0 0)
  PACED=(200 600 250 20000 0 0 1000)
  TOOLS=(200 600 250 20000 50 100000 1000)
  RSS=(1000 1000 30 300000 10 1000000 2000)
  VERIFY=(4 16 1000 0 50 0 0)
  SCALE=(10000 100 30 1000000 10 1000000 10000 10)
fi
# Phase scale: streams (all open at once), HTTP/2 connections they share, text deltas per
# stream, pace (µs), a tool round every N deltas in one stream of K (the last field), tool run
# time (µs), ramp over which the streams open (ms), K.

if [ "$PIN" = 1 ]; then
  PIN_PROXY=(taskset -c "$PROXY_CPU")
  PIN_LOAD=(taskset -c "$LOAD_CPU")
else
  PIN_PROXY=()
  PIN_LOAD=()
fi

# ---------------------------------------------------------------------------------------------
# Build and tools
if [ "${NO_BUILD:-0}" != 1 ]; then
  log "building (release)"
  cargo build --release --locked >&2
  cargo build --release --locked --examples >&2
fi
TOOLPULSE=${TOOLPULSE_BIN:-target/release/toolpulse}
UPSTREAM=target/release/examples/bench_upstream
CLIENT=target/release/examples/bench_client
COLLECTOR=target/release/examples/bench_collector
for bin in "$TOOLPULSE" "$UPSTREAM" "$CLIENT" $([ "$OTLP" = 1 ] && echo "$COLLECTOR"); do
  [ -x "$bin" ] || die "$bin is missing (run without NO_BUILD=1)"
done

if [ "$BUS" = 1 ]; then
  REDIS_SERVER=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
  [ -x "$REDIS_SERVER" ] || die "BUS=1 needs redis-server (apt-get install redis-server)"
  REDIS_CLI=$(dirname "$REDIS_SERVER")/redis-cli
  [ -x "$REDIS_CLI" ] || REDIS_CLI=$(command -v redis-cli || true)
fi

NGINX=$(command -v nginx || true)
[ -n "$NGINX" ] || NGINX=$([ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx || true)
if [ -z "$NGINX" ]; then
  log "installing nginx (apt-get)"
  # RUNLEVEL=1: the package's postinst must not start a system nginx.
  export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
  timeout 600 apt-get install -y --no-install-recommends nginx-light >&2 ||
    { timeout 600 apt-get update >&2 && timeout 600 apt-get install -y --no-install-recommends nginx >&2; } ||
    die "cannot install nginx"
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
fi

if [[ " $PHASES " == *" scale "* ]]; then
  # Phase scale: the proxy holds a socket per stream to the upstream (HTTP/1.1) and the upstream
  # one per stream too, so every process may need streams + a few hundred descriptors.
  SCALE_FDS=$((SCALE[0] + 300))
  HARD_FDS=$(ulimit -Hn)
  [ "$HARD_FDS" = unlimited ] && HARD_FDS=$(cat /proc/sys/fs/nr_open)
  ulimit -n "$HARD_FDS" 2>/dev/null || true
  log "phase scale: ulimit -n raised to $(ulimit -n) (the hard limit: $(ulimit -Hn))"
  [ "$(ulimit -n)" -ge "$SCALE_FDS" ] ||
    die "phase scale needs ulimit -n >= $SCALE_FDS (${SCALE[0]} streams + 300) in every process, but the hard limit is $(ulimit -Hn): raise it (e.g. docker --ulimit nofile=$SCALE_FDS, or limits.conf) or run QUICK=1"
else
  ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)" || true
  [ "$(ulimit -n)" -ge 4500 ] || log "warning: ulimit -n is $(ulimit -n); the 1,000-stream phase needs ~4,500"
fi

# ---------------------------------------------------------------------------------------------
# Processes, cleanup
TMP=$(mktemp -d /tmp/toolpulse-bench.XXXXXX)
UP_PID="" NGX_PID="" COL_PID="" REDIS_PID=""
# The toolpulse targets, a process each, pinned like nginx: toolpulse always; toolpulse-otlp
# with OTLP=1; toolpulse-mcp and toolpulse-bus with BUS=1. Their pids and ports by target name;
# each runs the benchmark's config plus its own section (target_toml).
TP_TARGETS=(toolpulse)
[ "$OTLP" = 1 ] && TP_TARGETS+=(toolpulse-otlp)
[ "$COMPANION" = 1 ] && TP_TARGETS+=(toolpulse-openai)
[ "$BUS" = 1 ] && TP_TARGETS+=(toolpulse-mcp toolpulse-bus)
declare -A TP_PID=() TP_PORT=() ADMIN_PORT=() MCP_PORT=()

cleanup() {
  local status=$? name
  trap - EXIT INT TERM
  for name in "${TP_TARGETS[@]}"; do stop "${TP_PID[$name]:-}"; done
  stop "$COL_PID"
  stop "$NGX_PID"
  stop "$UP_PID"
  stop "$REDIS_PID"
  if [ "${KEEP_TMP:-0}" = 1 ]; then log "kept $TMP"; else rm -rf "$TMP"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pick_port UP_PORT
pick_port NGX_PORT
pick_port NGX_H2_PORT # phase scale's nginx only
for name in "${TP_TARGETS[@]}"; do
  pick_port port && TP_PORT[$name]=$port
  pick_port port && ADMIN_PORT[$name]=$port
done
[ "$OTLP" = 1 ] && pick_port COL_PORT
if [ "$BUS" = 1 ]; then
  pick_port REDIS_PORT
  pick_port port && MCP_PORT[toolpulse-mcp]=$port
  pick_port port && MCP_PORT[toolpulse-bus]=$port
fi

start_upstream() {
  "${PIN_LOAD[@]}" "$UPSTREAM" --listen "127.0.0.1:$UP_PORT" --exit-after-s 3600 \
    >"$TMP/upstream.log" 2>&1 &
  UP_PID=$!
  wait_port "$UP_PORT" "$UP_PID" upstream
}

mkdir -p "$TMP/nginx"
# The default phases: 8192 connections, no HTTP/2; phase scale makes its own (below).
nginx_conf "$NGX_PORT" 8192 16384 >"$TMP/nginx/nginx.conf"

# start_nginx [CONFIG]: nginx with $TMP/nginx/nginx.conf (or CONFIG).
start_nginx() {
  "${PIN_PROXY[@]}" "$NGINX" -p "$TMP/nginx" -c "${1:-$TMP/nginx/nginx.conf}" -e "$TMP/nginx/error.log" \
    >"$TMP/nginx.log" 2>&1 &
  NGX_PID=$!
  wait_port "$NGX_PORT" "$NGX_PID" nginx
}

cat >"$TMP/toolpulse.toml" <<'EOF'
# The benchmark's tools: web_search and file_search are built in; mcp__* needs a rule;
# get_weather stays a plain function (nothing injected).
[[tools]]
match = ["mcp__*"]
kind = "mcp"

[failure]
output_patterns = ["^search failed: "]

# The AG-UI phase's endpoint (POST /ag-ui), on the same process.
[ag_ui]
model = "bench"
EOF

# target_toml NAME: what the toolpulse target NAME adds to the benchmark's config.
target_toml() {
  case $1 in
    toolpulse-otlp)
      printf '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:%s"\nservice_name = "toolpulse-bench"\n' \
        "$COL_PORT"
      ;;
    toolpulse-openai) printf '\n[events]\nprofiles = ["openai"]\n' ;;
    # The MCP listener (no servers): every stream registers its open calls, in process...
    toolpulse-mcp) printf '\n[mcp]\nlisten = "127.0.0.1:%s"\n' "${MCP_PORT[$1]}" ;;
    # ... or in the Redis too.
    toolpulse-bus)
      printf '\n[mcp]\nlisten = "127.0.0.1:%s"\n\n[progress]\nbus = "redis://127.0.0.1:%s/0"\n' \
        "${MCP_PORT[$1]}" "$REDIS_PORT"
      ;;
  esac
}

# start_toolpulse [NAME [CONFIG]]: the toolpulse target NAME (default toolpulse) with
# $TMP/NAME.toml (or CONFIG).
start_toolpulse() {
  local name=${1:-toolpulse} config=${2:-} env=(RUST_LOG="$TP_LOG")
  if [ -z "$config" ]; then
    config=$TMP/$name.toml
    [ "$name" = toolpulse ] || { cat "$TMP/toolpulse.toml" && target_toml "$name"; } >"$config"
  fi
  [ -n "${TP_WORKERS:-}" ] && env+=(TOKIO_WORKER_THREADS="$TP_WORKERS")
  "${PIN_PROXY[@]}" env "${env[@]}" "$TOOLPULSE" --config "$config" \
    --upstream "http://127.0.0.1:$UP_PORT" --listen "127.0.0.1:${TP_PORT[$name]}" \
    --admin-listen "127.0.0.1:${ADMIN_PORT[$name]}" >"$TMP/$name.log" 2>&1 &
  TP_PID[$name]=$!
  wait_port "${TP_PORT[$name]}" "${TP_PID[$name]}" "$name"
}

# The span receiver of toolpulse-otlp, on the load CPU (like the upstream, so decoding the spans
# is not counted as the proxy's work).
start_collector() {
  "${PIN_LOAD[@]}" "$COLLECTOR" --listen "127.0.0.1:$COL_PORT" --exit-after-s 3600 \
    >"$TMP/collector.log" 2>&1 &
  COL_PID=$!
  wait_port "$COL_PORT" "$COL_PID" collector
}

# Redis for BUS=1: on the load CPU (its CPU is reported apart, not as the proxy's), no
# persistence, loopback only.
start_redis() {
  "${PIN_LOAD[@]}" "$REDIS_SERVER" --bind 127.0.0.1 --port "$REDIS_PORT" --save '' \
    --appendonly no --dir "$TMP" --daemonize no >"$TMP/redis.log" 2>&1 &
  REDIS_PID=$!
  wait_port "$REDIS_PORT" "$REDIS_PID" redis
}

# redis_calls COMMAND: how many times Redis has run COMMAND (INFO commandstats; 0 before the
# first), "-" without redis-cli.
redis_calls() {
  [ -n "$REDIS_CLI" ] || { echo "-"; return 0; }
  "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" info commandstats 2>/dev/null | tr -d '\r' |
    awk -F'[:=,]' -v f="cmdstat_$1" '$1 == f && $2 == "calls" { n = $3 } END { print n + 0 }'
}

# http_get PORT PATH: a loopback GET's body (bash's /dev/tcp: no curl needed).
http_get() {
  local response
  response=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\nHost: x\r\n\r\n" "$2" >&3 && cat <&3' _ "$1" "$2" 2>/dev/null) || return 0
  printf '%s\n' "${response#*$'\r\n\r\n'}"
}

# tp_metric NAME METRIC: a metric of a toolpulse target (summed over its label sets), "-" if none.
tp_metric() {
  http_get "${ADMIN_PORT[$1]}" /metrics |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2; found = 1 } END { print found ? s : "-" }'
}

# ---------------------------------------------------------------------------------------------
# Measuring

# Resets the peak RSS (VmHWM) of these processes (Linux >= 4.0, our own processes).
reset_hwm() {
  local p
  for p in "$@"; do echo 5 >"/proc/$p/clear_refs" 2>/dev/null || HWM_NOTE=" (could not reset VmHWM: peak since start)"; done
}
HWM_NOTE=""

target_url() {
  case $1 in
    direct) echo "http://127.0.0.1:$UP_PORT/v1/responses" ;;
    toolpulse-ag-ui) echo "http://127.0.0.1:${TP_PORT[toolpulse]}/ag-ui" ;;
    nginx) echo "http://127.0.0.1:$NGX_PORT/v1/responses" ;;
    *) echo "http://127.0.0.1:${TP_PORT[$1]}/v1/responses" ;;
  esac
}

target_pids() {
  case $1 in
    direct) ;;
    nginx) echo "$NGX_PID" && descendants "$NGX_PID" ;;
    toolpulse-ag-ui) echo "${TP_PID[toolpulse]}" ;;
    *) echo "${TP_PID[$1]}" ;;
  esac
}

# target_args TARGET: the client's flags a target needs.
target_args() {
  [ "$1" != toolpulse-ag-ui ] || echo --ag-ui
}

# client_args SIZES...: the client's flags for a phase's sizes.
client_args() {
  echo --concurrency "$1" --streams "$2" --events "$3" --pace-us "$4" --tool-every "$5" \
    --tool-delay-us "$6" --ramp-ms "$7"
}


ROWS=$TMP/rows.tsv
: >"$ROWS"
FAILURES=0

# run_client NAME ARGS...: the client on the load CPU, its JSON in $TMP/NAME.json.
run_client() {
  local name=$1 rc=0
  shift
  "${PIN_LOAD[@]}" timeout "$CLIENT_TIMEOUT" "$CLIENT" "$@" >"$TMP/$name.json" 2>"$TMP/$name.err" || rc=$?
  if [ "$rc" != 0 ]; then
    FAILURES=$((FAILURES + 1))
    log "  $name: client exit $rc: $(jstr first_error "$TMP/$name.json") $(tail -n 3 "$TMP/$name.err")"
  fi
  return 0
}

# measure PHASE TARGET SIZES...: one client run, with the proxy's CPU time and peak RSS. For
# the bus targets, Redis's CPU and commands over the run too ($BUS_ROWS); $ROUND tags their files.
BUS_ROWS=$TMP/bus.tsv
: >"$BUS_ROWS"
ROUND=""
measure() {
  local phase=$1 target=$2 pids c0 c1 u0 u1 t0 t1 hwm threads json r0 r1 n0 n1 m0 m1 s0 s1
  local run=$phase-$target${ROUND:+-$ROUND} redis=""
  shift 2
  case $target in toolpulse-mcp | toolpulse-bus) redis=1 ;; esac
  mapfile -t pids < <(target_pids "$target")
  reset_hwm "${pids[@]}"
  if [ -n "$redis" ]; then r0=$(ticks "$REDIS_PID") n0=$(redis_calls evalsha); fi
  c0=$(ticks "${pids[@]}")
  u0=$(ticks "$UP_PID")
  read -r m0 s0 <<<"$(machine_ticks)"
  t0=$(date +%s%N)
  run_client "$run" --url "$(target_url "$target")" $(target_args "$target") $(client_args "$@")
  t1=$(date +%s%N)
  c1=$(ticks "${pids[@]}")
  u1=$(ticks "$UP_PID")
  read -r m1 s1 <<<"$(machine_ticks)"
  hwm=$(status_kib VmHWM "${pids[@]}")
  threads=$([ -n "${TP_PID[$target]:-}" ] && status_kib Threads "${TP_PID[$target]}" || echo "-")
  json=$TMP/$run.json
  if [ -n "$redis" ]; then
    r1=$(ticks "$REDIS_PID") n1=$(redis_calls evalsha)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$phase" "$target" "${ROUND:-1}" "$((c1 - c0))" \
      "$(jnum upstream_events "$json")" "$((r1 - r0))" \
      "$([ "$n0" = - ] && echo - || echo $((n1 - n0)))" >>"$BUS_ROWS"
  fi
  printf '%s\t' "$phase" "$target" "$(jnum streams_ok "$json")" "$(jnum streams_failed "$json")" \
    "$(jnum upstream_events "$json")" "$(jnum injected_events "$json")" \
    "$(jnum events_per_s "$json")" "$(jnum latency_p50_us "$json")" \
    "$(jnum latency_p99_us "$json")" "$(jnum latency_p999_us "$json")" \
    "$(jnum latency_max_us "$json")" "$(jnum client_cpu_s "$json")" \
    "$((c1 - c0))" "$((u1 - u0))" "$((t1 - t0))" "$hwm" "$threads" "$((m1 - m0))" \
    "$((s1 - s0))" >>"$ROWS"
  echo >>"$ROWS"
  log "  $phase $target: $(jnum events_per_s "$json") events/s, p50 $(jnum latency_p50_us "$json") µs, p99 $(jnum latency_p99_us "$json") µs, proxy CPU $((c1 - c0)) ticks"
}

# rss_phase TARGET: a fresh proxy, 1,000 slowly paced streams, RSS sampled while they are open.
RSS_ROWS=$TMP/rss.tsv
: >"$RSS_ROWS"
rss_phase() {
  local target=$1 pids base peak=0 rss hwm client i active="-"
  case $target in
    nginx) stop "$NGX_PID" && start_nginx ;;
    toolpulse) stop "${TP_PID[toolpulse]}" && start_toolpulse toolpulse ;;
  esac
  sleep 0.5
  mapfile -t pids < <(target_pids "$target")
  base=$(status_kib VmRSS "${pids[@]}")
  reset_hwm "${pids[@]}"
  "${PIN_LOAD[@]}" timeout "$CLIENT_TIMEOUT" "$CLIENT" --url "$(target_url "$target")" \
    $(client_args "${RSS[@]}") >"$TMP/rss-$target.json" 2>"$TMP/rss-$target.err" &
  client=$!
  for i in $(seq $((CLIENT_TIMEOUT * 4))); do
    kill -0 "$client" 2>/dev/null || break
    rss=$(status_kib VmRSS "${pids[@]}")
    [ "$rss" -gt "$peak" ] && peak=$rss
    if [ "$target" = toolpulse ] && [ "$i" = $(((RSS[6] + 2000) / 250)) ]; then
      active=$(tp_metric toolpulse toolpulse_streams_active)
    fi
    sleep 0.25
  done
  wait "$client" || {
    FAILURES=$((FAILURES + 1))
    log "  rss $target: client failed: $(jstr first_error "$TMP/rss-$target.json")"
  }
  hwm=$(status_kib VmHWM "${pids[@]}")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$base" "$peak" "$hwm" \
    "$(jnum streams_ok "$TMP/rss-$target.json")" "$(jnum streams_failed "$TMP/rss-$target.json")" \
    "${active:--}" >>"$RSS_ROWS"
  log "  rss $target: base $base KiB, peak $peak KiB, VmHWM $hwm KiB, streams_active mid-run: $active"
}

# Phase scale: SCALE[0] streams open at once over SCALE[1] HTTP/2 connections (h2c with prior
# knowledge), one target at a time, each with a fresh upstream and a fresh proxy. Over
# HTTP/1.1 a proxy would hold 10,000 client sockets and 10,000 upstream ones, more than the
# 20,000 descriptors a process may have here; over HTTP/2 it holds SCALE[1] client sockets.
SCALE_ROWS=$TMP/scale.tsv
: >"$SCALE_ROWS"
# What phase scale's toolpulse adds to the benchmark's config (quoted in the report): the limits
# the phase depends on, at their defaults (src/config/proxy.rs, src/config/clients.rs): its
# SCALE[1] client connections are far below max_connections, and each carries as many streams as
# max_streams_per_connection allows.
SCALE_TOML='[proxy]
max_connections = 4096
[clients]
max_streams_per_connection = 100'

# scale_shape: the phase in words.
scale_shape() {
  echo "${SCALE[0]} streams at once over ${SCALE[1]} HTTP/2 connections, opened over $((SCALE[6] / 1000)) s;" \
    "${SCALE[2]} text deltas, one event every $((SCALE[3] / 1000)) ms; a tool round every ${SCALE[4]}" \
    "deltas in one stream of ${SCALE[7]} (tools run $((SCALE[5] / 1000)) ms); up to $(scale_longest_s) s a stream"
}

# scale_longest_s: how long the longest stream of the phase lasts (s, rounded up): a stream
# with tool rounds, every event paced, and the tools' run time.
scale_longest_s() {
  local rounds=0 events
  [ "${SCALE[4]}" -gt 0 ] && rounds=$(((SCALE[2] - 1) / SCALE[4]))
  events=$((2 + SCALE[2] + rounds * 8))
  echo $(((events * SCALE[3] + rounds * SCALE[5]) / 1000000 + 1))
}

# scale_phase TARGET: the phase through TARGET (direct, nginx, toolpulse), RSS sampled every
# 0.25 s and, every second, the sockets open to the upstream (ss) and toolpulse's
# toolpulse_streams_active; then a few streams verified over HTTP/2 on the same processes.
scale_phase() {
  local target=$1 url pids=() base=- peak=- hwm=- rss client i n active=- socks=0 limit
  local json=$TMP/scale-$target.json c0 c1 u0 u1 t0 t1 longest
  longest=$(scale_longest_s)
  limit=$((SCALE[6] / 1000 + longest + 60))
  stop "$UP_PID" && start_upstream
  case $target in
    direct) url="http://127.0.0.1:$UP_PORT/v1/responses" ;;
    nginx)
      stop "$NGX_PID" && start_nginx "$TMP/nginx/nginx-scale.conf"
      wait_port "$NGX_H2_PORT" "$NGX_PID" nginx
      url="http://127.0.0.1:$NGX_H2_PORT/v1/responses"
      ;;
    toolpulse)
      stop "${TP_PID[toolpulse]}" && start_toolpulse toolpulse "$TMP/toolpulse-scale.toml"
      url=$(target_url toolpulse)
      ;;
  esac
  sleep 0.5
  mapfile -t pids < <(target_pids "$target")
  if [ "${#pids[@]}" -gt 0 ]; then
    base=$(status_kib VmRSS "${pids[@]}") peak=$base
    reset_hwm "${pids[@]}"
  fi
  c0=$(ticks "${pids[@]}") u0=$(ticks "$UP_PID") t0=$(date +%s%N)
  "${PIN_LOAD[@]}" timeout "$limit" "$CLIENT" --url "$url" --http2-connections "${SCALE[1]}" \
    --concurrency "${SCALE[0]}" --streams "${SCALE[0]}" --events "${SCALE[2]}" \
    --pace-us "${SCALE[3]}" --tool-every "${SCALE[4]}" --tool-stream-every "${SCALE[7]}" \
    --tool-delay-us "${SCALE[5]}" --ramp-ms "${SCALE[6]}" --stream-timeout-s "$((longest + 60))" \
    >"$json" 2>"$TMP/scale-$target.err" &
  client=$!
  for i in $(seq $((limit * 4))); do
    kill -0 "$client" 2>/dev/null || break
    if [ "${#pids[@]}" -gt 0 ]; then
      rss=$(status_kib VmRSS "${pids[@]}")
      [ "$rss" -gt "$peak" ] && peak=$rss
    fi
    if ((i % 4 == 0)); then
      n=$("${PIN_LOAD[@]}" ss -Htn state established "( dport = :$UP_PORT )" 2>/dev/null | wc -l)
      [ "$n" -gt "$socks" ] && socks=$n
      if [ "$target" = toolpulse ]; then
        n=$(tp_metric toolpulse toolpulse_streams_active)
        [ "$n" != - ] && { [ "$active" = - ] || [ "$n" -gt "$active" ]; } && active=$n
      fi
    fi
    sleep 0.25
  done
  wait "$client" || {
    FAILURES=$((FAILURES + 1))
    log "  scale $target: client failed: $(jstr first_error "$json") $(tail -n 3 "$TMP/scale-$target.err")"
  }
  t1=$(date +%s%N) c1=$(ticks "${pids[@]}") u1=$(ticks "$UP_PID")
  [ "${#pids[@]}" -gt 0 ] && hwm=$(status_kib VmHWM "${pids[@]}")
  # The bytes through this target over HTTP/2, checked whole (after the measuring: a fresh
  # process's base RSS is measured before any stream).
  run_client "scale-verify-$target" --url "$url" --http2-connections 2 --verify \
    --tool-stream-every 2 $(client_args "${VERIFY[@]}")
  printf '%s\t' "$target" "$base" "$peak" "$hwm" "$(jnum streams_ok "$json")" \
    "$(jnum streams_failed "$json")" "$(jnum max_open "$json")" "$(jnum all_open_s "$json")" \
    "$active" "$socks" "$(jnum upstream_events "$json")" "$(jnum events_per_s "$json")" \
    "$(jnum latency_p50_us "$json")" "$(jnum latency_p99_us "$json")" \
    "$(jnum latency_p999_us "$json")" "$(jnum client_cpu_s "$json")" "$((c1 - c0))" \
    "$((u1 - u0))" "$((t1 - t0))" "$(jnum http2_connects "$json")" "$(jnum tool_streams "$json")" \
    "$(jnum verified "$TMP/scale-verify-$target.json")" >>"$SCALE_ROWS"
  echo >>"$SCALE_ROWS"
  log "  scale $target: $(jnum streams_ok "$json") ok, $(jnum streams_failed "$json") failed, $(jnum max_open "$json") open at once (all for $(jnum all_open_s "$json") s), upstream sockets $socks, streams_active $active; RSS base $base KiB, peak $peak KiB; proxy CPU $((c1 - c0)) ticks; p50 $(jnum latency_p50_us "$json") µs, p99 $(jnum latency_p99_us "$json") µs; $(jnum verified "$TMP/scale-verify-$target.json") verified over HTTP/2"
  if [ "$target" = toolpulse ]; then
    cp "$TMP/toolpulse.log" "$TMP/scale-toolpulse.log"
    n=$(grep -c -E 'WARN|ERROR' "$TMP/scale-toolpulse.log" || true)
    [ "$n" = 0 ] || log "  scale toolpulse: $n warnings/errors in its log, the first: $(grep -m 3 -E 'WARN|ERROR' "$TMP/scale-toolpulse.log")"
  fi
}

# scale: the phase through the three targets, then the usual processes back.
scale() {
  nginx_conf "$NGX_PORT" "$((SCALE[0] + 1024 > 8192 ? SCALE[0] + 1024 : 8192))" 16384 "127.0.0.1:$NGX_H2_PORT" \
    >"$TMP/nginx/nginx-scale.conf"
  { cat "$TMP/toolpulse.toml" && printf '\n# Phase scale.\n%s\n' "$SCALE_TOML"; } >"$TMP/toolpulse-scale.toml"
  log "phase scale: $(scale_shape)"
  for target in direct nginx toolpulse; do
    scale_phase "$target"
  done
  stop "$UP_PID" && start_upstream
  stop "$NGX_PID" && start_nginx
  stop "${TP_PID[toolpulse]}" && start_toolpulse toolpulse
}

# ---------------------------------------------------------------------------------------------
# The run
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
# The tree measured, read now: at the end the results file being written would count as a change.
GIT_HEAD=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
GIT_DIRTY=$([ -z "$(git status --porcelain 2>/dev/null)" ] || echo " (with uncommitted changes)")
log "upstream :$UP_PORT, nginx :$NGX_PORT, toolpulse :${TP_PORT[toolpulse]} (admin :${ADMIN_PORT[toolpulse]}); pinning: $PIN"
start_upstream
start_nginx
[ "$OTLP" = 1 ] && start_collector
if [ "$BUS" = 1 ]; then
  start_redis
  log "BUS=1: redis :$REDIS_PORT; toolpulse-mcp :${TP_PORT[toolpulse-mcp]} (mcp :${MCP_PORT[toolpulse-mcp]}), toolpulse-bus :${TP_PORT[toolpulse-bus]} (mcp :${MCP_PORT[toolpulse-bus]})"
fi
for name in "${TP_TARGETS[@]}"; do start_toolpulse "$name"; done

log "verify: every target's bodies against the regenerated upstream stream (invariants::check)"
VERIFY_TARGETS=(direct nginx "${TP_TARGETS[@]}")
[[ " $PHASES " == *" ag_ui "* ]] && VERIFY_TARGETS+=(toolpulse-ag-ui)
for target in "${VERIFY_TARGETS[@]}"; do
  run_client "verify-$target" --url "$(target_url "$target")" --verify $(target_args "$target") \
    $(client_args "${VERIFY[@]}")
  log "  $target: $(jnum verified "$TMP/verify-$target.json") streams verified, $(jnum injected_events "$TMP/verify-$target.json") events injected"
done

for phase in $PHASES; do
  case $phase in
    flood) sizes=("${FLOOD[@]}") ;;
    paced) sizes=("${PACED[@]}") ;;
    tools) sizes=("${TOOLS[@]}") ;;
    ag_ui)
      log "phase ag_ui: $(client_args "${TOOLS[@]}"), through /v1/responses and /ag-ui"
      for target in direct toolpulse toolpulse-ag-ui; do
        measure ag_ui "$target" "${TOOLS[@]}"
      done
      continue
      ;;
    rss)
      log "phase rss: ${RSS[0]} streams at once, one event every $((RSS[3] / 1000)) ms"
      rss_phase nginx
      rss_phase toolpulse
      continue
      ;;
    scale)
      scale
      continue
      ;;
    *) die "unknown phase $phase" ;;
  esac
  log "phase $phase: $(client_args "${sizes[@]}")"
  for target in direct nginx toolpulse; do
    measure "$phase" "$target" "${sizes[@]}"
  done
  if [ "$OTLP" = 1 ] && [ "$phase" = tools ]; then
    measure "$phase" toolpulse-otlp "${sizes[@]}"
  fi
  if [ "$COMPANION" = 1 ] && [ "$phase" = tools ]; then
    measure "$phase" toolpulse-openai "${sizes[@]}"
  fi
  if [ "$BUS" = 1 ] && [ "$phase" = tools ]; then
    for ((round = 1; round <= BUS_ROUNDS; round++)); do
      ROUND=$([ "$BUS_ROUNDS" -gt 1 ] && echo "$round" || true)
      if ((round % 2)); then pair=(toolpulse-mcp toolpulse-bus); else pair=(toolpulse-bus toolpulse-mcp); fi
      for target in "${pair[@]}"; do
        measure "$phase" "$target" "${sizes[@]}"
      done
    done
    ROUND=""
    BUS_UP=$(tp_metric toolpulse-bus toolpulse_progress_bus_up)
    BUS_ERRORS=$(tp_metric toolpulse-bus toolpulse_progress_bus_errors_total)
    # A counter with no series yet: none counted (when the metrics could be read at all).
    if [ "$BUS_ERRORS" = - ] && [ "$BUS_UP" != - ]; then BUS_ERRORS=0; fi
    REDIS_KEYS=$([ -n "$REDIS_CLI" ] && "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" dbsize || echo "-")
    log "  bus: toolpulse_progress_bus_up $BUS_UP, bus errors $BUS_ERRORS, keys left in Redis $REDIS_KEYS"
  fi
done

# What became of the spans: toolpulse's own counters and what the receiver decoded.
OTLP_SPANS=""
if [ "$OTLP" = 1 ]; then
  sleep 1 # the export task's last batch (it waits up to 0.5 s to fill one)
  OTLP_SPANS=$(http_get "${ADMIN_PORT[toolpulse-otlp]}" /metrics |
    awk '/^toolpulse_telemetry_(spans|exports)_total/ { printf "%s%s", sep, $0; sep = "; " }')
  OTLP_RECEIVED=$(http_get "$COL_PORT" /count)
  log "otlp: $OTLP_SPANS; the receiver decoded $OTLP_RECEIVED spans"
fi

TP_THREADS=$(status_kib Threads "${TP_PID[toolpulse]}")
TP_WORKERS_SHOWN=${TP_WORKERS:-$("${PIN_PROXY[@]}" nproc) (the CPUs available to the process; 1 = a current-thread runtime)}

# ---------------------------------------------------------------------------------------------
# The report
report() {
  cat <<EOF
# toolpulse end-to-end benchmark, $(date '+%Y-%m-%d %H:%M %Z')

- command: \`$([ "$QUICK" = 1 ] && echo "QUICK=1 ")$([ "$OTLP" = 1 ] && echo "OTLP=1 ")$([ "$COMPANION" = 1 ] && echo "COMPANION=1 ")$([ "$BUS" = 1 ] && echo "BUS=1 ")$([ "$BUS_ROUNDS" != 1 ] && echo "BUS_ROUNDS=$BUS_ROUNDS ")bash bench/run.sh\`$([ "$PHASES" != "flood paced tools ag_ui rss" ] && echo " (PHASES=\"$PHASES\")")
- machine: $CPUS CPUs ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r); load average at start: $LOADAVG, at the end: $(cut -d' ' -f1-3 /proc/loadavg)
- toolpulse $GIT_HEAD$GIT_DIRTY, one process, RUST_LOG=$TP_LOG, tokio worker threads: $TP_WORKERS_SHOWN; $TP_THREADS threads in all at the end
- nginx $("$NGINX" -v 2>&1 | sed 's|.*/||'), one worker, proxy_buffering off, keep-alive HTTP/1.1 upstream, access_log off
- pinning: $([ "$PIN" = 1 ] && echo "proxy on CPU $PROXY_CPU, upstream + client on CPU $LOAD_CPU (every target alike)" || echo "none")
- phases (concurrency × streams × text deltas; pace; tool round every N deltas, tool time):
  flood ${FLOOD[0]} × ${FLOOD[1]} × ${FLOOD[2]}, unpaced; paced ${PACED[0]} × ${PACED[1]} × ${PACED[2]}, one event per write every $((PACED[3] / 1000)) ms;
  tools ${TOOLS[0]} × ${TOOLS[1]} × ${TOOLS[2]}, every $((TOOLS[3] / 1000)) ms, a tool round every ${TOOLS[4]} deltas, tools run $((TOOLS[5] / 1000)) ms

Latency: from the upstream's CLOCK_MONOTONIC stamp on the event to its arrival at the client
(µs); "added" is the target's percentile minus direct's. CPU µs/event: the proxy's utime+stime
(its whole process tree) over the phase divided by the upstream events. CPU %: of one core over
the phase, for the proxy and for upstream + client together (the load generator). Others' CPU
%: of one core, what the machine ran during the phase that was none of these (other processes,
kernel threads) plus the time the hypervisor gave other guests (steal), from /proc/stat: under
5 % in every phase is a quiet run. Peak RSS: VmHWM of the proxy's processes, reset at the start
of the phase$HWM_NOTE.
EOF
  # No table when no phase filled it (PHASES=rss, PHASES=scale).
  [ ! -s "$ROWS" ] || cat <<EOF

| phase | target | streams ok/failed | events/s | p50 µs | p99 µs | p99.9 µs | added p50 | added p99 | CPU µs/event | proxy CPU % | load-gen CPU % | others' CPU % | peak RSS MiB |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
  awk -F'\t' -v tck="$CLK_TCK" '
    function f(x, d) { return x == "" ? "-" : sprintf("%." d "f", x) }
    function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
    {
      phase = $1; target = $2; wall = $15 / 1e9
      if (target == "direct") { d50[phase] = $8; d99[phase] = $9 }
      a50 = target == "direct" ? "" : $8 - d50[phase]
      a99 = target == "direct" ? "" : $9 - d99[phase]
      # An AG-UI run carries no stamps: no latency.
      if (target == "toolpulse-ag-ui") { $8 = ""; $9 = ""; $10 = ""; a50 = ""; a99 = "" }
      cpu = target == "direct" ? "" : $13 / tck * 1e6 / ($5 > 0 ? $5 : 1)
      pcpu = target == "direct" ? "" : $13 / tck / wall * 100
      lcpu = ($12 + $14 / tck) / wall * 100
      # Busy time on the machine less that of the proxy, the upstream and the client; plus steal.
      others = (($18 - $13 - $14) / tck - $12 + $19 / tck) / wall * 100
      if (others < 0) others = 0
      if (others > loudest) loudest = others
      rss = target == "direct" ? "" : $16 / 1024
      printf "| %s | %s | %s/%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
        phase, target, $3, $4, f($7, 0), f($8, 0), f($9, 0), f($10, 0), f(a50, 0), f(a99, 0),
        f(cpu, 2), f(pcpu, 0), f(lcpu, 0), f(others, 1), f(rss, 1)
      if (target == "nginx") { nc[phase] = cpu; n50[phase] = a50; n99[phase] = a99; nr[phase] = rss; ne[phase] = $7 }
      if (target == "toolpulse-ag-ui") { gc[phase] = cpu; ge[phase] = $7; grss[phase] = rss; gorder[++g] = phase }
      if (target == "toolpulse") { tc[phase] = cpu; t50[phase] = a50; t99[phase] = a99; tr[phase] = rss; te[phase] = $7; order[++n] = phase; inj[phase] = $6 }
      if (target == "toolpulse-otlp") { oc[phase] = cpu; o50[phase] = a50; o99[phase] = a99; orss[phase] = rss; oe[phase] = $7; oorder[++m] = phase }
      if (target == "toolpulse-openai") { cc[phase] = cpu; c50[phase] = a50; c99[phase] = a99; crss[phase] = rss; ce[phase] = $7; corder[++q] = phase }
    }
    END {
      if (NR > 0) printf "\nQuiet: %s (the most CPU others took in one phase: %.1f %% of a core; quiet is under 5 %%).\n", (loudest < 5 ? "yes" : "no"), loudest
      for (i = 1; i <= n; i++) if (order[i] in nc) with_nginx++
      if (with_nginx) {
        print ""
        print "toolpulse / nginx (added latency: toolpulse − nginx in µs, since nginx adds almost nothing):"
        print ""
        print "| phase | CPU µs/event | added p50 | added p99 | peak RSS | events/s | events injected |"
        print "|---|---|---|---|---|---|---|"
      }
      for (i = 1; i <= n; i++) {
        p = order[i]
        if (!(p in nc)) continue # a phase without nginx (ag_ui)
        printf "| %s | %s× | %+.0f µs | %+.0f µs | %s× | %s× | %s |\n", p,
          ratio(tc[p], nc[p]), t50[p] - n50[p], t99[p] - n99[p], ratio(tr[p], nr[p]),
          ratio(te[p], ne[p]), inj[p]
      }
      if (g > 0) {
        print ""
        print "toolpulse through its AG-UI endpoint (/ag-ui) / the same process as a proxy (/v1/responses) (same run, same phase):"
        print ""
        print "| phase | CPU µs/event /v1/responses | CPU µs/event /ag-ui | ratio | peak RSS | events/s |"
        print "|---|---|---|---|---|---|"
        for (i = 1; i <= g; i++) {
          p = gorder[i]
          printf "| %s | %.2f | %.2f | %s× | %s× | %s× |\n", p, tc[p], gc[p], ratio(gc[p], tc[p]),
            ratio(grss[p], tr[p]), ratio(ge[p], te[p])
        }
      }
      if (q > 0) {
        print ""
        print "toolpulse (profile hosted, the default) / toolpulse-openai (profile openai, companions) (COMPANION=1; same run, same phase):"
        print ""
        print "| phase | CPU µs/event | added p50 | added p99 | peak RSS | events/s |"
        print "|---|---|---|---|---|---|"
        for (i = 1; i <= q; i++) {
          p = corder[i]
          printf "| %s | %s× | %+.0f µs | %+.0f µs | %s× | %s× |\n", p,
            ratio(tc[p], cc[p]), t50[p] - c50[p], t99[p] - c99[p], ratio(tr[p], crss[p]),
            ratio(te[p], ce[p])
        }
      }
      if (m > 0) {
        print ""
        print "toolpulse with OpenTelemetry export / toolpulse without (OTLP=1; same run, same phase):"
        print ""
        print "| phase | CPU µs/event | added p50 | added p99 | peak RSS | events/s |"
        print "|---|---|---|---|---|---|"
        for (i = 1; i <= m; i++) {
          p = oorder[i]
          printf "| %s | %s× | %+.0f µs | %+.0f µs | %s× | %s× |\n", p,
            ratio(oc[p], tc[p]), o50[p] - t50[p], o99[p] - t99[p], ratio(orss[p], tr[p]),
            ratio(oe[p], te[p])
        }
      }
    }' "$ROWS"
  if [ -n "$OTLP_SPANS" ]; then
    echo
    echo "Spans (toolpulse-otlp's /metrics at the end): $OTLP_SPANS; the receiver decoded ${OTLP_RECEIVED:-?} spans."
  fi
  if [ "$BUS" = 1 ] && [ -s "$BUS_ROWS" ]; then
    cat <<EOF

The progress bus (BUS=1), tools phase: toolpulse-mcp has an [mcp] listener, so every
stream registers its open calls in the in-process registry; toolpulse-bus is the same with
[progress] bus on a redis-server (v$("$REDIS_SERVER" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'), no persistence, on the load CPU), which mirrors
each call's opening and closing into Redis. $BUS_ROUNDS round(s), alternating which goes first,
summed. Redis CPU: redis-server's utime+stime over the target's run, per upstream event; scripts
run: the EVALSHA calls Redis ran over that run (a registration or a removal each).

| target | rounds | upstream events | CPU µs/event | Redis CPU µs/event | scripts run |
|---|---|---|---|---|---|
EOF
    awk -F'\t' -v tck="$CLK_TCK" -v up="$BUS_UP" -v errors="$BUS_ERRORS" -v keys="$REDIS_KEYS" '
      function per(ticks, events) { return events > 0 ? ticks / tck * 1e6 / events : 0 }
      {
        t = $2; if (!(t in ev)) names[++n] = t
        rounds[t]++; cpu[t] += $4; ev[t] += $5; rcpu[t] += $6; cmds[t] = $7 == "-" ? "-" : cmds[t] + $7
        round_cpu[t, $3] = per($4, $5); last = $3 > last ? $3 : last
      }
      END {
        for (i = 1; i <= n; i++) {
          t = names[i]
          printf "| %s | %d | %d | %.2f | %.2f | %s |\n", t, rounds[t], ev[t], per(cpu[t], ev[t]),
            per(rcpu[t], ev[t]), cmds[t]
        }
        m = "toolpulse-mcp"; b = "toolpulse-bus"
        mc = per(cpu[m], ev[m]); bc = per(cpu[b], ev[b])
        printf "\nCPU per event, toolpulse-bus / toolpulse-mcp: **%.3f×** (target ≤ 1.05×)", (mc > 0 ? bc / mc : 0)
        if (mc > 0) printf "; counting Redis'"'"'s CPU too: %.3f×", (bc + per(rcpu[b], ev[b])) / (mc + per(rcpu[m], ev[m]))
        if (last > 1) {
          printf ". Per round:"
          for (r = 1; r <= last; r++) printf " %.3f×", (round_cpu[m, r] > 0 ? round_cpu[b, r] / round_cpu[m, r] : 0)
        }
        printf ".\nAt the end: toolpulse_progress_bus_up %s, bus errors (toolpulse_progress_bus_errors_total) %s, keys left in Redis %s.\n", up, errors, keys
      }' "$BUS_ROWS"
  fi
  if [ -s "$RSS_ROWS" ]; then
    cat <<EOF

Memory with ${RSS[0]} streams open at once (a fresh process each; ${RSS[2]} text deltas per stream, one event every $((RSS[3] / 1000)) ms, a tool round every ${RSS[4]} deltas with tools running $((RSS[5] / 1000)) ms):

| target | RSS idle MiB | peak RSS MiB (sampled) | VmHWM MiB | per stream KiB | streams ok/failed | streams_active mid-run |
|---|---|---|---|---|---|---|
EOF
    awk -F'\t' -v n="${RSS[0]}" '{
      printf "| %s | %.1f | %.1f | %.1f | %.1f | %s/%s | %s |\n", $1, $2 / 1024, $3 / 1024, $4 / 1024,
        ($3 - $2) / n, $5, $6, $7 }' "$RSS_ROWS"
  fi
  if [ -s "$SCALE_ROWS" ]; then
    cat <<EOF

Phase scale: $(scale_shape). Client to target over HTTP/2 (h2c with prior knowledge), ${SCALE[1]}
connections; nginx and toolpulse to the upstream over HTTP/1.1, a connection per stream; direct:
HTTP/2 to the upstream. Each target with a fresh upstream and a fresh proxy; ulimit -n $(ulimit -n).
nginx: as in the other phases plus \`listen … http2\` on a second port, http2_max_concurrent_streams 128,
worker_connections $((SCALE[0] + 1024 > 8192 ? SCALE[0] + 1024 : 8192)), worker_rlimit_nofile 16384. toolpulse: the benchmark's config plus
\`$(printf '%s' "$SCALE_TOML" | tr '\n' ' ' | sed 's/ \[/; [/g')\` (its defaults, stated).

Open at once: the most streams the client had open together (response head received, body not
ended), and for how long all ${SCALE[0]} were; streams_active and upstream sockets: the most of
toolpulse's \`toolpulse_streams_active\` and of the sockets established to the upstream's port
(\`ss\`; direct: the client's), sampled every second. Memory per open stream: (peak RSS − base
RSS) / open at once; base is the fresh process before its first stream, peak is sampled every
0.25 s (the proxy's whole process tree).

| target | streams ok/failed | open at once | all open for s | streams_active | upstream sockets | RSS base MiB | peak RSS MiB (sampled) | VmHWM MiB | KiB per open stream |
|---|---|---|---|---|---|---|---|---|---|
EOF
    awk -F'\t' '
      function mib(k) { return k == "-" ? "-" : sprintf("%.1f", k / 1024) }
      {
        per = ($2 == "-" || $7 <= 0) ? "-" : sprintf("%.1f", ($3 - $2) / $7)
        printf "| %s | %s/%s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $5, $6, $7, $8, $9, $10,
          mib($2), mib($3), mib($4), per
      }' "$SCALE_ROWS"
    cat <<EOF

Latency as above (added: minus direct's, in this phase); CPU µs/event: the proxy's utime+stime
over the client's run divided by the upstream events; load-gen CPU %: upstream + client, of one
core; verified: streams checked whole over HTTP/2 after the run (\`--verify\`, ${VERIFY[1]} streams, half
with tool rounds).

| target | events/s | p50 µs | p99 µs | p99.9 µs | added p50 | added p99 | CPU µs/event | proxy CPU % | load-gen CPU % | HTTP/2 connections made | tool streams | verified |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
    awk -F'\t' -v tck="$CLK_TCK" -v n="${SCALE[0]}" '
      function f(x, d) { return x == "" ? "-" : sprintf("%." d "f", x) }
      function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
      {
        wall = $19 / 1e9
        if ($1 == "direct") { d50 = $13; d99 = $14 }
        a50 = $1 == "direct" ? "" : $13 - d50
        a99 = $1 == "direct" ? "" : $14 - d99
        cpu = $1 == "direct" ? "" : $17 / tck * 1e6 / ($11 > 0 ? $11 : 1)
        pcpu = $1 == "direct" ? "" : $17 / tck / wall * 100
        lcpu = ($16 + $18 / tck) / wall * 100
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, f($12, 0), f($13, 0),
          f($14, 0), f($15, 0), f(a50, 0), f(a99, 0), f(cpu, 2), f(pcpu, 0), f(lcpu, 0), $20, $21, $22
        mem[$1] = ($2 == "-" || $7 <= 0) ? "" : ($3 - $2) / $7
        c[$1] = cpu; p50[$1] = a50; p99[$1] = a99
        if ($7 < n) short = short sprintf(" %s (%s)", $1, $7)
        if ($6 > 0 || $5 < n) failed = failed sprintf(" %s (%s ok, %s failed)", $1, $5, $6)
      }
      END {
        if ("nginx" in c && "toolpulse" in c) {
          printf "\ntoolpulse / nginx: memory per open stream %s×, CPU µs/event %s×, added p50 %+.0f µs, added p99 %+.0f µs.\n",
            ratio(mem["toolpulse"], mem["nginx"]), ratio(c["toolpulse"], c["nginx"]),
            p50["toolpulse"] - p50["nginx"], p99["toolpulse"] - p99["nginx"]
        }
        if ("toolpulse" in mem && mem["toolpulse"] != "")
          printf "Memory per open stream, toolpulse: %.1f KiB (issue 40: ≤ 12 KiB).\n", mem["toolpulse"]
        if (short != "") printf "**Not all %d streams were open at once:%s.**\n", n, short
        if (failed != "") printf "**Streams failed or missing:%s.**\n", failed
      }' "$SCALE_ROWS"
  fi
  echo
  echo "Targets: proxy CPU per event ≤ nginx's in paced, ≤ 1.2× in tools, ≤ 1.5× in flood;"
  echo "added p50/p99 at ${PACED[0]} paced streams no worse than nginx; peak RSS ≤ 64 MiB with 1,000 streams."
  [ "$FAILURES" = 0 ] || echo "**$FAILURES client run(s) had failed streams: see the log above.**"
}

mkdir -p "$(dirname "$OUT")"
report | tee "$OUT"
log "results written to $OUT"
[ "$FAILURES" = 0 ] || exit 1
