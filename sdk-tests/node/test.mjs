// openai-node end to end through toolpulse: `node --test test.mjs` (Node >= 22; run.sh uses the
// Node that package.json installs).
//
// Starts the scripted gateway (../gateway.py) and the real toolpulse binary in front of it,
// then drives openai-node's `client.responses.stream()` helper (and the raw `create` stream)
// through the proxy, over every agentic scenario of the gateway. The expected stream is derived
// from the gateway's own stream, read directly, by the contract's oracle (harness.mjs): a native
// companion item per classified call (`mcp_call`, `web_search_call`, `file_search_call`) with
// its lifecycle events, later items' output_index shifted, the companions in
// `response.completed`.
//
// The default presentation is profile `hosted` (docs/hosted.md): the hosted tests below send no
// profile header and check the stream against harness.mjs's hosted oracle; the companion-shape
// tests pin `x-toolpulse-profiles: openai` (the client's default header). The hosted cases named
// "…, spec023" run against a gateway that emits antwort's in-place lifecycle events on its
// function_call items (gateway.py `?spec023=1`): the client must see what the plain gateway gives.
//
// Every test runs once per SDK package in OPENAI_NODE_PACKAGES (default "openai openai-v6":
// package.json installs the latest openai-node as `openai` and the 6.x line as `openai-v6`).
//
// Environment: TOOLPULSE_BIN, PYTHON (see harness.mjs), OPENAI_NODE_PACKAGES.

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';

import {
  HERE, MODEL, PLAIN_MODEL, PLAIN_TEXT, FAILURES_MODEL, FINAL_TEXT, BROKEN_OUTPUT, PROFILES_HEADER,
  REQUEST_TIMEOUT_MS, TOOL_MS, SCENARIOS, COMPANION_PREFIX, INJECTED, PARALLEL_MODEL,
  HOSTED_PREFIX, HOSTED_NO_OUTPUT_TEXT, HostedIds, isFailure, CALLS,
  startStack, rawEvents, expectedStream, finalOutput, assertStream, assertMatch, settle,
  checkInvariants, checkHostedInvariants,
} from './harness.mjs';

let stack;
before(async () => {
  stack = await startStack();
});
after(() => stack?.stop());

const SDKS = [];
for (const pkg of (process.env.OPENAI_NODE_PACKAGES || 'openai openai-v6').split(/\s+/).filter(Boolean)) {
  const { default: OpenAI } = await import(pkg);
  const manifest = path.join(HERE, 'node_modules', pkg, 'package.json');
  const { version } = JSON.parse(readFileSync(manifest, 'utf8'));
  SDKS.push({ pkg, version, OpenAI });
}

const major = (version) => Number(version.split('.')[0]);
/** openai-node >= 7.6 checks, in responses.stream(), the item type behind hosted-tool events. */
function checksHostedItemTypes(version) {
  const [maj, minor] = version.split('.').map(Number);
  return maj > 7 || (maj === 7 && minor >= 6);
}

/** A client of `addr`; `profile` pins the presentation (null: the proxy's default, `hosted`). */
function makeClient(OpenAI, addr, profile = 'openai') {
  return new OpenAI({
    baseURL: `http://${addr}/v1`,
    apiKey: 'sk-e2e-not-a-key',
    timeout: REQUEST_TIMEOUT_MS,
    maxRetries: 0,
    defaultHeaders: profile ? { [PROFILES_HEADER]: profile } : {},
  });
}

// Fields the helper adds to the wire events (the text accumulated so far; the response text).
const HELPER_EXTRA_KEYS = new Set(['snapshot', 'output_text']);
const LISTENED = ['response.web_search_call.searching', 'response.file_search_call.completed',
  'response.mcp_call.in_progress', 'response.mcp_call.completed', 'response.mcp_call.failed',
  'response.output_item.added'];

// A plain copy of a helper event.
const plain = (event) => JSON.parse(JSON.stringify({ ...event }));

async function consumeHelper(client, model, query, headers = {}) {
  const stream = client.responses.stream({ model, input: 'What is known about tool progress?' },
    { query: { tool_ms: String(TOOL_MS), ...query }, headers });
  const named = [];
  for (const type of LISTENED) stream.on(type, (e) => named.push(e.type));
  const events = [];
  for await (const event of stream) events.push(plain(event));
  const final = await stream.finalResponse();
  return { events, final, named };
}

