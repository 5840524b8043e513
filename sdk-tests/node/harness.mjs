// What the Node suites (test.mjs: openai-node; ai-sdk.test.mjs: the Vercel AI SDK;
// ai-sdk-recipe.test.mjs: examples/ai-sdk) share: the scripted gateway (../gateway.py) and the
// real toolpulse binary in front of it (and, on demand, mcp_server.py behind its MCP front, with
// an MCP client to play the gateway's), the gateway's own streams read directly, and the
// contract's oracle: the stream toolpulse should make of a gateway stream,
// derived independently of toolpulse. ../contract.py carries the same rules for the Python
// suite; each suite checks toolpulse against its own copy.
//
// Environment: TOOLPULSE_BIN (default target/debug/toolpulse, relative to the repo root),
// PYTHON (default python3) to run the gateway.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync, accessSync, constants } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
const STARTUP_TIMEOUT_MS = 15_000;
export const REQUEST_TIMEOUT_MS = 30_000;
// The gateway's tool pause: above the proxy's heartbeat interval (60 ms), so heartbeat comments
// reach the SDKs mid-stream.
export const TOOL_MS = 120;

// gateway.py's names and texts.
export const MODEL = 'gpt-toolpulse-e2e';
export const PLAIN_MODEL = 'toolpulse-plain';
export const PARALLEL_MODEL = 'toolpulse-parallel';
export const FAILURES_MODEL = 'toolpulse-failures';
export const TAG_HEADER = 'x-e2e-tag';
export const PROFILES_HEADER = 'x-toolpulse-profiles';
export const FINAL_TEXT =
  'I found two open issues about streaming stalls, the design doc explains the ' +
  'lifecycle events, and the web agrees: show progress while tools run.';
export const PLAIN_TEXT = 'Hello! No tools were needed for this one.';
export const BROKEN_OUTPUT = 'no executor found for tool github_broken';
// The held scenario: one call of demo_crunch (mcp_server.py's `crunch` behind the MCP front, see
// startStack's `mcp`), its output held until the test posts it (postHeldOutput).
export const HELD_MODEL = 'toolpulse-held';
export const HELD_TEXT = 'Crunched, step by step.';
export const HELD_CALL = ['call_crunch_1', 'demo_crunch', '{"label":"the numbers","steps":3}'];

// Every agentic scenario of the gateway: the request's model and query.
export const SCENARIOS = {
  agentic: { model: MODEL, query: {} },
  'agentic, antwort-style [DONE]': { model: MODEL, query: { done: '1' } },
  'agentic, antwort-style 1-based output_index': { model: MODEL, query: { base: '1' } },
  'parallel (interleaved calls)': { model: PARALLEL_MODEL, query: {} },
  'failures, a call never answered': { model: FAILURES_MODEL, query: { done: '1' } },
};

// The same config as test_python_sdk.py's.
const CONFIG = `
[[tools]]
match = ["github_*"]
kind = "mcp"

[failure]
output_patterns = ["^no executor found for tool ", "^search failed: "]

[events]
profiles = ["hosted"]

[heartbeat]
interval_ms = 60
`;

// ---------------------------------------------------------------- processes

const children = [];
// Even if the run dies outside the hooks, no gateway or proxy outlives it.
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

function startProcess(name, cmd, args, stream, pattern, onSpawn = () => {}) {
  const child = spawn(cmd, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  onSpawn(child);
  const lines = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not print ${pattern} in ${STARTUP_TIMEOUT_MS} ms:\n${lines.join('\n')}`));
    }, STARTUP_TIMEOUT_MS);
    const onData = (chunk) => {
      for (const line of chunk.toString().split('\n')) {
        if (!line) continue;
        lines.push(line);
        const m = line.match(pattern);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      }
    };
    child.stdout.on('data', stream === 'stdout' ? onData : () => {});
    child.stderr.on('data', stream === 'stderr' ? onData : (c) => lines.push(c.toString()));
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${lines.join('\n')}`));
    });
  });
}

function toolpulseBin() {
  let bin = process.env.TOOLPULSE_BIN || 'target/debug/toolpulse';
  if (!path.isAbsolute(bin)) bin = path.join(REPO, bin);
  accessSync(bin, constants.X_OK); // throws with the path when missing
  return bin;
}

/** SIGTERM, then SIGKILL after 5 s if it is still there. */
function stopChild(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  // A child that ignores SIGTERM must not keep the test run alive.
  const timer = setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }, 5_000);
  timer.unref();
}

/**
 * toolpulse alone in front of `upstream` (a URL) with the config file `config`, its admin
 * listener on a free port; `stop()` ends it. (litellm.test.mjs: in front of the real LiteLLM.)
 */
