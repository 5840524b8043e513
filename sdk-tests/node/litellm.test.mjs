// openai-node and the Vercel AI SDK through toolpulse in front of the REAL LiteLLM proxy
// (1.108.7), profile `hosted` (docs/hosted.md), toolpulse's config/litellm.toml:
// `node --test litellm.test.mjs` (Node >= 22; run.sh uses the Node that package.json installs).
//
// The stack is ../litellm/stack.py (made by `bash sdk-tests/litellm/setup.sh`), started here as
// a script (`--json`: one line with its addresses once ready): LiteLLM, a scripted chat model
// `fake-gpt` and an MCP server `demo` whose tools take TOOL_MS. A request carrying MCP_TOOL makes
// LiteLLM stream the model's `function_call` demo-<tool>, run the tool, then stream its own
// `mcp_call` item and the model's answer. Through toolpulse the client sees ONE `mcp_call`
// (`tph_…`) instead, in progress from the function_call's start while the tool runs, with
// LiteLLM's output and status folded in (a failing tool: `failed`, `mcp_tool_execution_error`).
//
// - openai-node (each package in OPENAI_NODE_PACKAGES, default "openai openai-v6"): the raw
//   `responses.create({stream: true})` and the `responses.stream()` helper with finalResponse(),
//   for lookup_user (works) and fail_tool (fails), events timed against the MCP server's record;
// - the AI SDK: streamText with `openai.tools.mcp(...)`, which @ai-sdk/openai sends as exactly
//   the MCP request tool LiteLLM wants: one provider-executed dynamic call `mcp.demo-<tool>` with
//   its result, finishReason `stop`.
//
// Not asserted yet: the same response id on `response.created` and `response.completed` (LiteLLM
// 1.108.7 sends two; being fixed separately). openai-node >= 7 refuses such a stream in its
// helper ("Lifecycle response identity changed."): that test checks everything up to there and
// is then marked TODO (the run does not fail on it) until the ids agree.
//
// Environment: TOOLPULSE_BIN (see harness.mjs), PYTHON (default python3) to run stack.py,
// OPENAI_NODE_PACKAGES.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { streamText } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

import { HERE, REPO, startToolpulse } from './harness.mjs';

const TOOL_MS = 1500;
// The hosted item's in_progress must reach the client at least this long before its
// output_item.done (the tool takes TOOL_MS): room for a loaded 2-core machine either way.
const REALTIME_GAP_MS = 1000;
const REQUEST_TIMEOUT_MS = 60_000;
const STACK_TIMEOUT_MS = 240_000; // LiteLLM takes ~7 s; stack.py gives it LITELLM_START_TIMEOUT_S (180)
const CONFIG = path.join(REPO, 'config', 'litellm.toml');
const HOSTED_PREFIX = 'tph_';
const LITELLM_ITEM_PREFIX = 'mcp_'; // LiteLLM's own mcp_call / mcp_list_tools ids
const FAIL_OUTPUT = 'Error executing tool fail_tool';
const DONE_PREFIX = 'Done. The tool said: ';
const USER42 = { id: 42, name: 'user42', email: 'user42@example.test', active: true };

const CASES = {
  lookup_user: { prompt: 'Look up user 42', tool: 'lookup_user', arguments: '{"id": 42}', ok: true },
  fail_tool: { prompt: 'Please call the fail tool', tool: 'fail_tool', arguments: '{}', ok: false },
};
const nameOf = (kase) => `demo-${kase.tool}`;

// ---------------------------------------------------------------- the stack

const stackChildren = [];
// stack.py stops its three process groups on SIGTERM (SIGKILL would leave them running); it also
// stops when its stdin closes, should this process die without running this.
process.on('exit', () => {
  for (const child of stackChildren) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
});

/** ../litellm/stack.py --json: resolves to its JSON line (plus `stop()`, which awaits its exit). */
function startLiteLLM() {
  const python = process.env.PYTHON || 'python3';
  const child = spawn(python, [path.join(HERE, '..', 'litellm', 'stack.py'), '--tool-ms', String(TOOL_MS),
    '--json', '--stop-on-stdin-eof'], { cwd: REPO, stdio: ['pipe', 'pipe', 'pipe'] });
  stackChildren.push(child);
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const output = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      reject(new Error(`the LiteLLM stack was not ready in ${STACK_TIMEOUT_MS} ms:\n${output.join('')}`));
    }, STACK_TIMEOUT_MS);
    let buffered = '';
    child.stdout.on('data', (chunk) => {
      output.push(chunk.toString());
      buffered += chunk.toString();
      const line = buffered.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined || !buffered.includes('\n', buffered.indexOf(line))) return;
      clearTimeout(timer);
      const info = JSON.parse(line);
      resolve({
        ...info,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          const timeout = new Promise((r) => setTimeout(r, 20_000).unref());
          await Promise.race([exited, timeout]);
          child.stdin.end();
        },
      });
    });
    child.stderr.on('data', (chunk) => output.push(chunk.toString()));
    child.on('error', (err) => { clearTimeout(timer); reject(err); });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`stack.py exited (${code ?? signal}) before it was ready:\n${output.join('')}`));
    });
  });
}

