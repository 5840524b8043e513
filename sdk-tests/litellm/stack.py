#!/usr/bin/env python3
"""The real LiteLLM proxy on loopback, with a scripted model and an MCP server behind it.

Three processes, each in a process group of its own, on free 127.0.0.1 ports:
- fake_model.py: the chat-completions model `fake-gpt` (config.yaml: `custom_openai/fake-gpt`);
- mcp_server.py: the MCP server `demo` (Streamable HTTP), tools `lookup_user`, `fail_tool`, each
  taking TOOL_MS;
- LiteLLM (`sdk-tests/litellm/.venv/bin/litellm --config config.yaml`), which offers the model the
  MCP server's tools as `demo-lookup_user` / `demo-fail_tool` and runs the calls itself when a
  request carries the tool `MCP_TOOL` below.
Run setup.sh first (it makes sdk-tests/litellm/.venv). This module needs only the standard
library, so it imports from any python3 >= 3.9 (the clients' sdk-tests/.venv included).

From pytest:

    from stack import LiteLLMStack, MCP_TOOL
    with LiteLLMStack(tool_ms=1500) as lite:
        client = openai.OpenAI(base_url=lite.base_url, api_key=lite.api_key)
        lite.upstream          # http://127.0.0.1:PORT, for toolpulse --upstream
        lite.mcp_calls()       # the MCP server's calls, with their start and end times
        lite.model_requests()  # the chat-completions bodies LiteLLM sent the model

As a script, starts the stack, prints where it is (and the environment a client needs), and
keeps it up until Ctrl-C or SIGTERM:

    sdk-tests/litellm/.venv/bin/python sdk-tests/litellm/stack.py [--tool-ms 1500]

For another program (sdk-tests/node/litellm.test.mjs), `--json` prints instead ONE line, a JSON
object once the stack is ready: upstream, base_url, api_key, model, model_url, mcp_url, mcp_tool,
tool_ms, log_dir, startup_s; and `--stop-on-stdin-eof` stops the stack when its stdin closes (the
parent died, however: the three processes are in groups of their own and would outlive it).

LiteLLM 1.108.7 refuses to start without a master key: config.yaml sets `sk-test` (API_KEY).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
LITELLM_BIN = VENV / "bin" / "litellm"
CONFIG = HERE / "config.yaml"

API_KEY = "sk-test"  # general_settings.master_key in config.yaml
MODEL = "fake-gpt"
MCP_SERVER = "demo"
# The request tool that makes LiteLLM list the MCP server's tools and run the calls itself.
MCP_TOOL = {"type": "mcp", "server_label": MCP_SERVER, "server_url": f"litellm_proxy/mcp/{MCP_SERVER}",
            "require_approval": "never"}

CHILD_START_TIMEOUT_S = 30
LITELLM_START_TIMEOUT_S = float(os.environ.get("LITELLM_START_TIMEOUT_S") or 180)
STOP_GRACE_S = 5

# Environment variables that would point LiteLLM at something other than this stack.
_SCRUBBED_PREFIXES = ("LITELLM_", "DATABASE_", "DIRECT_URL", "REDIS_", "OPENAI_", "AZURE_", "ANTHROPIC_",
                      "AWS_", "STORE_MODEL_IN_DB", "UI_", "PROXY_", "CONFIG_FILE_PATH")
_KEPT = ("LITELLM_LOG",)


class StackError(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Child:
    """A process in its own process group, stdout and stderr to a log file (no pipe to fill)."""

    def __init__(self, name: str, argv: List[str], log_dir: Path, env: Dict[str, str]) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=str(log_dir), env=env, start_new_session=True)

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_for_line(self, pattern: str, timeout: float) -> str:
        """The first group of `pattern` once the log has a line matching it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.log(), re.M)
            if m:
                return m.group(1)
            if not self.alive():
                break
            time.sleep(0.05)
        raise StackError(f"{self.name} did not print {pattern!r} within {timeout:.0f}s "
                         f"(exit={self.proc.poll()}); its log:\n{self.log()[-4000:]}")

    def stop(self) -> None:
        """SIGTERM to the whole group, SIGKILL after STOP_GRACE_S, then reap."""
        if self.proc.returncode is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(STOP_GRACE_S)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # The leader gone, kill anything left in its group (a worker it spawned).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


def _http_get(url: str, headers: Optional[Dict[str, str]] = None, timeout: float = 5):
    req = urllib.request.Request(url, headers=headers or {})
    # No HTTP proxy for loopback, whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as resp:
        return resp.status, resp.read()


def _http_post(url: str, timeout: float = 5):
    req = urllib.request.Request(url, data=b"", method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=timeout) as resp:
        return resp.status, resp.read()