export async function startToolpulse(upstream, config) {
  let child;
  const proxyAddr = await startProcess('toolpulse', toolpulseBin(),
    ['--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--upstream', upstream, '--config', config],
    'stderr', /listen=(\S+)/, (c) => { child = c; });
  assert.match(proxyAddr, /^127\.0\.0\.1:\d+$/);
  return { proxyAddr, stop: () => stopChild(child) };
}

/**
 * Starts the gateway and toolpulse in front of it; `stop()` ends both. With `mcp` (`{ stepMs }`),
 * also mcp_server.py (its `crunch` tool reporting one progress step each `stepMs`) behind
 * toolpulse's MCP front as server "steps", whose tool the gateway calls `demo_crunch` (kind mcp):
 * `mcpUrl` is the front's URL for it, where the test plays the gateway's MCP client
 * (callMcpTool). Progress is sent at most every 20 ms per call, so that none of the reports
 * (`stepMs` apart) is coalesced away. `extraConfig` is appended to the config file.
 */
export async function startStack({ mcp = null, extraConfig = '' } = {}) {
  const bin = toolpulseBin();
  const tmp = mkdtempSync(path.join(tmpdir(), 'toolpulse-node-'));
  const config = path.join(tmp, 'toolpulse.toml');
  const python = process.env.PYTHON || 'python3';
  let extra = '';
  if (mcp) {
    const server = await startProcess('mcp server', python,
      ['-u', path.join(REPO, 'sdk-tests', 'mcp_server.py'), '--port', '0', '--step-ms', String(mcp.stepMs ?? 150)],
      'stdout', /listening on (http:\/\/\S+)/);
    extra = `
[[tools]]
match = ["demo_*"]
kind = "mcp"

[mcp]
listen = "127.0.0.1:0"

[[mcp.servers]]
name = "steps"
upstream = "${server}"
call_name = "demo_{tool}"

[progress]
min_interval_ms = 20
`;
  }
  writeFileSync(config, CONFIG + extra + extraConfig);
  const gatewayAddr = await startProcess('gateway', python,
    ['-u', path.join(REPO, 'sdk-tests', 'gateway.py'), '--port', '0'], 'stdout',
    /listening on http:\/\/(\S+)/);
  const line = await startProcess('toolpulse', bin,
    ['--listen', '127.0.0.1:0', '--upstream', `http://${gatewayAddr}`, '--config', config], 'stderr',
    /(toolpulse listening.*)/);
  const addr = (name) => line.match(new RegExp(`\\b${name}="?(127\\.0\\.0\\.1:\\d+)`))?.[1];
  const proxyAddr = addr('listen');
  assert.match(proxyAddr ?? line, /^127\.0\.0\.1:\d+$/);
  const mcpUrl = mcp ? `http://${addr('mcp')}/steps` : null;
  const stop = () => {
    for (const child of children) stopChild(child);
    rmSync(tmp, { recursive: true, force: true });
  };
  return { gatewayAddr, proxyAddr, mcpUrl, stop };
}

// ---------------------------------------------------------------- the gateway, directly

export function queryString(query) {
  const q = new URLSearchParams({ tool_ms: String(TOOL_MS), ...query }).toString();
  return `?${q}`;
}