// Profile hosted: every agentic scenario, 0- and 1-based, with and without `data: [DONE]`.
const HOSTED_TOOL_MS = '40';
const HOSTED_SCENARIOS = {};
for (const [label, model] of [['agentic', MODEL], ['parallel', PARALLEL_MODEL], ['failures', FAILURES_MODEL]]) {
  for (const base of ['0', '1']) {
    for (const done of ['0', '1']) {
      HOSTED_SCENARIOS[`${label}${base === '1' ? ', 1-based' : ''}${done === '1' ? ', [DONE]' : ''}`] =
        { model, query: { base, done } };
    }
  }
}
// antwort's in-place lifecycle events (gateway.py `?spec023=1`): the gateway's own lifecycle events on its
// function_call items. Under `hosted` they fold into the hosted items: the same expectations as
// the plain gateway (the oracle's expected stream is plain mode's: the spec023 test below).
const PLAIN_HOSTED_SCENARIOS = { ...HOSTED_SCENARIOS };
for (const name of ['agentic', 'parallel', 'failures, 1-based, [DONE]']) {
  const { model, query } = HOSTED_SCENARIOS[name];
  HOSTED_SCENARIOS[`${name}, spec023`] = { model, query: { ...query, spec023: '1' } };
}
const SCENARIO_CALLS = { [MODEL]: ['web', 'file', 'gh', 'broken'], [PARALLEL_MODEL]: ['gh', 'web'],
  [FAILURES_MODEL]: ['web_fail', 'file_multi', 'broken', 'gh_open'] };
const WEB_SEARCH_FUNCTION = { type: 'function', name: 'web_search', description: 'my own web search', strict: true,
  parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'], additionalProperties: false } };

/** The final response's hosted items, spelled out from gateway.py's CALLS (beyond the oracle). */
function checkScenarioItems(response, model, ids) {
  const keys = SCENARIO_CALLS[model];
  const hosted = response.output.filter((i) => i.id.startsWith(HOSTED_PREFIX));
  assert.deepEqual(hosted.map((i) => i.id), keys.map((k) => ids.get(CALLS[k][0])));
  assert.equal(response.output.length, keys.length + 1); // and the message
  assert.equal(response.output.at(-1).type, 'message');
  keys.forEach((key, n) => {
    const [, name, args, output] = CALLS[key];
    const item = hosted[n];
    const failed = output === null || isFailure(output);
    assert.equal(item.status, failed ? 'failed' : 'completed', `${key}: ${JSON.stringify(item)}`);
    if (item.type === 'mcp_call') {
      assert.deepEqual([item.name, item.server_label, item.arguments], [name, 'gateway', args]);
      if (failed) {
        assert.equal(item.output ?? null, null);
        assert.deepEqual(item.error, { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: output ?? HOSTED_NO_OUTPUT_TEXT }] });
      } else {
        assert.equal(item.output, output);
      }
    } else if (item.type === 'web_search_call') {
      assert.deepEqual(item.action, { type: 'search', query: JSON.parse(args).query });
    } else {
      assert.equal(item.type, 'file_search_call');
      const parsed = JSON.parse(args);
      assert.deepEqual(item.queries, parsed.queries ?? [parsed.query]);
      assert.equal(item.results ?? null, null);
    }
  });
}

// ---------------------------------------------------------------- tests

test("harness.mjs's CALLS are gateway.py's", () => {
  const out = execFileSync(process.env.PYTHON || 'python3',
    ['-c', 'import json, gateway; print(json.dumps({k: list(v) for k, v in gateway.CALLS.items()}))'],
    { cwd: path.join(HERE, '..') });
  // Not the harness's: the held call is the MCP suites', confirm a client's tool (ag-ui.test.mjs).
  const { held, confirm, ...calls } = JSON.parse(out);
  assert.deepEqual(calls, CALLS);
});

test("harness.mjs's hosted oracle folds the gateway's in-place events: the expected stream is plain mode's", async () => {
  for (const [name, { model, query }] of Object.entries(PLAIN_HOSTED_SCENARIOS)) {
    const q = { ...query, tool_ms: '0' };
    const plain = await rawEvents(stack.gatewayAddr, model, q);
    const spec023 = await rawEvents(stack.gatewayAddr, model, { ...q, spec023: '1' });
    const lifecycle = spec023.filter((e) => INJECTED.test(e.type));
    assert.ok(lifecycle.length > 0 && lifecycle.every((e) => e.item_id.startsWith('fc_')), name);
    assert.equal(spec023.length, plain.length + lifecycle.length, name);
    assert.deepEqual(settle(expectedStream(spec023, 'hosted')), settle(expectedStream(plain, 'hosted')), name);
  }
});

