// The AI SDK recipe (examples/ai-sdk/route.mjs) end to end: `node --test ai-sdk-recipe.test.mjs`
// (Node >= 22; run.sh uses the Node that package.json installs).
//
// The recipe's `POST` is called with a `Request` as a Next.js route would be, its provider
// pointed at toolpulse (OPENAI_BASE_URL) in front of the scripted gateway (../gateway.py), and
// the UI message stream of its `Response` is read as `useChat` reads it (parseJsonEventStream,
// readUIMessageStream). In the held scenario the gateway streams one MCP call, demo_crunch, and
// holds its output: the test, playing the gateway, runs the tool through toolpulse's MCP front
// (mcp_server.py reports each step's progress, which toolpulse puts into the client stream) and
// then posts the output. Nothing here waits for a time: each step waits for the event before it.
//
// Without the recipe the AI SDK shows that call only with its result (the last test).
//
// Environment: TOOLPULSE_BIN, PYTHON (see harness.mjs).

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { registerHooks } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { parseJsonEventStream, readUIMessageStream, streamText, toUIMessageStream, uiMessageChunkSchema } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

import {
  HERE, REPO, PLAIN_MODEL, PLAIN_TEXT, FAILURES_MODEL, HELD_MODEL, HELD_TEXT, HELD_CALL, HOSTED_PREFIX, HOSTED_NO_OUTPUT_TEXT, BROKEN_OUTPUT,
  PROFILES_HEADER, startStack, callMcpTool, postHeldOutput,
} from './harness.mjs';

assert.ok(Number(process.versions.node.split('.')[0]) >= 22,
  `the AI SDK needs Node >= 22, this is ${process.version} (run.sh installs one with npm ci)`);

// The recipe lives outside this package (examples/ai-sdk/, for users to copy): its `ai` and
// `@ai-sdk/openai` are resolved here, from the versions package.json pins.
const EXAMPLE = path.join(REPO, 'examples', 'ai-sdk');
registerHooks({
  resolve(specifier, context, next) {
    const fromExample = context.parentURL?.startsWith(pathToFileURL(EXAMPLE + path.sep).href);
    return next(specifier, fromExample && /^(ai|@ai-sdk\/)/.test(specifier)
      ? { ...context, parentURL: pathToFileURL(path.join(HERE, 'index.mjs')).href } : context);
  },
});

const [HELD_ID, HELD_NAME, HELD_ARGUMENTS] = HELD_CALL;
const STEPS = JSON.parse(HELD_ARGUMENTS).steps;
const LABEL = JSON.parse(HELD_ARGUMENTS).label;
const RESULT_TEXT = `crunched ${LABEL} in ${STEPS} steps`; // mcp_server.py's result_text
const stepMessage = (k) => `step ${k}/${STEPS}: ${LABEL}`; // mcp_server.py's message

let stack;
let recipe;
before(async () => {
  stack = await startStack({ mcp: { stepMs: 150 } });
  process.env.OPENAI_BASE_URL = `http://${stack.proxyAddr}/v1`;
  process.env.OPENAI_API_KEY = 'sk-e2e-not-a-key';
  recipe = await import(pathToFileURL(path.join(EXAMPLE, 'route.mjs')).href);
});
after(() => stack?.stop());

/**
 * The gateway's part in the held scenario: runs demo_crunch through the MCP front, then posts
 * its output. Started while the stream is read; its failure is the test's when awaited.
 */
function runHeldTool() {
  const run = (async () => {
    const result = await callMcpTool(stack.mcpUrl, 'crunch', JSON.parse(HELD_ARGUMENTS));
    const [text] = result.content.map((c) => c.text);
    assert.equal(text, RESULT_TEXT);
    await postHeldOutput(stack.gatewayAddr, text);
  })();
  run.catch(() => {}); // awaited after the stream
  return run;
}

const seconds = (ms) => `${(ms / 1000).toFixed(3)} s`;

/**
 * POSTs `{messages}` to the recipe's route with `model` and reads its UI message stream as a
 * client does. `onUpdate(message)` sees each state of the message. Answers the final message
 * and the timeline: each new data-tool-status value and each new tool part state, in order,
 * with the ms since the request.
 */