/** A stream's events (`data: [DONE]` left out), read with fetch from `addr`. */
export async function rawEvents(addr, model, query = {}, headers = {}) {
  const res = await fetch(`http://${addr}/v1/responses${queryString(query)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model, input: 'x', stream: true }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  assert.equal(res.status, 200);
  const text = await res.text();
  return text
    .split('\n\n')
    .map((block) => block.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line) => line && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)));
}

/** The request bodies the gateway received with this `x-e2e-tag` (see gateway.py). */
export async function recordedRequests(gatewayAddr, tag) {
  const res = await fetch(`http://${gatewayAddr}/_requests?tag=${encodeURIComponent(tag)}`,
    { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  assert.equal(res.status, 200);
  return res.json();
}

/** Releases the held call's output (gateway.py's `POST /_outputs/<call_id>`): the stream goes on. */
export async function postHeldOutput(gatewayAddr, output, callId = HELD_CALL[0]) {
  const res = await fetch(`http://${gatewayAddr}/_outputs/${callId}`, {
    method: 'POST', body: output, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  assert.equal(res.status, 200);
}

// ---------------------------------------------------------------- the gateway's MCP client

/** The JSON-RPC message answering `id` in an MCP answer (JSON, or an SSE stream of messages). */
async function mcpAnswer(res, id) {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const messages = (res.headers.get('content-type') ?? '').startsWith('text/event-stream')
    ? text.split(/\r?\n\r?\n/).map((block) => block.split(/\r?\n/).filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart()).join('\n')).filter(Boolean).map((data) => JSON.parse(data))
    : [JSON.parse(text)];
  const answer = messages.find((m) => m.id === id);
  assert.ok(answer, `no answer to ${id} in ${text}`);
  assert.equal(answer.error, undefined, JSON.stringify(answer.error));
  return answer.result;
}

/**
 * Calls `tool` on the MCP server at `url` (Streamable HTTP, protocol 2025-11-25: initialize,
 * notifications/initialized, tools/call, DELETE of the session), as a gateway's MCP client
 * would, without a progress token of its own (toolpulse's front adds one and keeps the
 * reports); answers the call's result.
 */
export async function callMcpTool(url, tool, args) {
  const version = '2025-11-25';
  let session = null;
  const post = (body) => fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': version } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', ...body }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const init = await post({ id: 1, method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'toolpulse-e2e-gateway', version: '1' } } });
  session = init.headers.get('mcp-session-id');
  assert.equal((await mcpAnswer(init, 1)).protocolVersion, version);
  const initialized = await post({ method: 'notifications/initialized' });
  assert.equal(initialized.status, 202, await initialized.text());
  const result = await mcpAnswer(await post({ id: 2, method: 'tools/call', params: { name: tool, arguments: args } }), 2);
  if (session) {
    await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': session, 'mcp-protocol-version': version },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).then((r) => r.body?.cancel());
  }
  return result;
}

// ---------------------------------------------------------------- matchers

class Matcher {
  constructor(name, test) {
    this.name = name;
    this.test = test;
  }
}
export const ANY_MS = new Matcher('<any duration_ms>', (v) => Number.isInteger(v) && v >= 0);
export const ANY_TEXT = new Matcher('<any non-empty text>', (v) => typeof v === 'string' && v.trim() !== '');
export const ANYTHING = new Matcher('<anything>', () => true);
/** A key that may be missing; when present its value matches `value`. */
export class MaybeAbsent extends Matcher {
  constructor(value) {
    super(`<absent or ${JSON.stringify(value)}>`, (v) => {
      try {
        assertMatch(v, value);
        return true;
      } catch {
        return false;
      }
    });
    this.value = value;
  }
}
export const maybeAbsent = (value) => new MaybeAbsent(value);
/** A string that says `text`: the same JSON value when it is JSON (a sanitizer may re-serialize). */
export const jsonText = (text) => new Matcher(`<JSON text ${text}>`, (v) => {
  if (typeof v !== 'string') return false;
  try {
    return JSON.stringify(JSON.parse(v)) === JSON.stringify(JSON.parse(text));
  } catch {
    return v === text;
  }
});

/** `value` with every matcher replaced by its name (an expected stream as plain data, to compare two). */
export const settle = (value) => (value instanceof Matcher ? value.name : Array.isArray(value) ? value.map(settle)
  : value !== null && typeof value === 'object' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, settle(v)])) : value);

const brief = (v) => (v && typeof v === 'object' ? `${v.type ?? '?'}${typeof v.id === 'string' ? `#${v.id}` : ''}` : v);

/** `actual` is `expected` with matchers; a key `expected` lacks is allowed only when null or in `extraKeys`. */
export function assertMatch(actual, expected, where = '$', extraKeys = new Set()) {
  if (expected instanceof Matcher) {
    assert.ok(expected.test(actual), `${where}: ${JSON.stringify(actual)} is not ${expected.name}`);
  } else if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${where}: expected a list, got ${JSON.stringify(actual)}`);
    assert.equal(actual.length, expected.length,
      `${where}: ${actual.length} entries, expected ${expected.length}:\n  actual   ${actual.map(brief)}\n` +
      `  expected ${expected.map(brief)}`);
    expected.forEach((e, i) => assertMatch(actual[i], e, `${where}[${i}]`, extraKeys));
  } else if (expected !== null && typeof expected === 'object') {
    assert.ok(actual !== null && typeof actual === 'object', `${where}: expected an object, got ${JSON.stringify(actual)}`);
    expected = Object.fromEntries(Object.entries(expected).filter(([k, v]) => !(v instanceof MaybeAbsent && !(k in actual))));
    const missing = Object.keys(expected).filter((k) => !(k in actual));
    assert.deepEqual(missing, [], `${where}: missing ${missing} in ${JSON.stringify(actual).slice(0, 600)}`);
    const unexpected = Object.keys(actual)
      .filter((k) => !(k in expected) && actual[k] != null && !extraKeys.has(k));
    assert.deepEqual(unexpected, [], `${where}: unexpected ${unexpected} in ${JSON.stringify(actual).slice(0, 600)}`);
    for (const [k, v] of Object.entries(expected)) assertMatch(actual[k], v, `${where}.${k}`, extraKeys);
  } else {
    assert.deepEqual(actual, expected, `${where}: ${JSON.stringify(actual)} != ${JSON.stringify(expected)}`);
  }
}

/** Event by event; a difference in the types is shown as a readable diff first. */
export function assertStream(actual, expected, extraKeys = new Set()) {
  const a = actual.map((e) => e.type);
  const e = expected.map((x) => x.type);
  if (JSON.stringify(a) !== JSON.stringify(e)) {
    let first = a.findIndex((t, i) => t !== e[i]);
    if (first < 0) first = Math.min(a.length, e.length);
    const rows = [];
    for (let i = Math.max(0, first - 3); i < Math.min(Math.max(a.length, e.length), first + 6); i++) {
      rows.push(`  ${String(i).padStart(3)} ${(a[i] ?? '-').padEnd(45)} ${e[i] ?? '-'}`);
    }
    assert.fail(`event types differ first at #${first} (${a.length} events, expected ${e.length}):\n${rows.join('\n')}`);
  }
  expected.forEach((x, i) => assertMatch(actual[i], x, `event #${i} (${x.type})`, extraKeys));
}