async function getJSON(url) {
  const res = await fetch(url, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  assert.equal(res.status, 200, url);
  return res.json();
}
const mcpCalls = () => getJSON(lite.mcp_url.replace(/\/mcp$/, '/_calls'));
const modelRequests = () => getJSON(lite.model_url.replace(/\/v1$/, '/_requests'));

/** Runs `fn`, then returns what the stack saw meanwhile: the MCP tool calls and LiteLLM's model calls. */
async function watched(fn) {
  const [calls0, requests0] = [(await mcpCalls()).length, (await modelRequests()).length];
  await fn();
  return { calls: (await mcpCalls()).slice(calls0), requests: (await modelRequests()).slice(requests0) };
}

let lite;
let proxy;
before(async () => {
  lite = await startLiteLLM();
  proxy = await startToolpulse(lite.upstream, CONFIG);
});
after(async () => {
  proxy?.stop();
  await lite?.stop();
});

// ---------------------------------------------------------------- checks

const SDKS = [];
for (const pkg of (process.env.OPENAI_NODE_PACKAGES || 'openai openai-v6').split(/\s+/).filter(Boolean)) {
  const { default: OpenAI } = await import(pkg);
  const { version } = JSON.parse(readFileSync(path.join(HERE, 'node_modules', pkg, 'package.json'), 'utf8'));
  SDKS.push({ pkg, version, OpenAI });
}
const pkgVersion = (pkg) => JSON.parse(readFileSync(path.join(HERE, 'node_modules', pkg, 'package.json'), 'utf8')).version;

const makeClient = (OpenAI) => new OpenAI({
  baseURL: `http://${proxy.proxyAddr}/v1`, apiKey: lite.api_key, timeout: REQUEST_TIMEOUT_MS, maxRetries: 0,
});
const plain = (event) => JSON.parse(JSON.stringify({ ...event }));

/** Each event as the client got it, with its arrival time (ms; `wall`: Unix seconds, as the MCP server's record). */
async function collect(stream, into) {
  for await (const event of stream) {
    into.push({ event: plain(event), at: performance.now(), wall: (performance.timeOrigin + performance.now()) / 1000 });
  }
}

const itemsOf = (e) => [...(e.item && typeof e.item === 'object' ? [e.item] : []), ...(e.response?.output ?? [])];

/** The hosted item in its final state: LiteLLM's output and status folded in. */
function checkItem(item, kase) {
  assert.deepEqual([item.type, item.name, item.arguments], ['mcp_call', nameOf(kase), kase.arguments], JSON.stringify(item));
  assert.ok(item.id.startsWith(HOSTED_PREFIX), item.id);
  assert.ok(typeof item.server_label === 'string' && item.server_label !== '', JSON.stringify(item));
  assert.ok(!('approval_request_id' in item), `LiteLLM's item leaked into the hosted one: ${JSON.stringify(item)}`);
  if (kase.ok) {
    assert.deepEqual([item.status, item.error ?? null], ['completed', null], JSON.stringify(item));
    assert.ok(item.output.includes('user42'));
    assert.deepEqual(JSON.parse(item.output), USER42);
  } else {
    assert.deepEqual([item.status, item.output ?? null], ['failed', null], JSON.stringify(item));
    assert.deepEqual(item.error, { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: FAIL_OUTPUT }] });
  }
}
const expectedOutput = (kase, item) => (kase.ok ? item.output : FAIL_OUTPUT);

/**
 * One MCP turn's stream through toolpulse; returns the index of the hosted item's
 * output_item.done.
 */