async function chat(model, onUpdate = () => {}) {
  process.env.OPENAI_MODEL = model;
  const t0 = performance.now();
  const res = await recipe.POST(new Request('http://app.test/api/chat', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Crunch the numbers.' }] }] }),
  }));
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const chunks = parseJsonEventStream({ stream: res.body, schema: uiMessageChunkSchema }).pipeThrough(new TransformStream({
    transform(parsed, controller) {
      assert.ok(parsed.success, `not a UI message chunk: ${parsed.error}`);
      controller.enqueue(parsed.value);
    },
  }));
  const timeline = [];
  const last = new Map();
  let message;
  for await (message of readUIMessageStream({ stream: chunks })) {
    const at = performance.now() - t0;
    for (const part of message.parts) {
      let entry;
      if (part.type === 'data-tool-status') entry = { kind: 'status', id: part.id, data: part.data };
      else if (part.toolCallId) entry = { kind: 'tool', id: part.toolCallId, state: part.state, part };
      else continue;
      const key = `${entry.kind}:${entry.id}`;
      const value = JSON.stringify(entry.data ?? entry.state);
      if (last.get(key) === value) continue;
      last.set(key, value);
      timeline.push({ ...entry, at });
    }
    onUpdate(message);
  }
  return { message, timeline };
}

const texts = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