// ---------------------------------------------------------------- the oracle

export const COMPANION_PREFIX = 'tp_';
const FAILURE_PATTERNS = [/^no executor found for tool /, /^search failed: /];
const SERVER_LABEL = 'gateway';
const SHOWN = new Set(['mcp', 'web_search', 'file_search']);
const TERMINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.failed', 'response.incomplete', 'error']);
export const INJECTED = /^response\.(web_search_call|file_search_call|mcp_call)\./;

export function kindOf(name) {
  if (name.startsWith('github_')) return 'mcp';
  if (name === 'web_search' || name === 'web_search_preview') return 'web_search';
  if (name === 'file_search') return 'file_search';
  return 'function';
}

const clone = (v) => (v instanceof Matcher ? v : Array.isArray(v) ? v.map(clone)
  : v !== null && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, clone(x)])) : v);

/**
 * The events a client should see for the gateway's `upstream` events (profile "openai": a
 * companion per classified call; "openai-inline": events on the function_call item itself).
 * Values toolpulse decides (durations, the sentence for a call with no output, re-serialized
 * JSON, the response timestamps that differ per request) are matchers.
 */
export function expectedStream(upstream, profile = 'openai', options = {}) {
  if (profile === 'hosted') return expectedHostedStream(upstream, options);
  assert.ok(profile === 'openai' || profile === 'openai-inline');
  const companions = profile === 'openai';
  const out = [];
  let shift = 0;
  let nextSeq = null;
  let r; // per response
  const newResponse = () => ({ indexMap: new Map(), opened: 0, highest: -1, byIndex: new Map(), calls: new Map() });
  r = newResponse();

  const injected = (type, fields) => {
    const event = { type };
    if (nextSeq !== null) event.sequence_number = nextSeq++;
    shift += 1;
    out.push(Object.assign(event, fields));
  };
  const clientIndex = (i) => {
    if (!r.indexMap.has(i)) {
      r.indexMap.set(i, i + r.opened);
      r.highest = Math.max(r.highest, i + r.opened);
    }
    return r.indexMap.get(i);
  };
  const where = (call) => (companions
    ? { output_index: call.companionIndex, item_id: COMPANION_PREFIX + call.callId }
    : { output_index: call.fcIndex, item_id: call.fcItemId });
  const companionItem = (call) => {
    const id = COMPANION_PREFIX + call.callId;
    let args = null;
    try {
      args = JSON.parse(call.arguments);
    } catch { /* not JSON */ }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) args = {};
    if (call.kind === 'mcp') {
      return { type: 'mcp_call', id, server_label: SERVER_LABEL, name: call.name,
        arguments: jsonText(call.arguments), status: 'in_progress' };
    }
    if (call.kind === 'web_search') {
      const action = { type: 'search' };
      if (typeof args.query === 'string') action.query = args.query;
      return { type: 'web_search_call', id, status: 'in_progress', action };
    }
    let queries = args.queries;
    if (!(Array.isArray(queries) && queries.every((q) => typeof q === 'string'))) {
      queries = typeof args.query === 'string' ? [args.query] : [];
    }
    return { type: 'file_search_call', id, status: 'in_progress', queries };
  };
  const open = (call) => {
    r.calls.set(call.callId, call);
    if (companions) {
      call.companionIndex = r.highest + 1;
      r.highest = call.companionIndex;
      r.opened += 1;
      call.companion = companionItem(call);
      injected('response.output_item.added', { output_index: call.companionIndex, item: clone(call.companion) });
    }
    for (const phase of call.kind === 'mcp' ? ['in_progress'] : ['in_progress', 'searching']) {
      injected(`response.${call.kind}_call.${phase}`, { ...where(call), name: call.name });
    }
  };
  const close = (call, output) => {
    call.closed = true;
    const failed = output === null || FAILURE_PATTERNS.some((p) => p.test(output));
    const type = call.kind === 'mcp'
      ? (failed ? 'response.mcp_call.failed' : 'response.mcp_call.completed')
      : `response.${call.kind}_call.completed`;
    injected(type, { ...where(call), name: call.name, outcome: failed ? 'failed' : 'completed', duration_ms: ANY_MS });
    if (companions) {
      const final = { ...call.companion, status: failed ? 'failed' : 'completed' };
      if (call.kind === 'mcp') {
        if (failed) {
          final.error = { type: 'mcp_tool_execution_error',
            content: [{ type: 'text', text: output ?? ANY_TEXT }] };
        } else {
          final.output = jsonText(output);
        }
      }
      call.companion = final;
      injected('response.output_item.done', { output_index: call.companionIndex, item: clone(final) });
    }
  };
  const closeAll = () => {
    for (const call of r.calls.values()) if (!call.closed) close(call, null);
  };
  const withCompanions = (output) => output.flatMap((item) => {
    const call = item?.type === 'function_call' ? r.calls.get(item.call_id) : undefined;
    return call?.companion ? [item, clone(call.companion)] : [item];
  });

  for (const event of upstream) {
    const t = event.type;
    const item = event.item && typeof event.item === 'object' ? event.item : {};
    if (t === 'response.created') r = newResponse();
    if (TERMINAL_RESPONSE_EVENTS.has(t)) closeAll();
    if (t === 'response.output_item.added' && item.type === 'function_call_output') {
      const call = r.calls.get(item.call_id);
      if (call && !call.closed) close(call, typeof item.output === 'string' ? item.output : JSON.stringify(item.output));
    }
    const forwarded = clone(event);
    if (Number.isInteger(event.sequence_number)) {
      forwarded.sequence_number = event.sequence_number + shift;
      nextSeq = forwarded.sequence_number + 1;
    }
    if (Number.isInteger(event.output_index)) forwarded.output_index = clientIndex(event.output_index);
    if (forwarded.response && typeof forwarded.response === 'object') {
      if (companions && Array.isArray(forwarded.response.output)) {
        forwarded.response.output = withCompanions(forwarded.response.output);
      }
      forwarded.response.created_at = ANYTHING;
      forwarded.response.completed_at = ANYTHING;
    }
    out.push(forwarded);
    if (t === 'response.output_item.added' && item.type === 'function_call') {
      r.byIndex.set(event.output_index, { callId: item.call_id, name: item.name, kind: kindOf(item.name),
        fcItemId: item.id, fcIndex: forwarded.output_index, arguments: '', closed: false });
    }
    if (t === 'response.output_item.done' && item.type === 'function_call') {
      const call = r.byIndex.get(event.output_index);
      if (call && SHOWN.has(call.kind) && !r.calls.has(call.callId)) {
        call.arguments = item.arguments ?? '';
        open(call);
      }
    }
  }
  closeAll(); // the upstream stream ended
  return out;
}

