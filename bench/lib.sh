# Shell helpers shared by bench/run.sh and bench/soak.sh (sourced). They use $TMP for logs.

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

descendants() {
  local kid
  for kid in $(pgrep -P "$1" 2>/dev/null || true); do
    echo "$kid"
    descendants "$kid"
  done
}

# Stops a process we started and its children: TERM (twice: toolpulse exits at the second),
# up to 5 s, then KILL.
stop() {
  local pid=$1 pids i
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  pids=("$pid" $(descendants "$pid"))
  kill -TERM "${pids[@]}" 2>/dev/null || true
  sleep 0.1
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do
    kill -0 "${pids[@]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

USED_PORTS=" "
# pick_port VAR: a free loopback port below the ephemeral range.
pick_port() {
  local p i
  for i in $(seq 500); do
    p=$((20000 + RANDOM % 12000))
    case "$USED_PORTS" in *" $p "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      USED_PORTS+="$p "
      printf -v "$1" %s "$p"
      return 0
    fi
  done
  die "no free port"
}

# wait_port PORT PID NAME: until something listens on PORT (10 s at most).
wait_port() {
  local i
  for i in $(seq 100); do
    kill -0 "$2" 2>/dev/null || die "$3 exited at start; its log: $(tail -n 5 "$TMP/$3.log" 2>/dev/null)"
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  die "$3 does not listen on $1 after 10 s"
}

# ticks PID...: utime + stime of these processes, in clock ticks.
ticks() {
  local total=0 p s f
  for p in "$@"; do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    s=${s##*) }
    read -r -a f <<<"$s"
    total=$((total + f[11] + f[12]))
  done
  echo "$total"
}

# machine_ticks: clock ticks since boot over all CPUs, "BUSY STEAL": busy is user, nice, system,
# irq and softirq (the kernel charges each tick to the task it lands in, so the benchmark's own
# processes are in it too); steal is time the hypervisor gave to other guests while this one
# wanted to run. For telling whether anything else ran during a measurement.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $9; exit }' /proc/stat; }

# status_kib FIELD PID...: the sum of a /proc/PID/status field (VmRSS, VmHWM) in KiB.
status_kib() {
  local field=$1 total=0 p v
  shift
  for p in "$@"; do
    v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$p/status" 2>/dev/null) || continue
    total=$((total + ${v:-0}))
  done
  echo "$total"
}

# jnum KEY FILE, jstr KEY FILE: a number or string field of the client's one-line JSON.
jnum() { grep -o "\"$1\":[-0-9.e+]*" "$2" | head -n 1 | cut -d: -f2; }
jstr() { grep -o "\"$1\":\"[^\"]*\"" "$2" | head -n 1 | cut -d'"' -f4; }

# nginx_conf PORT WORKER_CONNECTIONS RLIMIT_NOFILE [H2_LISTEN]: the config of the nginx the
# benchmarks compare with, in front of the upstream on $UP_PORT, its files under $TMP/nginx
# (bench/run.sh; bench/proxy_instructions.sh with NGINX_MASTER=off, one process for callgrind).
# bench/run.sh's default phases run it with 8192 connections and no HTTP/2; phase scale with
# room for its 10,000 upstream connections and a second listener, h2c with prior knowledge
# (nginx 1.22: `listen … http2` on a plain listener). worker_connections is allocated and
# touched at start (~0.4 KiB each: 8192 more make 3.4 MiB more RSS), so only the scale phase's
# nginx has the larger one.
nginx_conf() {
  cat <<EOF
# One worker, no buffering, keep-alive HTTP/1.1 to the upstream: nginx as a plain streaming
# pass-through, the baseline toolpulse is compared with.
daemon off;
master_process ${NGINX_MASTER:-on};
worker_processes 1;
user root;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
worker_rlimit_nofile $3;
events {
    worker_connections $2;
}
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    fastcgi_temp_path $TMP/nginx/fastcgi;
    uwsgi_temp_path $TMP/nginx/uwsgi;
    scgi_temp_path $TMP/nginx/scgi;
    keepalive_requests 1000000;
    upstream gateway {
        server 127.0.0.1:$UP_PORT;
        keepalive 1024;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$1 backlog=4096;${4:+
        listen $4 http2 backlog=4096;
        http2_max_concurrent_streams 128;}
        location / {
            proxy_pass http://gateway;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }
    }
}
EOF
}
