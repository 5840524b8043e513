#!/usr/bin/env bash
# The demo page's end-to-end browser test: starts `toolpulse demo --web` on loopback, opens
# its page in Debian's chromium (driven by playwright-core), runs it both ways and checks the
# tool timeline, then stops what it started. Builds nothing in Rust.
#
#   bash browser-tests/run.sh [TOOLPULSE_BIN]     # default target/debug/toolpulse, from the repo root
#
# Needs node 20+ and npm (the npm registry), and /usr/bin/chromium: installed with apt-get
# when missing (as root, e.g. in CI). SCREENSHOT names the PNG of the finished page
# (default target/demo.png).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
cd "$REPO"

BIN="${1:-${TOOLPULSE_BIN:-target/debug/toolpulse}}"
case "$BIN" in /*) ;; *) BIN="$REPO/$BIN" ;; esac
if [ ! -x "$BIN" ]; then
  echo "browser-tests: no toolpulse binary at $BIN (build it first: cargo build)" >&2
  exit 2
fi
for tool in node npm timeout; do
  command -v "$tool" >/dev/null || { echo "browser-tests: $tool is required" >&2; exit 2; }
done

export CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "browser-tests: $CHROMIUM is missing; install it: sudo apt-get install chromium" >&2
    exit 2
  fi
  echo "== browser-tests: installing chromium (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get update -qq
  # The fonts make the screenshot's text and the ✓/✗ marks render.
  timeout 900 apt-get install -y -qq chromium fonts-dejavu-core fonts-liberation >/dev/null
fi
echo "== browser-tests: $("$CHROMIUM" --version 2>/dev/null || echo chromium)"

echo "== browser-tests: node environment"
(cd "$HERE" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)

# Everything here talks to 127.0.0.1 only; keep any configured HTTP proxy out of it.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolpulse-browser-tests.XXXXXX")"
DEMO_PID=""
cleanup() {
  if [ -n "$DEMO_PID" ] && kill -0 "$DEMO_PID" 2>/dev/null; then
    kill -TERM "$DEMO_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$DEMO_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$DEMO_PID" 2>/dev/null || true
    wait "$DEMO_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BIN" demo --web --listen 127.0.0.1:0 >"$WORK/demo.log" 2>&1 &
DEMO_PID=$!
URL=""
for _ in $(seq 300); do
  URL="$(sed -n 's/^demo page: \(http:[^ ]*\)$/\1/p' "$WORK/demo.log")"
  [ -n "$URL" ] && break
  if ! kill -0 "$DEMO_PID" 2>/dev/null; then
    echo "browser-tests: toolpulse demo --web exited early:" >&2
    cat "$WORK/demo.log" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "browser-tests: toolpulse demo --web printed no URL within 30 s:" >&2
  cat "$WORK/demo.log" >&2
  exit 1
fi
echo "== browser-tests: demo page at $URL"

export DEMO_URL="$URL"
export SCREENSHOT="${SCREENSHOT:-$REPO/target/demo.png}"
status=0
timeout 300 node --test "$HERE/demo.test.mjs" || status=$?
if [ "$status" = 0 ]; then
  echo "== browser-tests: screenshot at $SCREENSHOT"
else
  echo "browser-tests: FAILED (demo log below)" >&2
  cat "$WORK/demo.log" >&2
fi
exit "$status"