/** The `response.output` of the expected stream's last response event. */
export function finalOutput(expected) {
  return expected.findLast((e) => e.response && typeof e.response === 'object').response.output;
}

/** Common checks on any stream through toolpulse (beyond matching the oracle). */
export function checkInvariants(events) {
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), 'not dense');
  const indexOf = new Map();
  for (const e of events) {
    if (e.type === 'response.output_item.added' || e.type === 'response.output_item.done') {
      if (!indexOf.has(e.item.id)) indexOf.set(e.item.id, e.output_index);
      assert.equal(indexOf.get(e.item.id), e.output_index, `${e.item.id} moved`);
    }
  }
  assert.equal(new Set(indexOf.values()).size, indexOf.size, 'an output_index is reused');
  const ids = (type, pred) => events.filter((e) => e.type === type && pred(e)).map((e) => e.item.id).sort();
  const isCompanion = (e) => e.item.id.startsWith(COMPANION_PREFIX);
  const added = ids('response.output_item.added', isCompanion);
  assert.deepEqual(added, ids('response.output_item.done', isCompanion), 'a companion added but not done');
  assert.equal(new Set(added).size, added.length, 'a companion added twice');
  const opened = events.filter((e) => INJECTED.test(e.type) && e.type.endsWith('.in_progress')).map((e) => e.item_id).sort();
  const closed = events.filter((e) => INJECTED.test(e.type) && /\.(completed|failed)$/.test(e.type)).map((e) => e.item_id).sort();
  assert.deepEqual(opened, closed, 'not closed exactly once');
  assert.ok(!events.some((e) => INJECTED.test(e.type) && 'error' in e), 'an injected event with an error key');
}