function checkHostedStream(events, kase) {
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i), 'sequence_numbers not dense from 0');
  assert.equal(events[0].type, 'response.created');
  assert.equal(events.at(-1).type, 'response.completed');
  const ids = new Set(events.filter((e) => e.response && typeof e.response === 'object').map((e) => e.response.id));
  assert.equal(ids.size, 1, `one response id from response.created on: ${[...ids]}`);

  for (const e of events) {
    assert.ok(!/^response\.(function_call_arguments|mcp_list_tools)\./.test(e.type), JSON.stringify(e));
    assert.ok(!String(e.item_id ?? '').startsWith(LITELLM_ITEM_PREFIX), JSON.stringify(e));
    for (const item of itemsOf(e)) {
      assert.ok(!['function_call', 'function_call_output', 'mcp_list_tools'].includes(item.type),
        `${e.type} #${e.sequence_number} lists ${JSON.stringify(item)}`);
      assert.ok(!String(item.id ?? '').startsWith(LITELLM_ITEM_PREFIX),
        `LiteLLM's own item in ${e.type} #${e.sequence_number}: ${JSON.stringify(item)}`);
    }
  }

  const added = events.filter((e) => e.type === 'response.output_item.added');
  const done = events.filter((e) => e.type === 'response.output_item.done');
  assert.deepEqual(added.map((e) => [e.item.type, e.output_index]), [['mcp_call', 0], ['message', 1]]);
  assert.deepEqual(done.map((e) => [e.item.type, e.output_index]), [['mcp_call', 0], ['message', 1]]);
  const hostedId = added[0].item.id;
  assert.ok(hostedId.startsWith(HOSTED_PREFIX), hostedId);
  assert.equal(done[0].item.id, hostedId);
  assert.deepEqual([added[0].item.status, added[0].item.name, added[0].item.arguments], ['in_progress', nameOf(kase), '']);

  const mine = events.filter((e) => e.item_id === hostedId || e.item?.id === hostedId);
  const types = mine.map((e) => e.type);
  const terminal = kase.ok ? 'response.mcp_call.completed' : 'response.mcp_call.failed';
  assert.deepEqual(types.slice(0, 2), ['response.output_item.added', 'response.mcp_call.in_progress'], `${types}`);
  assert.deepEqual(types.slice(-3), ['response.mcp_call_arguments.done', terminal, 'response.output_item.done'], `${types}`);
  const deltas = types.slice(2, -3);
  assert.ok(deltas.length > 0 && deltas.every((t) => t === 'response.mcp_call_arguments.delta'), `${types}`);
  assert.ok(mine.every((e) => e.output_index === 0), JSON.stringify(mine));
  assert.equal(mine.filter((e) => e.type === 'response.mcp_call_arguments.delta').map((e) => e.delta).join(''), kase.arguments);
  assert.equal(mine.at(-3).arguments, kase.arguments);
  checkItem(done[0].item, kase);

  const text = events.find((e) => e.type === 'response.output_text.done').text;
  assert.equal(text, DONE_PREFIX + expectedOutput(kase, done[0].item));

  const final = events.at(-1).response;
  assert.equal(final.status, 'completed');
  assert.deepEqual(final.output.map((i) => i.type), ['mcp_call', 'message']);
  assert.deepEqual(final.output[0], done[0].item, 'response.completed lists the hosted item in another state');
  return events.indexOf(done[0]);
}

/** LiteLLM ran the tool once with the model's arguments and made its two model rounds. */
function checkStackSide(seen, kase) {
  assert.deepEqual(seen.calls.map((c) => [c.tool, c.arguments]), [[kase.tool, JSON.parse(kase.arguments)]]);
  assert.equal(seen.requests.length, 2);
  assert.equal(seen.requests[1].messages.at(-1).role, 'tool');
}

/** The hosted item was in progress on the client while the MCP server still ran the tool. */
function checkTiming(timed, doneIndex, seen) {
  const [call] = seen.calls;
  assert.ok(call.ended, JSON.stringify(call));
  const started = timed.findIndex((t) => t.event.type === 'response.mcp_call.in_progress');
  const gap = timed[doneIndex].at - timed[started].at;
  const timeline = `in_progress at ${(timed[started].wall - call.started).toFixed(3)}s and output_item.done at ` +
    `${(timed[doneIndex].wall - call.started).toFixed(3)}s from the tool's start; the tool ran ${(call.ended - call.started).toFixed(3)}s`;
  assert.ok(timed[started].wall < call.ended, `in_progress came after the tool finished: ${timeline}`);
  assert.ok(timed[doneIndex].wall >= call.ended - 0.002, `the item was done before the tool finished: ${timeline}`);
  assert.ok(gap >= REALTIME_GAP_MS, `in_progress only ${gap.toFixed(0)} ms before the item's done: ${timeline}`);
}

// ---------------------------------------------------------------- openai-node

