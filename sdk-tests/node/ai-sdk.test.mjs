// The Vercel AI SDK end to end through toolpulse: `node --test ai-sdk.test.mjs` (Node >= 22,
// which `ai` and `@ai-sdk/openai` require; run.sh uses the Node that package.json installs).
//
// `streamText` with `@ai-sdk/openai`'s Responses model, pointed at toolpulse (baseURL) in front
// of the scripted gateway (../gateway.py). The app declares no tools: the gateway runs them
// (function_call items), so without toolpulse the SDK sees only client-side calls it cannot
// run. Through toolpulse each classified call also has its native companion item, which the
// SDK shows as a provider-executed tool: the web and file searches from their
// `output_item.added` (in progress) to their result, the MCP calls as dynamic tools with their
// result. The next turn, built by the SDK from the first turn's messages, refers to those
// companions (`item_reference` with store on, an inline `web_search_call` with store off);
// toolpulse keeps them from the gateway.
//
// The tests above "profile hosted" pin `x-toolpulse-profiles: openai` (the companion shape, the
// older default). Profile hosted (docs/hosted.md), the default, shows each gateway-run call as
// one native item instead of the gateway's function_call + function_call_output: the SDK sees
// only provider-executed tools, so the turn finishes; the next turn's references to those items
// reach the gateway as its own pairs.
//
// Environment: TOOLPULSE_BIN, PYTHON (see harness.mjs).

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { streamText, readUIMessageStream } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

import {
  HERE, MODEL, PLAIN_MODEL, PLAIN_TEXT, FAILURES_MODEL, FINAL_TEXT, BROKEN_OUTPUT, TAG_HEADER,
  COMPANION_PREFIX, PROFILES_HEADER, HOSTED_PREFIX, HOSTED_TYPES, HOSTED_NO_OUTPUT_TEXT, CALLS,
  queryString, startStack, recordedRequests, assertMatch, expectedNextTurn, postHeldOutput,
} from './harness.mjs';

// The store-off turn makes the SDK warn that provider tool results are not sent: expected here.
globalThis.AI_SDK_LOG_WARNINGS = false;

assert.ok(Number(process.versions.node.split('.')[0]) >= 22,
  `the AI SDK needs Node >= 22, this is ${process.version} (run.sh installs one with npm ci)`);

const version = (pkg) => JSON.parse(readFileSync(path.join(HERE, 'node_modules', pkg, 'package.json'), 'utf8')).version;

let stack;
before(async () => {
  stack = await startStack();
});
after(() => stack?.stop());

/**
 * The provider, pointed at `addr`; `sent` collects the request bodies the SDK sends. `profile`
 * pins the presentation (null: the proxy's default, `hosted`).
 */
function provider(addr, { query = {}, headers = {}, profile = 'openai' } = {}) {
  const sent = [];
  const openai = createOpenAI({
    baseURL: `http://${addr}/v1`,
    apiKey: 'sk-e2e-not-a-key',
    headers: { ...(profile ? { [PROFILES_HEADER]: profile } : {}), ...headers },
    // The gateway's scenario knobs ride on the query string (baseURL cannot carry one).
    fetch: (url, init) => {
      sent.push(JSON.parse(init.body));
      return fetch(`${url}${queryString(query)}`, init);
    },
  });
  return { openai, sent };
}

/** streamText's full stream, each part with the ms since the start. */
async function run(addr, model, options = {}) {
  const { openai, sent } = provider(addr, options);
  const result = streamText({
    model: openai.responses(model),
    prompt: 'What is known about tool progress?',
    maxRetries: 0,
    ...options.streamText,
  });
  const t0 = performance.now();
  const parts = [];
  for await (const part of result.fullStream) {
    parts.push({ ...part, at: performance.now() - t0 });
    await options.onPart?.(part);
  }
  return { result, parts, sent, openai };
}

const ofCall = (parts, id) => parts.filter((p) => p.toolCallId === id || p.id === id);