// ---------------------------------------------------------------- profile hosted (the default)
// docs/hosted.md; ../contract.py's HostedOracle carries the same rules.

// gateway.py's CALLS of each scenario, in the gateway's order: [call_id, name, arguments, output].
export const CALLS = {
  web: ['call_web_1', 'web_search', '{"query":"tool lifecycle events SSE"}', '[{"title":"Streaming tool progress","url":"https://example.com/a"}]'],
  file: ['call_file_1', 'file_search', '{"query":"lifecycle design doc"}', '[{"file_id":"file_1","filename":"design.md","score":0.92}]'],
  gh: ['call_gh_1', 'github_search_issues', '{"repo":"acme/agent","query":"stream stalls"}',
    '[{"number":42,"title":"Stream stalls during tool calls"},{"number":57,"title":"No progress shown"}]'],
  broken: ['call_gb_1', 'github_broken', '{"id":"7"}', BROKEN_OUTPUT],
  web_fail: ['call_web_2', 'web_search', '{"query":"flaky upstream"}', 'search failed: upstream timeout'],
  file_multi: ['call_file_2', 'file_search', '{"queries":["retry policy","backoff"]}', '[{"file_id":"file_2","filename":"retries.md","score":0.71}]'],
  gh_open: ['call_gh_2', 'github_search_issues', '{"repo":"acme/agent","query":"timeouts"}', null],
};

/**
 * The gateway's own function_call and function_call_output of `callId`, as the next turn must
 * give them back to it: call id, name, arguments and output exactly as gateway.py's CALLS; `id`
 * and `status`, if sent, as the gateway streamed them.
 */
export function gatewayPair(callId) {
  const [, name, args, output] = Object.values(CALLS).find((c) => c[0] === callId);
  const suffix = callId.replace(/^call_/, '');
  return [
    { type: 'function_call', call_id: callId, name, arguments: args, id: maybeAbsent(`fc_${suffix}`), status: maybeAbsent('completed') },
    { type: 'function_call_output', call_id: callId, output, id: maybeAbsent(`fco_${suffix}`), status: maybeAbsent('completed') },
  ];
}

/**
 * What the gateway must get for a client's `input`: each hosted item toolpulse made, and each
 * item_reference to one (`callOf(id)` names its call), replaced by the gateway's pair, in place.
 */
export function expectedNextTurn(sent, callOf) {
  return sent.flatMap((item) => {
    const callId = item?.id ? callOf(item.id) : undefined;
    const hosted = item?.type === 'item_reference' || Object.values(HOSTED_TYPES).includes(item?.type);
    return callId && hosted ? gatewayPair(callId) : [item];
  });
}

export const HOSTED_PREFIX = 'tph_';
export const HOSTED_TYPES = { mcp: 'mcp_call', web_search: 'web_search_call', file_search: 'file_search_call' };
export const HOSTED_NO_OUTPUT_TEXT = "The stream ended before the tool's output arrived.";
export const isFailure = (output) => FAILURE_PATTERNS.some((p) => p.test(output));

/**
 * The ids of hosted items, learnt as they are matched: any `tph_` string, bound to its call at
 * its first occurrence; from then on that call must carry the same id and no other call may.
 */
export class HostedIds {
  constructor() {
    this.byCall = new Map();
    this.callOf = new Map();
  }

  of(callId) {
    const ids = this;
    const m = new Matcher(`<the hosted id of ${callId}>`, (v) => {
      if (typeof v !== 'string' || !v.startsWith(HOSTED_PREFIX) || v.length <= HOSTED_PREFIX.length) return false;
      const bound = ids.byCall.get(callId);
      if (bound !== undefined) return v === bound;
      if (ids.callOf.has(v)) return false;
      ids.byCall.set(callId, v);
      ids.callOf.set(v, callId);
      return true;
    });
    m.callId = callId;
    return m;
  }

  get(callId) {
    return this.byCall.get(callId);
  }
}

/**
 * The events a client should see under profile `hosted` for the gateway's `upstream` events:
 * one native item (`tph_…`) per gateway-run call at its function_call's index, OpenAI's event
 * sequence, the output's index given up, dense sequence numbers. `declared`: the request's
 * function tool names (their calls stay untouched); `ids`: a HostedIds the ids bind to.
 */