describe('Vercel AI SDK recipe (examples/ai-sdk/route.mjs): gateway-run calls shown while they run', () => {
  // First, so that the times the next tests print are the stream's, not the first request's
  // warm-up (about 0.2 s more on a loaded machine).
  test('a turn without tools: the text, no status part', async () => {
    const { message, timeline } = await chat(PLAIN_MODEL);
    assert.deepEqual(timeline, []);
    assert.equal(texts(message), PLAIN_TEXT);
  });

  test('the MCP call: running, then its progress, before its result; then completed', async () => {
    let tool;
    const { message, timeline } = await chat(HELD_MODEL, (m) => {
      // The gateway runs the tool once the client shows it running: every later event is the tool's.
      if (!tool && m.parts.some((p) => p.type === 'data-tool-status' && p.data.status === 'running')) tool = runHeldTool();
    });
    assert.ok(tool, 'the call was never shown running');
    await tool;

    const statuses = timeline.filter((e) => e.kind === 'status');
    const parts = timeline.filter((e) => e.kind === 'tool');
    const id = statuses[0].id;
    assert.ok(id.startsWith(HOSTED_PREFIX), id);
    assert.deepEqual(statuses[0].data, { callId: id, name: HELD_NAME, server: 'gateway', status: 'running' });
    // The tool's reports, in order: toolpulse may merge reports that come closer than its
    // interval, never the last one.
    const progress = statuses.filter((e) => e.data.progress !== undefined && e.data.status === 'running');
    assert.ok(progress.length >= 1, JSON.stringify(statuses));
    const steps = progress.map((e) => e.data.progress);
    assert.deepEqual(steps, [...new Set(steps)].sort(), `${steps}`);
    assert.equal(steps.at(-1), STEPS);
    for (const e of progress) {
      assert.deepEqual(e.data, { callId: id, name: HELD_NAME, server: 'gateway', status: 'running',
        progress: e.data.progress, total: STEPS, message: stepMessage(e.data.progress) });
    }
    assert.deepEqual(statuses.at(-1).data, { callId: id, name: HELD_NAME, server: 'gateway', status: 'completed',
      progress: STEPS, total: STEPS, message: stepMessage(STEPS) });
    assert.equal(new Set(statuses.map((e) => e.id)).size, 1);
    assert.deepEqual(message.parts.filter((p) => p.type === 'data-tool-status').map((p) => p.data.status), ['completed'],
      'one status part, updated in place');

    // The AI SDK's own tool part (same id) comes only with the result, after all of that.
    assert.deepEqual(message.parts.filter((p) => p.type === 'error' || p.errorText), []);
    assert.deepEqual(parts.map((e) => [e.id, e.part.type, e.state]),
      [[id, 'dynamic-tool', 'input-available'], [id, 'dynamic-tool', 'output-available']]);
    const result = parts.at(-1);
    assert.equal(result.part.toolName, `mcp.${HELD_NAME}`);
    assert.deepEqual(result.part.output, { type: 'call', serverLabel: 'gateway', name: HELD_NAME,
      arguments: HELD_ARGUMENTS, output: RESULT_TEXT });
    const running = timeline.indexOf(statuses[0]);
    const firstProgress = timeline.indexOf(progress[0]);
    const shown = timeline.indexOf(parts[0]);
    assert.ok(running < firstProgress && firstProgress < shown, JSON.stringify(timeline.map((e) => [e.kind, e.state ?? e.data])));
    assert.equal(texts(message), HELD_TEXT);
    console.log(`recipe: running at ${seconds(statuses[0].at)}, progress ${steps.join(', ')}/${STEPS} from ` +
      `${seconds(progress[0].at)} to ${seconds(progress.at(-1).at)}, the result at ${seconds(result.at)}`);
  });

  test('every gateway-run call gets its status: failed searches and MCP calls end failed, with the error', async () => {
    const { message, timeline } = await chat(FAILURES_MODEL);
    const statuses = timeline.filter((e) => e.kind === 'status');
    const ids = [...new Set(statuses.map((e) => e.id))];
    assert.equal(ids.length, 4);
    const of = (id) => statuses.filter((e) => e.id === id).map((e) => e.data);
    assert.deepEqual(ids.map((id) => of(id).map((d) => d.status)),
      [['running', 'failed'], ['running', 'completed'], ['running', 'failed'], ['running', 'failed']]);
    assert.deepEqual(ids.map((id) => [of(id)[0].name, of(id)[0].server ?? null]), [
      ['web_search', null], ['file_search', null], ['github_broken', 'gateway'], ['github_search_issues', 'gateway']]);
    assert.equal(of(ids[2]).at(-1).message, BROKEN_OUTPUT);
    assert.equal(of(ids[3]).at(-1).message, HOSTED_NO_OUTPUT_TEXT);
    assert.equal(of(ids[0]).at(-1).message, undefined); // a failed web_search_call carries no error
    // Each status part's id is the toolCallId of the AI SDK's part for the same call, which it
    // shows (here: all of them) only after the status part says running.
    for (const id of ids) {
      const tool = timeline.findIndex((e) => e.kind === 'tool' && e.id === id);
      assert.ok(tool > timeline.findIndex((e) => e.kind === 'status' && e.id === id), id);
    }
    assert.deepEqual(message.parts.filter((p) => p.toolCallId).map((p) => p.toolCallId), ids);
    assert.match(texts(message), /one tool never answered/);
  });

  test('without the recipe the AI SDK shows the MCP call only with its result, progress or not', async () => {
    // Plain streamText, as route.mjs would be without its data parts; the raw parts only to see
    // when toolpulse's events came.
    const openai = createOpenAI({ baseURL: `http://${stack.proxyAddr}/v1`, apiKey: 'sk-e2e-not-a-key',
      headers: { [PROFILES_HEADER]: 'hosted,progress' } });
    const result = streamText({ model: openai.responses(HELD_MODEL), prompt: 'Crunch the numbers.', maxRetries: 0,
      include: { rawChunks: true } });
    const t0 = performance.now();
    const parts = [];
    let tool;
    for await (const part of result.stream) {
      parts.push({ ...part, at: performance.now() - t0 });
      const raw = part.type === 'raw' ? part.rawValue : null;
      if (!tool && raw?.type === 'response.output_item.added' && raw.item?.type === 'mcp_call') tool = runHeldTool();
    }
    assert.ok(tool, 'no mcp_call on the wire');
    await tool;
    assert.deepEqual(parts.filter((p) => p.type === 'error'), []);
    const wire = parts.filter((p) => p.type === 'raw');
    const added = wire.find((p) => p.rawValue.type === 'response.output_item.added' && p.rawValue.item?.type === 'mcp_call');
    const id = added.rawValue.item.id;
    const progress = wire.filter((p) => p.rawValue.type === 'response.mcp_call.progress');
    const done = wire.find((p) => p.rawValue.type === 'response.output_item.done' && p.rawValue.item?.id === id);
    assert.equal(progress.at(-1)?.rawValue.progress, STEPS);
    assert.equal(done.rawValue.item.status, 'completed');
    // The SDK's own parts for the call: none from the item's start to its end, then both at once.
    const own = parts.filter((p) => p.type !== 'raw' && (p.toolCallId ?? p.id) === id);
    assert.deepEqual(own.map((p) => [p.type, p.toolName, p.providerExecuted, p.dynamic ?? null]),
      [['tool-call', `mcp.${HELD_NAME}`, true, true], ['tool-result', `mcp.${HELD_NAME}`, true, null]]);
    assert.ok(parts.indexOf(own[0]) > parts.indexOf(done), 'the SDK showed the call before its item was done');
    // As a UI message: one dynamic-tool part, never in a running state.
    const states = [];
    for await (const message of readUIMessageStream({ stream: toUIMessageStream({ stream: ReadableStream.from(parts.map(({ at, ...p }) => p)) }) })) {
      const part = message.parts.find((p) => p.toolCallId === id);
      if (part && states.at(-1) !== part.state) states.push(part.state);
    }
    assert.deepEqual(states, ['input-available', 'output-available']);
    console.log(`plain AI SDK: mcp_call in_progress on the wire at ${seconds(added.at)}, progress from ` +
      `${seconds(progress[0].at)}, the SDK's tool-call and tool-result at ${seconds(own[0].at)} (item done at ${seconds(done.at)})`);
  });
});
