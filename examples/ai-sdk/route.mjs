// A chat route for the Vercel AI SDK (`ai` 7, `@ai-sdk/openai` 4) behind toolpulse that shows
// the tools the gateway runs (MCP calls, web and file searches) WHILE they run, with the
// progress the tools report, before their results. Copy it to app/api/chat/route.js (Next.js
// App Router; any server that hands a `Request` to `POST` works) and use `useChat` on the page.
//
// Why a recipe: the AI SDK shows a gateway-run MCP call only once it is done. toolpulse (profile
// `hosted`) streams the call as an `mcp_call` item from the moment it starts, but @ai-sdk/openai
// turns that item into a tool part only at its `response.output_item.done`: `tool-call` and
// `tool-result` come together, after the tool has finished. The progress events it ignores.
// Every event still reaches `streamText` as a `raw` part when `include.rawChunks` is on; this
// route turns them into one data part per call, `data-tool-status`, which the client's
// message updates in place (the AI SDK replaces a data part written again with the same id).
//
// What toolpulse sends for one call (profile `hosted` plus `progress`, asked for in the
// `x-toolpulse-profiles` header below; without `progress` there are no progress events):
//   response.output_item.added  {item: {type: 'mcp_call', id: 'tph_…', status: 'in_progress',
//                                       name: 'demo_crunch', server_label: 'gateway', …}}
//   response.mcp_call.progress  {item_id: 'tph_…', name, progress: 1, total: 3,
//                                message: 'step 1/3: the numbers'}          (per report)
//   response.output_item.done   {item: {…, status: 'completed' | 'failed', output | error}}
// and the same for `web_search_call` / `file_search_call` (`response.web_search_call.progress`,
// …). The item id is the toolCallId of the AI SDK's tool part for the call, so a page can put
// the status beside that part. The status part, as the client sees it:
//   {type: 'data-tool-status', id: 'tph_…', data: {callId: 'tph_…', name: 'demo_crunch',
//    server: 'gateway', status: 'running' | 'completed' | 'failed', progress?, total?, message?}}
//
// Environment: OPENAI_BASE_URL = toolpulse's URL with /v1 (say http://toolpulse:8080/v1),
// OPENAI_API_KEY = what the gateway expects, OPENAI_MODEL = the gateway's model.

import {
  convertToModelMessages, createUIMessageStream, createUIMessageStreamResponse, streamText, toUIMessageStream,
} from 'ai';
import { createOpenAI } from '@ai-sdk/openai';

const openai = createOpenAI({ headers: { 'x-toolpulse-profiles': 'hosted,progress' } });

export async function POST(req) {
  const { messages } = await req.json();
  return toolProgressStream({ model: openai.responses(process.env.OPENAI_MODEL ?? 'gpt-5-mini'), messages });
}

/** `streamText` over the UI `messages`, as a UI message stream response with a status part per gateway-run call. */
export async function toolProgressStream({ model, messages, ...options }) {
  const modelMessages = await convertToModelMessages(messages);
  const stream = createUIMessageStream({
    execute({ writer }) {
      const calls = new Map(); // item id -> the call's status, while it runs
      const result = streamText({
        ...options,
        model,
        messages: modelMessages,
        include: { ...options.include, rawChunks: true },
        // Called for every part, raw ones included, as the stream is read: in real time.
        onChunk(event) {
          const data = event.chunk.type === 'raw' ? toolStatus(calls, event.chunk.rawValue) : undefined;
          if (data) writer.write({ type: 'data-tool-status', id: data.callId, data });
          return options.onChunk?.(event);
        },
      });
      writer.merge(toUIMessageStream({ stream: result.stream }));
    },
  });
  return createUIMessageStreamResponse({ stream });
}

const HOSTED = new Set(['mcp_call', 'web_search_call', 'file_search_call']);
const PROGRESS = /^response\.(mcp|web_search|file_search)_call\.progress$/;

/** The new status of the call a raw Responses event is about, if it changes one. */
export function toolStatus(calls, event) {
  const item = event?.item;
  if (event?.type === 'response.output_item.added' && HOSTED.has(item?.type) && item.status === 'in_progress') {
    const name = item.name ?? item.type.replace(/_call$/, ''); // the searches' items have no name
    calls.set(item.id, { callId: item.id, name, ...(item.server_label ? { server: item.server_label } : {}), status: 'running' });
    return { ...calls.get(item.id) };
  }
  const call = calls.get(event?.item_id ?? item?.id);
  if (!call) return undefined;
  if (PROGRESS.test(event.type)) {
    const { progress, total, message } = event;
    Object.assign(call, { progress }, total === undefined ? {} : { total }, message === undefined ? {} : { message });
  } else if (event.type === 'response.output_item.done') {
    calls.delete(item.id);
    call.status = item.status === 'completed' ? 'completed' : 'failed';
    const error = item.error?.content?.map((c) => c.text).join('') ?? item.error?.message;
    if (call.status === 'failed' && error) call.message = error;
  } else {
    return undefined;
  }
  return { ...call };
}