export function expectedHostedStream(upstream, { declared = [], ids = new HostedIds() } = {}) {
  const declaredSet = new Set(declared);
  const out = [];
  let shift = 0;
  let nextSeq = null;
  const newResponse = () => ({ indexMap: new Map(), givenUp: 0, highest: -1, fcAt: new Map(), hidden: new Set(), calls: new Map() });
  let r = newResponse();

  const drop = (event) => {
    if (Number.isInteger(event.sequence_number)) {
      if (nextSeq === null) nextSeq = event.sequence_number + shift;
      shift -= 1;
    }
  };
  const injected = (type, fields) => {
    const event = { type };
    if (nextSeq !== null) event.sequence_number = nextSeq++;
    shift += 1;
    out.push(Object.assign(event, fields));
  };
  const clientIndex = (i) => {
    if (!r.indexMap.has(i)) {
      r.indexMap.set(i, i - r.givenUp);
      r.highest = Math.max(r.highest, i);
    }
    return r.indexMap.get(i);
  };
  const on = (call, type, fields) => injected(type, { item_id: ids.of(call.callId), output_index: call.index, ...fields });
  const initialItem = (call) => {
    const id = ids.of(call.callId);
    if (call.kind === 'mcp') {
      return { type: 'mcp_call', id, server_label: SERVER_LABEL, name: call.name, arguments: '', status: 'in_progress' };
    }
    // docs/hosted.md says "status in_progress"; OpenAI's type requires `action` (query unknown yet).
    if (call.kind === 'web_search') return { type: 'web_search_call', id, status: 'in_progress', action: { type: 'search' } };
    return { type: 'file_search_call', id, status: 'in_progress', queries: [] };
  };
  const close = (call, output) => {
    call.closed = true;
    const failed = output === null || isFailure(output);
    let args = null;
    try {
      args = JSON.parse(call.arguments);
    } catch { /* not JSON */ }
    if (args === null || typeof args !== 'object' || Array.isArray(args)) args = {};
    const final = { ...call.item, status: failed ? 'failed' : 'completed' };
    let terminal;
    if (call.kind === 'mcp') {
      terminal = failed ? 'response.mcp_call.failed' : 'response.mcp_call.completed';
      final.arguments = call.arguments;
      if (failed) {
        final.error = { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: output ?? HOSTED_NO_OUTPUT_TEXT }] };
      } else {
        final.output = output;
      }
    } else if (call.kind === 'web_search') {
      terminal = 'response.web_search_call.completed';
      final.action = { type: 'search', ...(typeof args.query === 'string' ? { query: args.query } : {}) };
    } else {
      terminal = 'response.file_search_call.completed';
      let queries = args.queries;
      if (!(Array.isArray(queries) && queries.every((q) => typeof q === 'string'))) {
        queries = typeof args.query === 'string' ? [args.query] : [];
      }
      final.queries = queries;
    }
    call.item = final;
    on(call, terminal, { name: call.name, outcome: failed ? 'failed' : 'completed', duration_ms: ANY_MS });
    injected('response.output_item.done', { output_index: call.index, item: clone(final) });
  };
  const closeAll = () => {
    for (const call of r.calls.values()) if (!call.closed) close(call, null);
  };
  const listing = (output) => output.flatMap((item) => {
    const call = item && typeof item === 'object' ? r.calls.get(item.call_id) : undefined;
    if (call && item.type === 'function_call') return [clone(call.item)];
    if (call && item.type === 'function_call_output' && call.outputGivenUp) return [];
    return [item];
  });

  const feed = (event) => {
    const t = event.type;
    const item = event.item && typeof event.item === 'object' ? event.item : {};
    const index = event.output_index;
    if (t === 'response.created') r = newResponse();
    if (TERMINAL_RESPONSE_EVENTS.has(t)) closeAll();
    // The hosted call's function_call item: its events become the hosted item's (the gateway's
    // own in-place lifecycle events on it, gateway.py `?spec023=1`, are dropped with the rest).
    if (Number.isInteger(index) && r.fcAt.has(index)) {
      const call = r.fcAt.get(index);
      drop(event);
      if (t === 'response.function_call_arguments.delta' && call.kind === 'mcp') {
        on(call, 'response.mcp_call_arguments.delta', { delta: event.delta, name: maybeAbsent(call.name) });
      } else if (t === 'response.output_item.done' && item.type === 'function_call') {
        call.arguments = item.arguments ?? '';
        if (call.kind === 'mcp') {
          call.item.arguments = call.arguments;
          on(call, 'response.mcp_call_arguments.done', { arguments: call.arguments, name: maybeAbsent(call.name) });
        } else {
          on(call, `response.${call.kind}_call.searching`, { name: call.name });
        }
      }
      return;
    }
    if (Number.isInteger(index) && r.hidden.has(index)) {
      drop(event);
      return;
    }
    if (t === 'response.output_item.added' && item.type === 'function_call_output') {
      const call = r.calls.get(item.call_id);
      if (call && !call.closed) {
        close(call, typeof item.output === 'string' ? item.output : JSON.stringify(item.output));
        if (index > r.highest) {
          r.hidden.add(index);
          r.givenUp += 1;
          r.highest = index;
          call.outputGivenUp = true;
          drop(event);
          return;
        }
      }
    }
    if (t === 'response.output_item.added' && item.type === 'function_call' && Number.isInteger(index)) {
      const kind = declaredSet.has(item.name) ? 'function' : kindOf(item.name ?? '');
      if (SHOWN.has(kind) && !r.calls.has(item.call_id)) {
        const call = { callId: item.call_id, name: item.name, kind, index: clientIndex(index), arguments: '', closed: false, outputGivenUp: false };
        call.item = initialItem(call);
        r.fcAt.set(index, call);
        r.calls.set(call.callId, call);
        drop(event);
        injected('response.output_item.added', { output_index: call.index, item: clone(call.item) });
        on(call, `response.${kind}_call.in_progress`, { name: call.name });
        return;
      }
    }
    const forwarded = clone(event);
    if (Number.isInteger(event.sequence_number)) {
      forwarded.sequence_number = event.sequence_number + shift;
      nextSeq = forwarded.sequence_number + 1;
    }
    if (Number.isInteger(index)) forwarded.output_index = clientIndex(index);
    if (forwarded.response && typeof forwarded.response === 'object') {
      if (Array.isArray(forwarded.response.output)) forwarded.response.output = listing(forwarded.response.output);
      forwarded.response.created_at = ANYTHING;
      forwarded.response.completed_at = ANYTHING;
    }
    out.push(forwarded);
  };
  for (const event of upstream) feed(event);
  closeAll(); // the upstream stream ended
  return out;
}