class LiteLLMStack:
    """Context manager: fake model + MCP server + LiteLLM on loopback (see the module doc).

    tool_ms: how long each MCP tool takes. chunk_ms: a pause after each chunk the model streams.
    log_dir: where the three logs go (default: a temporary directory, removed on stop unless
    keep_logs). extra_env: more environment for LiteLLM (e.g. {"LITELLM_LOG": "DEBUG"}).
    """

    def __init__(self, tool_ms: int = 0, chunk_ms: int = 0, log_dir: Optional[os.PathLike] = None,
                 keep_logs: bool = False, extra_env: Optional[Dict[str, str]] = None,
                 start_timeout_s: float = LITELLM_START_TIMEOUT_S) -> None:
        self.tool_ms = tool_ms
        self.chunk_ms = chunk_ms
        self.start_timeout_s = start_timeout_s
        self.extra_env = dict(extra_env or {})
        self._own_dir = log_dir is None
        self.keep_logs = keep_logs
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="litellm-stack."))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.children: List[_Child] = []
        self.port: Optional[int] = None
        self.model_url: Optional[str] = None  # http://127.0.0.1:P/v1
        self.mcp_url: Optional[str] = None  # http://127.0.0.1:P/mcp
        self.startup_s: Optional[float] = None  # LiteLLM's, from spawn to ready

    # ------------------------------------------------------------------ addresses

    @property
    def upstream(self) -> str:
        """LiteLLM's root, e.g. http://127.0.0.1:PORT (toolpulse --upstream)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """For OpenAI clients: http://127.0.0.1:PORT/v1."""
        return self.upstream + "/v1"

    @property
    def api_key(self) -> str:
        return API_KEY

    model = MODEL
    mcp_tool = MCP_TOOL

    # ------------------------------------------------------------------ lifecycle

    def _env(self) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k in _KEPT or not k.startswith(_SCRUBBED_PREFIXES)}
        no_proxy = "127.0.0.1,localhost"
        if env.get("NO_PROXY"):
            no_proxy += "," + env["NO_PROXY"]
        env.update({"NO_PROXY": no_proxy, "no_proxy": no_proxy, "PYTHONDONTWRITEBYTECODE": "1",
                    "PYTHONUNBUFFERED": "1"})
        return env

    def start(self) -> "LiteLLMStack":
        if not LITELLM_BIN.exists():
            raise StackError(f"no LiteLLM at {LITELLM_BIN}: run bash {HERE / 'setup.sh'} first")
        atexit.register(self.stop)
        try:
            env = self._env()
            model = self._spawn("fake-model", [str(VENV_PYTHON), str(HERE / "fake_model.py"), "--port", "0",
                                               "--chunk-ms", str(self.chunk_ms)], env)
            mcp = self._spawn("mcp-server", [str(VENV_PYTHON), str(HERE / "mcp_server.py"), "--port", "0",
                                             "--tool-ms", str(self.tool_ms)], env)
            self.model_url = model.wait_for_line(r"^fake model listening on (\S+)", CHILD_START_TIMEOUT_S)
            self.mcp_url = mcp.wait_for_line(r"^mcp server listening on (\S+)", CHILD_START_TIMEOUT_S)
            self._start_litellm(env)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: List[str], env: Dict[str, str]) -> _Child:
        child = _Child(name, argv, self.log_dir, env)
        self.children.append(child)
        return child

    def _start_litellm(self, base_env: Dict[str, str]) -> None:
        env = dict(base_env)
        env.update({
            # config.yaml reads these two (os.environ/...).
            "FAKE_MODEL_API_BASE": self.model_url,
            "DEMO_MCP_URL": self.mcp_url,
            # The bundled model cost map, not a fetch from GitHub (3 tries, then the same map).
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY_DISABLED": "true",
            "LITELLM_LOG": base_env.get("LITELLM_LOG", "WARNING"),
        })
        env.update(self.extra_env)
        for attempt in range(3):  # the port is picked before LiteLLM binds it: retry on a race
            port = free_port()
            started = time.monotonic()
            child = self._spawn(f"litellm-{attempt}" if attempt else "litellm",
                                [str(LITELLM_BIN), "--config", str(CONFIG), "--host", "127.0.0.1",
                                 "--port", str(port)], env)
            if self._wait_ready(child, port):
                self.port = port
                self.startup_s = time.monotonic() - started
                return
            log = child.log()
            child.stop()
            self.children.remove(child)
            if "address already in use" not in log.lower():
                code = child.proc.returncode
                why = (f"exited ({code}) before it was ready" if code is not None and code >= 0
                       else f"was not ready within {self.start_timeout_s:.0f}s")
                raise StackError(f"LiteLLM {why}; its log ({child.log_path}):\n{log[-6000:]}")
        raise StackError("LiteLLM found no free port in 3 tries")

    def _wait_ready(self, child: _Child, port: int) -> bool:
        """Ready: /health/liveliness answers 200 (uvicorn serves only once the app's startup,
        config and MCP servers included, is done) and the model list holds fake-gpt."""
        deadline = time.monotonic() + self.start_timeout_s
        root = f"http://127.0.0.1:{port}"
        while time.monotonic() < deadline and child.alive():
            try:
                status, _ = _http_get(root + "/health/liveliness", timeout=2)
                if status == 200:
                    status, body = _http_get(root + "/v1/models",
                                             {"authorization": f"Bearer {API_KEY}"}, timeout=5)
                    ids = [m.get("id") for m in json.loads(body).get("data", [])]
                    if status == 200 and MODEL in ids:
                        return True
            except (OSError, ValueError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        self.children = []
        if self._own_dir and not self.keep_logs and self.log_dir.exists():
            shutil.rmtree(self.log_dir, ignore_errors=True)
        try:
            atexit.unregister(self.stop)
        except Exception:
            pass

    def __enter__(self) -> "LiteLLMStack":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ looking in

    def logs(self) -> Dict[str, str]:
        """Each process's output so far (for a failing test's message)."""
        return {c.name: c.log() for c in self.children}

    def mcp_calls(self) -> List[dict]:
        """The MCP server's tool calls: tool, arguments, started, ended (time.time())."""
        root = self.mcp_url.rsplit("/mcp", 1)[0]
        return json.loads(_http_get(root + "/_calls")[1])

    def hold_next_call(self) -> None:
        """The MCP server's next tool call waits, once it has slept, for `release_call`."""
        root = self.mcp_url.rsplit("/mcp", 1)[0]
        _http_post(root + "/_hold")

    def release_call(self) -> None:
        root = self.mcp_url.rsplit("/mcp", 1)[0]
        _http_post(root + "/_release")

    def model_requests(self) -> List[dict]:
        """The chat-completions bodies LiteLLM sent the fake model, in order."""
        root = self.model_url.rsplit("/v1", 1)[0]
        return json.loads(_http_get(root + "/_requests")[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-ms", type=int, default=0, help="how long each MCP tool takes")
    parser.add_argument("--chunk-ms", type=int, default=0, help="pause after each chunk the model streams")
    parser.add_argument("--log-dir", help="keep the three logs here (default: a temporary directory)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON line with the addresses once ready (for programs)")
    parser.add_argument("--stop-on-stdin-eof", action="store_true",
                        help="stop the stack when stdin closes (when the parent holding it dies)")
    args = parser.parse_args()

    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # SIGINT too: a background job ignores it
        signal.signal(sig, lambda *_: stop.append(1))
    if args.stop_on_stdin_eof:
        import threading

        def watch_stdin() -> None:
            try:
                while sys.stdin.buffer.read(4096):
                    pass
            except (OSError, ValueError):
                pass
            stop.append(1)

        threading.Thread(target=watch_stdin, daemon=True).start()
    stack = LiteLLMStack(tool_ms=args.tool_ms, chunk_ms=args.chunk_ms, log_dir=args.log_dir,
                         keep_logs=bool(args.log_dir))
    stack.start()
    try:
        if args.json:
            print(json.dumps({
                "upstream": stack.upstream, "base_url": stack.base_url, "api_key": stack.api_key,
                "model": stack.model, "model_url": stack.model_url, "mcp_url": stack.mcp_url,
                "mcp_tool": MCP_TOOL, "tool_ms": args.tool_ms, "log_dir": str(stack.log_dir),
                "startup_s": round(stack.startup_s, 3)}), flush=True)
        else:
            _print_human(stack, args.tool_ms)
        while not stop and all(c.alive() for c in stack.children):
            time.sleep(0.2)
        dead = [c.name for c in stack.children if not c.alive()]
        if dead:
            print(f"stack: {', '.join(dead)} exited; stopping", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()


def _print_human(stack: LiteLLMStack, tool_ms: int) -> None:
    print(f"litellm ready in {stack.startup_s:.1f}s at {stack.base_url} (api key {stack.api_key}, "
          f"model {stack.model})", flush=True)
    print(f"  fake model  {stack.model_url}  (GET /_requests)", flush=True)
    print(f"  mcp server  {stack.mcp_url}  (GET /_calls; tools take {tool_ms} ms)", flush=True)
    print(f"  logs        {stack.log_dir}", flush=True)
    print(f"  mcp tool    {json.dumps(MCP_TOOL)}", flush=True)
    print(f"OPENAI_BASE_URL={stack.base_url} OPENAI_API_KEY={stack.api_key}", flush=True)


if __name__ == "__main__":
    main()