for (const { pkg, version, OpenAI } of SDKS) {
  const client = (addr) => makeClient(OpenAI, addr);
  const hostedClient = (addr) => makeClient(OpenAI, addr, null);
  describe(`openai-node ${version} (${pkg})`, () => {
    for (const [name, { model, query }] of Object.entries(SCENARIOS)) {
      const oneBased = query.base === '1';
      if (oneBased && major(version) < 7) {
        // 6.x's accumulator indexes its output array by the wire output_index, so it rejects a
        // stream whose first item is at 1 ("missing output at index 1") straight from the
        // gateway, with no proxy involved: a limit of that SDK, pinned by the test below.
        test(`responses.stream() rejects 1-based output_index straight from the gateway (6.x limit; ${name} skipped)`,
          async () => {
            const stream = client(stack.gatewayAddr).responses.stream({ model, input: 'x' },
              { query: { ...query, tool_ms: '10' } });
            await assert.rejects(async () => { for await (const _ of stream) { /* drain */ } },
              /missing output at index 1/);
          });
        continue;
      }
      test(`responses.stream() + finalResponse(): ${name}`, async () => {
        const expected = expectedStream(await rawEvents(stack.gatewayAddr, model, query));
        const { events, final, named } = await consumeHelper(client(stack.proxyAddr), model, query);
        assertStream(events, expected, HELPER_EXTRA_KEYS);
        checkInvariants(events);
        // The final response: every gateway item plus the companions, as response.completed lists them.
        assertMatch(final.output, finalOutput(expected), 'final.output', HELPER_EXTRA_KEYS);
        assert.equal(final.status, 'completed');
        assert.equal(final.output_text, events.find((e) => e.type === 'response.output_text.done').text);
        // The helper's typed listeners fire for the injected events and the companions too.
        assert.deepEqual(named.sort(), events.map((e) => e.type).filter((t) => LISTENED.includes(t)).sort());
        if (name === 'agentic') {
          assert.deepEqual(final.output.map((item) => `${item.type}:${item.status}`), [
            'function_call:completed', 'web_search_call:completed', 'function_call_output:completed',
            'function_call:completed', 'file_search_call:completed', 'function_call_output:completed',
            'function_call:completed', 'mcp_call:completed', 'function_call:completed', 'mcp_call:failed',
            'function_call_output:completed', 'function_call_output:completed', 'message:completed',
          ]);
          const broken = final.output.find((item) => item.id === 'tp_call_gb_1');
          assert.deepEqual(broken.error, { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: BROKEN_OUTPUT }] });
          assert.equal(final.output_text, FINAL_TEXT);
        }
      });

      test(`responses.create({stream: true}) raw stream: ${name}`, async () => {
        const expected = expectedStream(await rawEvents(stack.gatewayAddr, model, query));
        const stream = await client(stack.proxyAddr).responses.create(
          { model, input: 'What is known about tool progress?', stream: true },
          { query: { tool_ms: String(TOOL_MS), ...query } },
        );
        const events = [];
        for await (const event of stream) events.push(event);
        assertStream(events, expected);
        checkInvariants(events);
      });
    }

    test('a no-tools stream comes out as the gateway sent it (profile openai and the default)', async () => {
      const collect = async (c) => {
        const stream = c.responses.stream({ model: PLAIN_MODEL, input: 'hello' });
        const events = [];
        for await (const event of stream) events.push(plain(event));
        const final = await stream.finalResponse();
        assert.equal(final.output_text, PLAIN_TEXT);
        for (const e of events) {
          if (e.response) {
            delete e.response.created_at;
            delete e.response.completed_at;
          }
        }
        return events;
      };
      const direct = await collect(hostedClient(stack.gatewayAddr));
      for (const c of [client(stack.proxyAddr), hostedClient(stack.proxyAddr)]) {
        const proxied = await collect(c);
        assert.deepEqual(proxied, direct);
        assert.ok(!proxied.some((e) => INJECTED.test(e.type)));
      }
    });

    // Profile openai-inline (opt-in) keeps the older shape: the lifecycle events point at the
    // function_call item itself, with no companion item and no index shift.
    test('x-toolpulse-profiles: openai-inline keeps the old shape (raw stream)', async () => {
      const headers = { [PROFILES_HEADER]: 'openai-inline' };
      const expected = expectedStream(await rawEvents(stack.gatewayAddr, MODEL), 'openai-inline');
      const stream = await client(stack.proxyAddr).responses.create(
        { model: MODEL, input: 'x', stream: true }, { query: { tool_ms: String(TOOL_MS) }, headers });
      const events = [];
      for await (const event of stream) events.push(event);
      assertStream(events, expected);
      checkInvariants(events);
      assert.ok(!events.some((e) => e.item?.id?.startsWith(COMPANION_PREFIX)));
    });
    if (checksHostedItemTypes(version)) {
      // This is why the default changed: from 7.6 on, the helper checks that the
      // item at a `response.{web_search,file_search,mcp}_call.*` event's output_index has that
      // native type, and the inline shape points them at a function_call item.
      test('x-toolpulse-profiles: openai-inline: the 7.6+ helper rejects it (why the default has companions)',
        async () => {
          const stream = client(stack.proxyAddr).responses.stream({ model: MODEL, input: 'x' },
            { query: { tool_ms: String(TOOL_MS) }, headers: { [PROFILES_HEADER]: 'openai-inline' } });
          await assert.rejects(async () => { for await (const _ of stream) { /* drain */ } },
            /expected output item type 'web_search_call', got 'function_call'/);
        });
    } else {
      test('x-toolpulse-profiles: openai-inline: the helper consumes it', async () => {
        const headers = { [PROFILES_HEADER]: 'openai-inline' };
        const expected = expectedStream(await rawEvents(stack.gatewayAddr, FAILURES_MODEL), 'openai-inline');
        const { events, final } = await consumeHelper(client(stack.proxyAddr), FAILURES_MODEL, {}, headers);
        assertStream(events, expected, HELPER_EXTRA_KEYS);
        assert.equal(final.output.length, 8); // the gateway's items only
      });
    }

    // ------------------------------------------------ profile hosted (the default: no header)
    for (const [name, { model, query }] of Object.entries(HOSTED_SCENARIOS)) {
      const base = Number(query.base ?? 0);
      const q = { ...query, tool_ms: HOSTED_TOOL_MS };
      test(`hosted (default): responses.create({stream: true}) raw stream: ${name}`, async () => {
        const ids = new HostedIds();
        const expected = expectedStream(await rawEvents(stack.gatewayAddr, model, q), 'hosted', { ids });
        const stream = await hostedClient(stack.proxyAddr).responses.create(
          { model, input: 'What is known about tool progress?', stream: true }, { query: q });
        const events = [];
        for await (const event of stream) events.push(event);
        assertStream(events, expected);
        checkHostedInvariants(events, base);
        checkScenarioItems(events.at(-1).response, model, ids);
      });
      // 6.x's accumulator rejects a first item at index 1 straight from the gateway (pinned
      // above, "responses.stream() rejects 1-based output_index"), so its helper is not run there.
      test(`hosted (default): responses.stream() + finalResponse(): ${name}`,
        { skip: base === 1 && major(version) < 7 ? '6.x helper: 1-based output_index (an SDK limit, see above)' : false },
        async () => {
          const ids = new HostedIds();
          const expected = expectedStream(await rawEvents(stack.gatewayAddr, model, q), 'hosted', { ids });
          const { events, final, named } = await consumeHelper(hostedClient(stack.proxyAddr), model, q);
          assertStream(events, expected, HELPER_EXTRA_KEYS);
          checkHostedInvariants(events, base);
          assertMatch(final.output, finalOutput(expected), 'final.output', HELPER_EXTRA_KEYS);
          assert.equal(final.status, 'completed');
          assert.deepEqual(named.sort(), events.map((e) => e.type).filter((t) => LISTENED.includes(t)).sort());
          checkScenarioItems(final, model, ids);
        });
    }

    test('hosted (default): a declared function tool named web_search stays the client\'s function_call', async () => {
      const ids = new HostedIds();
      const q = { tool_ms: HOSTED_TOOL_MS };
      const expected = expectedStream(await rawEvents(stack.gatewayAddr, MODEL, q), 'hosted',
        { ids, declared: ['web_search'] });
      const stream = await hostedClient(stack.proxyAddr).responses.create(
        { model: MODEL, input: 'x', stream: true, tools: [WEB_SEARCH_FUNCTION] }, { query: q });
      const events = [];
      for await (const event of stream) events.push(event);
      assertStream(events, expected);
      checkHostedInvariants(events, 0, new Set(['call_web_1']));
      assert.ok(!events.some((e) => e.type.startsWith('response.web_search_call.') || e.item?.type === 'web_search_call'));
      assert.deepEqual(events.at(-1).response.output.map((i) => i.type), [
        'function_call', 'function_call_output', 'file_search_call', 'mcp_call', 'mcp_call', 'message']);
    });
  });
}
