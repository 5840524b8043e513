// toolpulse's AG-UI endpoint end to end: `node --test ag-ui.test.mjs` (Node >= 22; run.sh uses
// the Node that package.json installs).
//
// @ag-ui/client's HttpAgent runs against the real toolpulse binary (`[ag_ui]` on) in front of
// the scripted gateway (../gateway.py). `runAgent` verifies every event's order itself and
// throws on one out of order, and applies the events to `agent.messages`, which the next run
// sends back: so each test checks the events, the messages they made, and what the gateway got
// on the next turn. Nothing waits for a time: each step waits for the event before it.
//
// Environment: TOOLPULSE_BIN, PYTHON (see harness.mjs).

import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';
import { EventEncoder } from '@ag-ui/encoder';

import {
  MODEL, PLAIN_MODEL, FAILURES_MODEL, FINAL_TEXT, PLAIN_TEXT, BROKEN_OUTPUT, HELD_MODEL, HELD_CALL,
  TAG_HEADER, startStack, callMcpTool, postHeldOutput, recordedRequests,
} from './harness.mjs';

assert.ok(Number(process.versions.node.split('.')[0]) >= 22,
  `the Node suites need Node >= 22, this is ${process.version} (run.sh installs one with npm ci)`);

// gateway.py's scenarios and texts for these tests.
const FRONTEND_MODEL = 'toolpulse-frontend';
const CUT_MODEL = 'toolpulse-cut';
const ERROR_MODEL = 'toolpulse-error';
const ERROR_MESSAGE = 'The model is overloaded; try again later.';
// The agentic scenario's calls: [call_id, name, arguments, output] (gateway.py's CALLS).
const AGENTIC_CALLS = [
  ['call_web_1', 'web_search', '{"query":"tool lifecycle events SSE"}',
    '[{"title":"Streaming tool progress","url":"https://example.com/a"}]'],
  ['call_file_1', 'file_search', '{"query":"lifecycle design doc"}',
    '[{"file_id":"file_1","filename":"design.md","score":0.92}]'],
  ['call_gh_1', 'github_search_issues', '{"repo":"acme/agent","query":"stream stalls"}',
    '[{"number":42,"title":"Stream stalls during tool calls"},{"number":57,"title":"No progress shown"}]'],
  ['call_gb_1', 'github_broken', '{"id":"7"}', BROKEN_OUTPUT],
];
const [HELD_ID, , HELD_ARGUMENTS] = HELD_CALL;
const STEPS = JSON.parse(HELD_ARGUMENTS).steps;
const LABEL = JSON.parse(HELD_ARGUMENTS).label;
const RESULT_TEXT = `crunched ${LABEL} in ${STEPS} steps`; // mcp_server.py's result_text

let stack;
before(async () => {
  stack = await startStack({ mcp: { stepMs: 150 }, extraConfig: '\n[ag_ui]\nmodel = "gpt-toolpulse-e2e"\n' });
});
after(() => stack?.stop());

let tags = 0;
/** An HttpAgent on toolpulse's endpoint, its requests tagged so the gateway's record finds them. */
function agent(name) {
  const tag = `ag-ui-${name}-${++tags}`;
  const agent = new HttpAgent({
    url: `http://${stack.proxyAddr}/ag-ui`,
    headers: { authorization: 'Bearer sk-e2e-not-a-key', [TAG_HEADER]: tag },
    threadId: `thread-${tag}`,
  });
  agent.messages = [{ id: 'u1', role: 'user', content: 'Find what is known about stalls.' }];
  return { agent, tag };
}

/**
 * One run: answers its events in order (as the agent applied them) and the error `runAgent`
 * threw, if any. `onEvent(event)` sees each event as it arrives.
 */
async function run(agent, params, onEvent = () => {}) {
  const events = [];
  let error = null;
  try {
    await agent.runAgent(params, {
      onEvent: ({ event }) => {
        events.push(event);
        onEvent(event);
      },
    });
  } catch (e) {
    error = e;
  }
  return { events, error };
}