/**
 * The hosted shape's invariants on a stream through toolpulse (beyond matching the oracle):
 * numbers dense, each item added once and done once at one index, indices dense from `base`,
 * ids unique, each gateway-run call one `tph_` item and no function_call / function_call_output
 * of its own (but those of `clientCalls`), every injected event on a hosted item, opened and
 * closed once, without an `error` key.
 */
export function checkHostedInvariants(events, base, clientCalls = new Set()) {
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), 'not dense');
  const added = events.filter((e) => e.type === 'response.output_item.added');
  const done = events.filter((e) => e.type === 'response.output_item.done');
  const ids = added.map((e) => e.item.id);
  assert.equal(new Set(ids).size, ids.length, `an item added twice: ${ids}`);
  assert.deepEqual(done.map((e) => e.item.id).sort(), [...ids].sort(), 'an item added but not done');
  const indexOf = new Map(added.map((e) => [e.item.id, e.output_index]));
  for (const e of done) assert.equal(e.output_index, indexOf.get(e.item.id), `${e.item.id} moved`);
  const indices = [...new Set(events.filter((e) => Number.isInteger(e.output_index)).map((e) => e.output_index))].sort((a, b) => a - b);
  assert.deepEqual(indices, ids.map((_, i) => base + i), `indices not dense from ${base}`);
  const hosted = added.filter((e) => e.item.id.startsWith(HOSTED_PREFIX));
  assert.ok(hosted.length > 0 && hosted.every((e) => Object.values(HOSTED_TYPES).includes(e.item.type)));
  const leaked = added.filter((e) => ['function_call', 'function_call_output'].includes(e.item.type) && !clientCalls.has(e.item.call_id));
  assert.deepEqual(leaked.map((e) => e.item), [], "a gateway-run call's own item reached the client");
  const lifecycle = events.filter((e) => INJECTED.test(e.type) || e.type.startsWith('response.mcp_call_arguments.'));
  assert.ok(lifecycle.every((e) => e.item_id.startsWith(HOSTED_PREFIX) && !('error' in e)));
  const opened = lifecycle.filter((e) => e.type.endsWith('.in_progress')).map((e) => e.item_id).sort();
  const closed = lifecycle.filter((e) => /\.(completed|failed)$/.test(e.type)).map((e) => e.item_id).sort();
  assert.deepEqual(opened, closed, 'not closed exactly once');
  assert.deepEqual(opened, hosted.map((e) => e.item.id).sort());
}