for (const { pkg, version, OpenAI } of SDKS) {
  describe(`openai-node ${version} (${pkg}) through toolpulse in front of LiteLLM`, () => {
    for (const [key, kase] of Object.entries(CASES)) {
      test(`raw create stream: ${key}`, async () => {
        const timed = [];
        const seen = await watched(async () => {
          const stream = await makeClient(OpenAI).responses.create({
            model: lite.model, input: kase.prompt, tools: [lite.mcp_tool], stream: true,
          });
          await collect(stream, timed);
        });
        const doneIndex = checkHostedStream(timed.map((t) => t.event), kase);
        checkStackSide(seen, kase);
        checkTiming(timed, doneIndex, seen);
      });

      test(`responses.stream() helper and finalResponse(): ${key}`, async (t) => {
        const timed = [];
        let final;
        const seen = await watched(async () => {
          const stream = makeClient(OpenAI).responses.stream({ model: lite.model, input: kase.prompt, tools: [lite.mcp_tool] });
          await collect(stream, timed);
          final = await stream.finalResponse();
        });
        const doneIndex = checkHostedStream(timed.map((x) => x.event), kase);
        checkStackSide(seen, kase);
        checkTiming(timed, doneIndex, seen);
        assert.equal(final.id, timed[0].event.response.id);
        assert.equal(final.status, 'completed');
        assert.deepEqual(final.output.map((i) => i.type), ['mcp_call', 'message']);
        checkItem(final.output[0], kase);
        assert.deepEqual(plain(final.output[0]), timed[doneIndex].event.item);
        assert.equal(final.output_text, DONE_PREFIX + expectedOutput(kase, final.output[0]));
      });
    }
  });
}

// ---------------------------------------------------------------- the Vercel AI SDK

describe(`Vercel AI SDK (ai ${pkgVersion('ai')}, @ai-sdk/openai ${pkgVersion('@ai-sdk/openai')}) through toolpulse in front of LiteLLM`, () => {
  for (const [key, kase] of Object.entries(CASES)) {
    test(`streamText with openai.tools.mcp: ${key}`, async () => {
      const sent = [];
      const openai = createOpenAI({
        baseURL: `http://${proxy.proxyAddr}/v1`,
        apiKey: lite.api_key,
        fetch: (url, init) => {
          sent.push(JSON.parse(init.body));
          return fetch(url, init);
        },
      });
      let result;
      const parts = [];
      const seen = await watched(async () => {
        result = streamText({
          model: openai.responses(lite.model),
          prompt: kase.prompt,
          tools: { demo: openai.tools.mcp({ serverLabel: 'demo', serverUrl: 'litellm_proxy/mcp/demo', requireApproval: 'never' }) },
          maxRetries: 0,
        });
        for await (const part of result.fullStream) parts.push(part);
      });
      // The SDK sent the MCP request tool exactly as LiteLLM wants it, in one request.
      assert.equal(sent.length, 1);
      assert.deepEqual(sent[0].tools, [lite.mcp_tool]);
      checkStackSide(seen, kase);

      assert.deepEqual(parts.filter((p) => p.type === 'error' || p.type === 'tool-error'), []);
      assert.equal(await result.finishReason, 'stop');
      assert.equal((await result.steps).length, 1);
      const calls = parts.filter((p) => p.type === 'tool-call');
      const results = parts.filter((p) => p.type === 'tool-result');
      assert.equal(calls.length, 1, JSON.stringify(calls));
      assert.equal(results.length, 1, JSON.stringify(results));
      const [call] = calls;
      const [res] = results;
      assert.ok(call.toolCallId.startsWith(HOSTED_PREFIX), call.toolCallId);
      assert.deepEqual([call.toolName, call.providerExecuted, call.dynamic], [`mcp.${nameOf(kase)}`, true, true]);
      assert.deepEqual(call.input, JSON.parse(kase.arguments));
      assert.deepEqual([res.toolCallId, res.toolName, res.providerExecuted], [call.toolCallId, call.toolName, true]);
      // Every part about the call: the call and its result, once each.
      assert.deepEqual(parts.filter((p) => (p.toolCallId ?? p.id) === call.toolCallId).map((p) => p.type), ['tool-call', 'tool-result']);
      const { serverLabel, ...output } = res.output;
      assert.ok(typeof serverLabel === 'string' && serverLabel !== '', JSON.stringify(res.output));
      if (kase.ok) {
        assert.deepEqual(Object.keys(output).sort(), ['arguments', 'name', 'output', 'type']);
        assert.deepEqual([output.type, output.name, output.arguments], ['call', nameOf(kase), kase.arguments]);
        assert.deepEqual(JSON.parse(output.output), USER42);
      } else {
        // The failed call: the provider's result carries the error (no output).
        assert.deepEqual(output, { type: 'call', name: nameOf(kase), arguments: kase.arguments,
          error: { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: FAIL_OUTPUT }] } });
      }
      assert.equal(await result.text, DONE_PREFIX + (kase.ok ? output.output : FAIL_OUTPUT));
    });
  }
});
