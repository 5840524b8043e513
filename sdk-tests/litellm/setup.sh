#!/usr/bin/env bash
# Makes sdk-tests/litellm/.venv: the real LiteLLM proxy (litellm[proxy], pinned with everything it
# needs by requirements.txt) and the MCP SDK its mcp_server.py uses. A venv of its own, apart from
# the clients' sdk-tests/.venv, whose pins LiteLLM's need not agree with. Idempotent: a second run
# only checks the pins (a few seconds). A first run takes about a minute and some 750 MB.
#
#   bash sdk-tests/litellm/setup.sh          # then: .venv/bin/python stack.py, or import stack
#
# Needs python3 (3.9+, with venv or pip) and PyPI. PYTHON picks the interpreter.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
for tool in "$PYTHON" timeout; do
  command -v "$tool" >/dev/null || { echo "litellm setup: $tool is required" >&2; exit 2; }
done

VENV="$HERE/.venv"
# shellcheck source=../venv.sh
. "$HERE/../venv.sh"
PYTHON="$PYTHON" make_venv "$VENV" "$HERE/requirements.txt" 900
"$VENV/bin/python" -c 'import importlib.metadata as m; print("litellm", m.version("litellm"), "/ mcp", m.version("mcp"), "in '"$VENV"'")'