const ofCall = (events, id) => events.filter((e) => e.toolCallId === id || e.messageId === `activity-${id}`);
const types = (events) => events.map((e) => e.type);
const finalStatus = (events, id) => {
  const statuses = ofCall(events, id).filter((e) => e.type === 'ACTIVITY_DELTA')
    .flatMap((e) => e.patch.filter((op) => op.path === '/status').map((op) => op.value));
  assert.equal(statuses.length, 1, `one final status for ${id}: ${statuses}`);
  return statuses[0];
};

describe('AG-UI endpoint', () => {
  test('the agentic run: each gateway call while it runs, its exact result, then the answer; the next run sends the same history', async () => {
    const { agent: a, tag } = agent('agentic');
    const { events, error } = await run(a, { forwardedProps: { model: MODEL } });
    assert.equal(error, null, `runAgent failed: ${error?.stack}`);
    assert.equal(events[0].type, 'RUN_STARTED');
    assert.equal(events.at(-1).type, 'RUN_FINISHED');
    for (const [id, name, args, output] of AGENTIC_CALLS) {
      const own = ofCall(events, id);
      assert.deepEqual(types(own).slice(0, 2), ['TOOL_CALL_START', 'ACTIVITY_SNAPSHOT'], id);
      assert.equal(own[0].toolCallName, name);
      assert.deepEqual(own[1].content.status, 'running');
      const kind = name.startsWith('github_') ? 'mcp' : name;
      assert.equal(own[1].content.kind, kind);
      assert.equal(own.filter((e) => e.type === 'TOOL_CALL_ARGS').map((e) => e.delta).join(''), args);
      const end = own.findIndex((e) => e.type === 'TOOL_CALL_END');
      const result = own.findIndex((e) => e.type === 'TOOL_CALL_RESULT');
      assert.ok(end > 0 && result > end, `${id}: END before RESULT`);
      assert.equal(own[result].content, output);
      assert.equal(finalStatus(events, id), id === 'call_gb_1' ? 'failed' : 'completed');
    }
    const text = events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join('');
    assert.equal(text, FINAL_TEXT);
    assert.ok(!JSON.stringify(events).includes('sequence_number'));

    // agent.messages: each call in an assistant message, its result in a tool message.
    const byCall = new Map();
    for (const m of a.messages) {
      for (const call of m.toolCalls ?? []) byCall.set(call.id, { call, owner: m });
    }
    for (const [id, name, args, output] of AGENTIC_CALLS) {
      const entry = byCall.get(id);
      assert.ok(entry, `${id} is in an assistant message`);
      assert.equal(entry.owner.role, 'assistant');
      assert.deepEqual([entry.call.function.name, entry.call.function.arguments], [name, args]);
      const tools = a.messages.filter((m) => m.role === 'tool' && m.toolCallId === id);
      assert.equal(tools.length, 1, `one tool message for ${id}`);
      assert.equal(tools[0].content, output);
    }
    const answer = a.messages.filter((m) => m.role === 'assistant' && m.content);
    assert.deepEqual(answer.map((m) => m.content), [FINAL_TEXT]);
    assert.equal(a.messages.filter((m) => m.role === 'activity').length, AGENTIC_CALLS.length);

    // The next run: the gateway gets each call as its function_call and function_call_output.
    a.messages.push({ id: 'u2', role: 'user', content: 'Thanks.' });
    const next = await run(a, { forwardedProps: { model: PLAIN_MODEL } });
    assert.equal(next.error, null, `the second run failed: ${next.error?.stack}`);
    assert.equal(next.events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join(''), PLAIN_TEXT);
    const requests = await recordedRequests(stack.gatewayAddr, tag);
    assert.equal(requests.length, 2);
    assert.equal(requests[0].path, '/v1/responses');
    assert.equal(requests[0].body.stream, true);
    assert.deepEqual(requests[0].body.input, [{ type: 'message', role: 'user', content: 'Find what is known about stalls.' }]);
    const input = requests[1].body.input;
    const calls = input.filter((i) => i.type === 'function_call');
    const outputs = input.filter((i) => i.type === 'function_call_output');
    assert.deepEqual(calls.map((c) => [c.call_id, c.name, c.arguments]), AGENTIC_CALLS.map(([id, name, args]) => [id, name, args]));
    assert.deepEqual(
      new Map(outputs.map((o) => [o.call_id, o.output])),
      new Map(AGENTIC_CALLS.map(([id, , , output]) => [id, output])),
    );
    for (const [id] of AGENTIC_CALLS) {
      const at = (type) => input.findIndex((i) => i.type === type && i.call_id === id);
      assert.ok(at('function_call') < at('function_call_output'), `${id}: the call before its output`);
    }
    assert.deepEqual(input.at(-2), { type: 'message', role: 'assistant', content: FINAL_TEXT });
    assert.deepEqual(input.at(-1), { type: 'message', role: 'user', content: 'Thanks.' });
  });

  test('progress from the MCP front: activity deltas while the call runs, before its result', async () => {
    const { agent: a } = agent('progress');
    let tool = null;
    const { events, error } = await run(a, { forwardedProps: { model: HELD_MODEL } }, (event) => {
      // The gateway's part: once the call runs, run the tool through the MCP front, then post
      // its output.
      if (event.type === 'TOOL_CALL_END' && event.toolCallId === HELD_ID) {
        tool = (async () => {
          const result = await callMcpTool(stack.mcpUrl, 'crunch', JSON.parse(HELD_ARGUMENTS));
          const [text] = result.content.map((c) => c.text);
          await postHeldOutput(stack.gatewayAddr, text);
        })();
        tool.catch(() => {});
      }
    });
    assert.equal(error, null, `runAgent failed: ${error?.stack}`);
    await tool;
    const own = ofCall(events, HELD_ID);
    const progress = own.filter((e) => e.type === 'ACTIVITY_DELTA' && e.patch.some((op) => op.path === '/progress'));
    assert.ok(progress.length >= 1, `progress deltas: ${JSON.stringify(own)}`);
    const result = own.findIndex((e) => e.type === 'TOOL_CALL_RESULT');
    assert.ok(own.indexOf(progress.at(-1)) < result, 'every progress delta before the result');
    const last = Object.fromEntries(progress.at(-1).patch.map((op) => [op.path, op.value]));
    assert.equal(last['/total'], STEPS);
    assert.match(last['/message'], new RegExp(`^step \\d/${STEPS}: ${LABEL}$`));
    assert.equal(own[result].content, RESULT_TEXT);
    assert.equal(finalStatus(events, HELD_ID), 'completed');
    const activity = a.messages.find((m) => m.id === `activity-${HELD_ID}`);
    assert.equal(activity.content.status, 'completed');
    assert.equal(activity.content.total, STEPS);
  });

  test("a frontend tool over two runs: the client's call ends the run, its result goes back as the call's output", async () => {
    const { agent: a, tag } = agent('frontend');
    const tools = [{ name: 'confirm_action', description: 'Ask the user to confirm',
      parameters: { type: 'object', properties: { question: { type: 'string' } } } }];
    const first = await run(a, { tools, forwardedProps: { model: FRONTEND_MODEL } });
    assert.equal(first.error, null, `runAgent failed: ${first.error?.stack}`);
    assert.deepEqual(types(ofCall(first.events, 'call_confirm_1')),
      ['TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_ARGS', 'TOOL_CALL_END']);
    assert.equal(ofCall(first.events, 'call_web_1').find((e) => e.type === 'TOOL_CALL_RESULT').content, AGENTIC_CALLS[0][3]);
    assert.equal(first.events.at(-1).type, 'RUN_FINISHED');
    const owner = a.messages.find((m) => m.toolCalls?.some((c) => c.id === 'call_confirm_1'));
    assert.equal(owner.toolCalls.find((c) => c.id === 'call_confirm_1').function.arguments, '{"question":"Open issue #42?"}');
    assert.ok(!a.messages.some((m) => m.role === 'tool' && m.toolCallId === 'call_confirm_1'));

    // The frontend ran its tool; the next run carries its result.
    a.messages.push({ id: 'confirm-result', role: 'tool', toolCallId: 'call_confirm_1', content: 'yes, open it' });
    const second = await run(a, { tools, forwardedProps: { model: FRONTEND_MODEL } });
    assert.equal(second.error, null, `the second run failed: ${second.error?.stack}`);
    const text = second.events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta).join('');
    assert.equal(text, 'The user answered: yes, open it');
    const requests = await recordedRequests(stack.gatewayAddr, tag);
    assert.equal(requests.length, 2);
    assert.deepEqual(requests[1].body.tools, [{ type: 'function', ...tools[0], strict: false }]);
    assert.deepEqual(requests[1].body.input.slice(1), [
      { type: 'function_call', call_id: 'call_web_1', name: 'web_search', arguments: AGENTIC_CALLS[0][2] },
      { type: 'function_call_output', call_id: 'call_web_1', output: AGENTIC_CALLS[0][3] },
      { type: 'function_call', call_id: 'call_confirm_1', name: 'confirm_action', arguments: '{"question":"Open issue #42?"}' },
      { type: 'function_call_output', call_id: 'call_confirm_1', output: 'yes, open it' },
    ]);
  });

  test('a call the gateway never answers ends failed, without a result', async () => {
    const { agent: a } = agent('failures');
    const { events, error } = await run(a, { forwardedProps: { model: FAILURES_MODEL } });
    assert.equal(error, null, `runAgent failed: ${error?.stack}`);
    assert.ok(!ofCall(events, 'call_gh_2').some((e) => e.type === 'TOOL_CALL_RESULT'));
    assert.equal(finalStatus(events, 'call_gh_2'), 'failed');
    assert.equal(finalStatus(events, 'call_web_2'), 'failed');
    assert.ok(!a.messages.some((m) => m.role === 'tool' && m.toolCallId === 'call_gh_2'));
  });

  test('the wire: each event is what @ag-ui/encoder writes for it, and passes @ag-ui/core\'s schema', async () => {
    const res = await fetch(`http://${stack.proxyAddr}/ag-ui`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ threadId: 't-wire', runId: 'r-wire', state: {}, tools: [], context: [],
        messages: [{ id: 'u1', role: 'user', content: 'Go.' }], forwardedProps: { model: MODEL } }),
      signal: AbortSignal.timeout(30_000),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const raw = await res.text();
    // Heartbeat comments (`[heartbeat]`, 60 ms here) while a tool runs: clients skip them.
    const all = raw.split('\n\n').filter(Boolean);
    const blocks = all.filter((block) => !block.startsWith(':'));
    assert.ok(all.length > blocks.length, 'heartbeats while the tools ran');
    const events = blocks.map((block) => {
      assert.match(block, /^data: [^\n]*$/, 'one data line per event');
      return JSON.parse(block.slice('data: '.length));
    });
    for (const event of events) EventSchemas.parse(event);
    const encoder = new EventEncoder();
    assert.equal(events.map((e) => encoder.encodeSSE(e)).join(''), blocks.map((b) => `${b}\n\n`).join(''));
    // RUN_STARTED, RUN_FINISHED; per call START, SNAPSHOT, 2 ARGS, END, the query's DELTA (not
    // github_broken's: it has none), RESULT, the status DELTA; the message's START, 5 CONTENT, END.
    assert.equal(events.length, 2 + 4 * 8 - 1 + 2 + 5);
  });

  test('a cut stream and a gateway error end the run with RUN_ERROR and the reason', async () => {
    const { agent: a } = agent('cut');
    const cut = await run(a, { forwardedProps: { model: CUT_MODEL } });
    // RUN_ERROR is a run's end the verifier accepts: runAgent does not throw.
    assert.equal(cut.error, null, `runAgent failed: ${cut.error?.stack}`);
    assert.equal(cut.events.at(-1).type, 'RUN_ERROR');
    assert.equal(cut.events.at(-1).code, 'broken_stream');
    assert.equal(finalStatus(cut.events, 'call_web_1'), 'failed');
    assert.deepEqual(types(ofCall(cut.events, 'call_web_1')).filter((t) => t.startsWith('TOOL_CALL')),
      ['TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_ARGS', 'TOOL_CALL_END']);

    const { agent: b } = agent('error');
    const failed = await run(b, { forwardedProps: { model: ERROR_MODEL } });
    assert.equal(failed.error, null, `runAgent failed: ${failed.error?.stack}`);
    assert.deepEqual(types(failed.events), ['RUN_STARTED', 'RUN_ERROR']);
    assert.equal(failed.events[1].message, ERROR_MESSAGE);
    assert.equal(failed.events[1].code, 'overloaded');
  });
});