describe(`Vercel AI SDK: ai ${version('ai')}, @ai-sdk/openai ${version('@ai-sdk/openai')}, Node ${process.version}`, () => {
  test('streamText: the searches are provider-executed tool calls with results, the MCP calls dynamic tools', async () => {
    // The gateway holds the web search's and the file search's outputs until the SDK has shown
    // each call (`?hold=`): "shown while the gateway still runs it" by the order of events, not
    // by a clock a loaded machine can stretch.
    const released = [];
    const release = async (callId) => {
      if (released.includes(callId)) return;
      released.push(callId);
      await postHeldOutput(stack.gatewayAddr, '', callId);
    };
    const { result, parts } = await run(stack.proxyAddr, MODEL, {
      query: { hold: 'call_web_1,call_file_1' },
      async onPart(part) {
        if (part.id === 'tp_call_web_1' || part.toolCallId === 'tp_call_web_1') await release('call_web_1');
        if (part.toolCallId === 'tp_call_file_1') await release('call_file_1');
      },
    });
    assert.deepEqual(parts.filter((p) => p.type === 'error'), []);
    assert.equal(await result.text, FINAL_TEXT);

    // The web search: a provider-executed call from the companion's output_item.added (while
    // the gateway still runs the tool), its result from the companion's output_item.done.
    const web = ofCall(parts, 'tp_call_web_1');
    assert.deepEqual(web.map((p) => p.type), ['tool-input-start', 'tool-input-end', 'tool-call', 'tool-result']);
    const [webStart, , webCall, webResult] = web;
    assert.equal(webStart.providerExecuted, true);
    assert.equal(webCall.toolName, 'web_search');
    assert.equal(webCall.providerExecuted, true);
    // The app declares no `web_search` tool (the gateway runs it), so the SDK flags the call
    // `invalid` (NoSuchToolError); the provider's result still follows.
    assert.equal(webCall.invalid, true);
    assert.equal(webResult.providerExecuted, true);
    assert.deepEqual(webResult.output, { action: { type: 'search', query: 'tool lifecycle events SSE' } });
    // Its start came while the gateway held the result: the release followed the start.
    assert.deepEqual(released, ['call_web_1', 'call_file_1']);

    const file = ofCall(parts, 'tp_call_file_1');
    assert.deepEqual(file.map((p) => [p.type, p.toolName, p.providerExecuted]),
      [['tool-call', 'file_search', true], ['tool-result', 'file_search', true]]);
    assert.deepEqual(file[1].output, { queries: ['lifecycle design doc'], results: null });

    // The MCP calls: dynamic, provider-executed tools named mcp.<tool>, with their output or error.
    const gh = ofCall(parts, 'tp_call_gh_1');
    assert.deepEqual(gh.map((p) => [p.type, p.toolName, p.providerExecuted, p.dynamic ?? null]), [
      ['tool-call', 'mcp.github_search_issues', true, true],
      ['tool-result', 'mcp.github_search_issues', true, null],
    ]);
    assert.deepEqual(gh[0].input, { repo: 'acme/agent', query: 'stream stalls' });
    const { output: ghOutput, arguments: ghArguments, ...ghResult } = gh[1].output;
    assert.deepEqual(ghResult, { type: 'call', serverLabel: 'gateway', name: 'github_search_issues' });
    assert.deepEqual(JSON.parse(ghArguments), { repo: 'acme/agent', query: 'stream stalls' });
    assert.equal(JSON.parse(ghOutput)[0].number, 42);
    const broken = ofCall(parts, 'tp_call_gb_1');
    assert.deepEqual(broken.map((p) => p.type), ['tool-call', 'tool-result']);
    assert.deepEqual(broken[1].output.error,
      { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: BROKEN_OUTPUT }] });

    // The SDK's own summaries of the step say the same.
    const results = (await result.toolResults).filter((r) => r.toolCallId.startsWith(COMPANION_PREFIX));
    assert.deepEqual(results.map((r) => [r.toolCallId, r.toolName, r.providerExecuted]), [
      ['tp_call_web_1', 'web_search', true], ['tp_call_file_1', 'file_search', true],
      ['tp_call_gb_1', 'mcp.github_broken', true], ['tp_call_gh_1', 'mcp.github_search_issues', true],
    ]);
    const calls = (await result.toolCalls).filter((c) => c.providerExecuted);
    assert.deepEqual(calls.map((c) => c.toolCallId).sort(), results.map((r) => r.toolCallId).sort());
    const steps = await result.steps;
    assert.equal(steps.length, 1);
    assert.deepEqual(steps[0].content.filter((p) => p.providerExecuted).map((p) => `${p.type}:${p.toolCallId}`), [
      'tool-call:tp_call_web_1', 'tool-result:tp_call_web_1', 'tool-call:tp_call_file_1', 'tool-result:tp_call_file_1',
      'tool-call:tp_call_gb_1', 'tool-result:tp_call_gb_1', 'tool-call:tp_call_gh_1', 'tool-result:tp_call_gh_1',
    ]);
  });

  test('the UI message: the web search a tool part in progress then done, the MCP calls dynamic-tool parts', async () => {
    const { openai } = provider(stack.proxyAddr);
    const result = streamText({ model: openai.responses(MODEL), prompt: 'x', maxRetries: 0 });
    const states = new Map(); // toolCallId -> the part's states, in order, as a UI renders them
    let message;
    for await (message of readUIMessageStream({ stream: result.toUIMessageStream() })) {
      for (const part of message.parts) {
        if (!part.toolCallId?.startsWith(COMPANION_PREFIX)) continue;
        const seen = states.get(part.toolCallId) ?? [];
        if (seen.at(-1) !== part.state) states.set(part.toolCallId, [...seen, part.state]);
      }
    }
    const companions = message.parts.filter((p) => p.toolCallId?.startsWith(COMPANION_PREFIX));
    assert.deepEqual(companions.map((p) => [p.type, p.toolCallId, p.state, p.providerExecuted]), [
      ['tool-web_search', 'tp_call_web_1', 'output-available', true],
      ['dynamic-tool', 'tp_call_file_1', 'output-available', true],
      ['dynamic-tool', 'tp_call_gb_1', 'output-available', true],
      ['dynamic-tool', 'tp_call_gh_1', 'output-available', true],
    ]);
    assert.deepEqual(companions.slice(2).map((p) => p.toolName), ['mcp.github_broken', 'mcp.github_search_issues']);
    // The parts' states as a UI renders them. The web search shows from the companion's
    // output_item.added ('input-streaming': running), before its result. The searches pass
    // through 'output-error' on the way: the SDK's NoSuchToolError for a provider tool the app
    // did not declare (ai 7.0; declaring `openai.tools.webSearch()` instead would make the
    // gateway's function_call of the same name a provider call with no result, which the SDK
    // rejects on the next turn). The MCP calls come whole at their companion's output_item.done.
    assert.deepEqual(Object.fromEntries(states), {
      tp_call_web_1: ['input-streaming', 'output-error', 'output-available'],
      tp_call_file_1: ['output-error', 'output-available'],
      tp_call_gb_1: ['input-available', 'output-available'],
      tp_call_gh_1: ['input-available', 'output-available'],
    });
    assert.equal(message.parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), FINAL_TEXT);
  });

  test('straight from the gateway (no toolpulse) nothing is provider-executed: the calls look client-side', async () => {
    const { result, parts } = await run(stack.gatewayAddr, MODEL);
    assert.equal(await result.text, FINAL_TEXT);
    assert.deepEqual(parts.filter((p) => p.providerExecuted), []);
    assert.deepEqual(await result.toolResults, []);
  });

  test('failures, a call never answered, antwort-style [DONE] and 1-based output_index', async () => {
    const { result, parts } = await run(stack.proxyAddr, FAILURES_MODEL, { query: { done: '1', base: '1' } });
    assert.deepEqual(parts.filter((p) => p.type === 'error'), []);
    const results = parts.filter((p) => ['tool-result', 'tool-error'].includes(p.type) && p.providerExecuted);
    assert.deepEqual(results.map((r) => [r.type, r.toolCallId, r.toolName]), [
      ['tool-error', 'tp_call_web_2', 'web_search'], ['tool-result', 'tp_call_file_2', 'file_search'],
      ['tool-result', 'tp_call_gb_1', 'mcp.github_broken'], ['tool-result', 'tp_call_gh_2', 'mcp.github_search_issues'],
    ]);
    // The failed search (its companion's status "failed") is the SDK's tool error of a hosted search.
    assert.deepEqual(results[0].error, { status: 'failed' });
    assert.deepEqual(results[1].output, { queries: ['retry policy', 'backoff'], results: null });
    // The unanswered MCP call is closed, failed, before response.completed.
    const never = results[3].output;
    assert.equal(never.error?.type, 'mcp_tool_execution_error', JSON.stringify(never));
    assert.equal(never.output, undefined);
    assert.ok(typeof never.error.content[0].text === 'string' && never.error.content[0].text.length > 0);
    assert.match(await result.text, /one tool never answered/);
  });

  for (const store of [true, false]) {
    test(`the next turn (store ${store ? 'on: item_references' : 'off: an inline web_search_call'}) reaches the gateway without companions`,
      async () => {
        const first = await run(stack.proxyAddr, MODEL);
        const { messages } = await first.result.response;
        const tag = `ai-sdk-replay-store-${store}`;
        const { openai, sent } = provider(stack.proxyAddr, { headers: { [TAG_HEADER]: tag } });
        const second = streamText({
          model: openai.responses(PLAIN_MODEL),
          messages: [{ role: 'user', content: 'What is known about tool progress?' }, ...messages,
            { role: 'user', content: 'And what about retries?' }],
          providerOptions: { openai: { store } },
          maxRetries: 0,
        });
        assert.equal(await second.text, PLAIN_TEXT);

        // What the SDK sent refers to the companions...
        assert.equal(sent.length, 1);
        const companions = sent[0].input.filter((i) => i.id?.startsWith(COMPANION_PREFIX));
        if (store) {
          assert.deepEqual(companions, ['tp_call_web_1', 'tp_call_file_1', 'tp_call_gb_1', 'tp_call_gh_1']
            .map((id) => ({ type: 'item_reference', id })));
        } else {
          assert.deepEqual(companions.map((i) => [i.type, i.id]), [['web_search_call', 'tp_call_web_1']]);
        }
        // ...and the gateway got exactly that, less the companions.
        const recorded = await recordedRequests(stack.gatewayAddr, tag);
        assert.equal(recorded.length, 1);
        assert.deepEqual(recorded[0].body.input, sent[0].input.filter((i) => !i.id?.startsWith(COMPANION_PREFIX)));
        assert.ok(!JSON.stringify(recorded[0].body.input).includes('"tp_'));
        assert.equal(recorded[0].body.model, PLAIN_MODEL);
      });
  }

  // ---------------------------------------------------------------- profile hosted (the default)

  // Each runs against the plain gateway and against one that emits antwort's in-place lifecycle
  // events on its function_call items (gateway.py `?spec023=1`), which toolpulse folds into its
  // hosted items: the same expectations.
  for (const [mode, extra] of [['', {}], [', spec023 gateway events', { spec023: '1' }]]) {
    test(`hosted (default)${mode}: streamText with no tools finishes; each gateway-run tool once, provider-executed, with its result`, async () => {
      const { result, parts } = await run(stack.proxyAddr, MODEL, { profile: null, query: { tool_ms: '60', ...extra } });
      assert.deepEqual(parts.filter((p) => p.type === 'error' || p.type === 'tool-error'), []);
      assert.equal(await result.finishReason, 'stop');
      assert.equal(await result.text, FINAL_TEXT);
      const steps = await result.steps;
      assert.equal(steps.length, 1);

      // No client-side call at all: everything the gateway ran is the provider's.
      const calls = parts.filter((p) => p.type === 'tool-call');
      assert.ok(calls.every((c) => c.providerExecuted === true), JSON.stringify(calls));
      // In the order their items are done: the broken MCP call answers before the other one.
      assert.deepEqual(calls.map((c) => [c.toolName, c.dynamic ?? null]), [
        ['web_search', true], ['file_search', true], ['mcp.github_broken', true], ['mcp.github_search_issues', true]]);
      const ids = calls.map((c) => c.toolCallId);
      assert.ok(ids.every((id) => id.startsWith(HOSTED_PREFIX)) && new Set(ids).size === 4, `${ids}`);
      // The app declares no `web_search` / `file_search` tool, so the SDK marks those calls
      // `invalid` (NoSuchToolError in `error`) and still takes the provider's result (no tool-error).
      assert.deepEqual(calls.map((c) => c.invalid ?? false), [true, true, false, false]);
      for (const call of calls) {
        const mine = parts.filter((p) => (p.toolCallId ?? p.id) === call.toolCallId);
        assert.deepEqual(mine.filter((p) => p.type === 'tool-call').length, 1);
        assert.deepEqual(mine.filter((p) => p.type.startsWith('tool-') && /result|error/.test(p.type)).map((p) => p.type),
          ['tool-result'], `${call.toolName}: ${JSON.stringify(mine)}`);
      }
      const output = (name) => parts.find((p) => p.type === 'tool-result' && p.toolName === name).output;
      assert.deepEqual(output('web_search'), { action: { type: 'search', query: JSON.parse(CALLS.web[2]).query } });
      assert.deepEqual(output('file_search'), { queries: [JSON.parse(CALLS.file[2]).query], results: null });
      assert.deepEqual(output('mcp.github_search_issues'), { type: 'call', serverLabel: 'gateway',
        name: 'github_search_issues', arguments: CALLS.gh[2], output: CALLS.gh[3] });
      assert.deepEqual(output('mcp.github_broken'), { type: 'call', serverLabel: 'gateway', name: 'github_broken',
        arguments: CALLS.broken[2], error: { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: BROKEN_OUTPUT }] } });
      // The web search shows from its item's output_item.added, while the gateway runs it.
      const web = parts.filter((p) => (p.toolCallId ?? p.id) === calls[0].toolCallId);
      assert.deepEqual(web.map((p) => p.type), ['tool-input-start', 'tool-input-end', 'tool-call', 'tool-result']);
      // Open question: on the wire the web_search_call is added 60 ms before it is done (the
      // gateway's pause; measured through toolpulse), yet streamText's parts for it come 16-18 ms
      // apart in every run, though @ai-sdk/openai enqueues tool-input-start at output_item.added.
      // The order is checked above; the time is reported, not asserted, until this is understood.
      console.log(`hosted web search shown running for ${(web[3].at - web[0].at).toFixed(0)} ms`);
    });

    test(`hosted (default)${mode}: failures, a call never answered, [DONE], 1-based output_index`, async () => {
      const { result, parts } = await run(stack.proxyAddr, FAILURES_MODEL,
        { profile: null, query: { done: '1', base: '1', tool_ms: '30', ...extra } });
      assert.deepEqual(parts.filter((p) => p.type === 'error'), []);
      assert.equal(await result.finishReason, 'stop');
      const calls = parts.filter((p) => p.type === 'tool-call');
      assert.deepEqual(calls.map((c) => [c.toolName, c.providerExecuted]), [['web_search', true], ['file_search', true],
        ['mcp.github_broken', true], ['mcp.github_search_issues', true]]);
      const results = parts.filter((p) => ['tool-result', 'tool-error'].includes(p.type));
      assert.deepEqual(results.map((r) => [r.type, r.toolCallId, r.toolName]),
        calls.map((c, i) => [i === 0 ? 'tool-error' : 'tool-result', c.toolCallId, c.toolName]));
      // The failed search (item status "failed") is the SDK's tool error of a hosted search.
      assert.deepEqual(results[0].error, { status: 'failed' });
      assert.deepEqual(results[1].output, { queries: ['retry policy', 'backoff'], results: null });
      assert.deepEqual(results[3].output.error, { type: 'mcp_tool_execution_error', content: [{ type: 'text', text: HOSTED_NO_OUTPUT_TEXT }] });
      assert.equal(results[3].output.output, undefined);
      assert.match(await result.text, /one tool never answered/);
    });
  }

  // What the SDK sends back (ai 7.0 / @ai-sdk/openai 4.0), from the first turn's response messages:
  // - store on (its default): an `item_reference` per provider-executed call (the tph_ ids:
  //   web_search, file_search, both MCP calls) and one for the message;
  // - store off: only the web search, inline (`web_search_call` with id, status, action); the
  //   file search and the MCP calls are not sent at all ("provider-executed tool results are not
  //   sent" when store is off), and the message goes as assistant text.
  // Whatever refers to a hosted item must reach the gateway as the gateway's own pair.
  for (const store of [true, false]) {
    test(`hosted (default): the next turn (store ${store}) gives the gateway its own function_call + output pairs`, async () => {
      const first = await run(stack.proxyAddr, MODEL, { profile: null, query: { tool_ms: '20' } });
      // The first turn's calls: the four hosted items (each tool appears once in this scenario).
      const keyOf = { web_search: 'web', file_search: 'file', 'mcp.github_broken': 'broken', 'mcp.github_search_issues': 'gh' };
      const firstCalls = first.parts.filter((p) => p.type === 'tool-call');
      assert.deepEqual(firstCalls.map((c) => [c.toolName, c.providerExecuted, c.toolCallId.startsWith(HOSTED_PREFIX)]),
        Object.keys(keyOf).map((name) => [name, true, true]));
      const callOfId = new Map(firstCalls.map((c) => [c.toolCallId, CALLS[keyOf[c.toolName]][0]]));
      assert.equal(callOfId.size, 4);
      const { messages } = await first.result.response;
      const tag = `ai-sdk-hosted-store-${store}`;
      const { openai, sent } = provider(stack.proxyAddr, { profile: null, headers: { [TAG_HEADER]: tag } });
      const second = streamText({
        model: openai.responses(PLAIN_MODEL),
        messages: [{ role: 'user', content: 'What is known about tool progress?' }, ...messages,
          { role: 'user', content: 'And what about retries?' }],
        providerOptions: { openai: { store } },
        maxRetries: 0,
      });
      assert.equal(await second.text, PLAIN_TEXT);
      assert.equal(sent.length, 1);
      const input = sent[0].input;
      const hosted = input.filter((i) => i.id?.startsWith(HOSTED_PREFIX));
      const order = ['web', 'file', 'broken', 'gh'].map((k) => CALLS[k][0]);
      if (store) {
        assert.deepEqual(hosted.map((i) => [i.type, callOfId.get(i.id)]), order.map((c) => ['item_reference', c]));
      } else {
        assert.deepEqual(hosted.map((i) => [i.type, callOfId.get(i.id)]), [['web_search_call', CALLS.web[0]]]);
      }
      const [recorded] = await recordedRequests(stack.gatewayAddr, tag).then((r) => (assert.equal(r.length, 1), r));
      const body = recorded.body;
      assert.equal(body.model, PLAIN_MODEL);
      assertMatch(body.input, expectedNextTurn(input, (id) => callOfId.get(id)), 'gateway input');
      assert.equal(body.input.length, input.length + hosted.length);
      const pairs = body.input.filter((i) => i.type === 'function_call' || i.type === 'function_call_output')
        .map((i) => [i.type, i.call_id]);
      assert.deepEqual(pairs, (store ? order : [CALLS.web[0]])
        .flatMap((c) => [['function_call', c], ['function_call_output', c]]));
      const text = JSON.stringify(body.input);
      assert.ok(!text.includes(HOSTED_PREFIX) && !text.includes('"tp_'), text);
      assert.ok(!body.input.some((i) => Object.values(HOSTED_TYPES).includes(i.type)));
    });
  }
});
