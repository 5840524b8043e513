// toolpulse demo page: sends one streaming POST /v1/responses through toolpulse (or straight
// to the gateway), parses the Server-Sent Events as they arrive and renders the answer, a tool
// timeline driven only by toolpulse's lifecycle events, and a log of every event.
'use strict';

/** Lifecycle event families toolpulse injects, and how the timeline names them. */
const KINDS = {
  web_search_call: 'Web search',
  file_search_call: 'File search',
  mcp_call: 'MCP',
};
const LIFECYCLE = /^response\.([a-z_]+_call)\.(in_progress|searching|progress|completed|failed)$/;
const TICK_MS = 100;
/** After this long without an event the clock says how long the stream has been quiet. */
const QUIET_MS = 800;

const $ = (id) => document.getElementById(id);

/**
 * An incremental SSE parser (the WHATWG rules that matter here): feed it text as it arrives;
 * it calls onEvent({event, data}) per dispatched event and onComment(text) per comment line.
 */
function sseParser(onEvent, onComment) {
  let buffer = '';
  let data = null;
  let name = '';
  function line(text) {
    if (text === '') {
      if (data !== null) onEvent({ event: name || 'message', data: data.join('\n') });
      data = null;
      name = '';
      return;
    }
    if (text.startsWith(':')) return onComment(text.slice(1).trim());
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') (data ??= []).push(value);
    else if (field === 'event') name = value;
  }
  return function push(chunk) {
    buffer += chunk;
    let start = 0;
    for (let i = 0; i < buffer.length; i++) {
      const c = buffer[i];
      if (c !== '\n' && c !== '\r') continue;
      if (c === '\r' && i + 1 === buffer.length) break; // a CRLF may be split across chunks
      line(buffer.slice(start, i));
      if (c === '\r' && buffer[i + 1] === '\n') i++;
      start = i + 1;
    }
    buffer = buffer.slice(start);
  };
}

function seconds(ms) {
  return (ms / 1000).toFixed(1) + ' s';
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** One run: a request, its stream, and what the page shows of it. */
class Run {
  constructor(route) {
    this.route = route;
    this.started = performance.now();
    this.lastEvent = this.started;
    this.rows = new Map();
    this.counts = { events: 0, injected: 0, heartbeats: 0 };
    this.finished = false;
    this.lastLog = null;
    this.answer = $('answer');
    this.answering = false;
    this.answer.replaceChildren(el('span', 'empty', 'Waiting for the answer…'));
    this.answer.setAttribute('aria-busy', 'true');
    $('timeline').replaceChildren();
    $('log').replaceChildren();
    const empty = $('timeline-empty');
    empty.textContent = 'Waiting for tool events…';
    empty.classList.remove('dead-air');
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.tick();
  }

  now() {
    return performance.now() - this.started;
  }

  tick() {
    for (const row of this.rows.values()) {
      if (row.node.dataset.state === 'running') {
        row.time.textContent = seconds(performance.now() - row.since);
      }
    }
    const clock = $('clock');
    clock.replaceChildren(seconds(this.now()));
    const quiet = performance.now() - this.lastEvent;
    if (!this.finished && quiet > QUIET_MS) {
      clock.append(' · ', el('span', 'quiet', 'no events for ' + seconds(quiet)));
    }
  }

  comment(text) {
    this.counts.heartbeats++;
    this.log('', ': ' + (text || 'comment'), 'heartbeat', false);
    this.updateCount();
  }

  event({ data }) {
    this.lastEvent = performance.now();
    if (data === '[DONE]') return this.log('', '[DONE]', '', false);
    let json;
    try {
      json = JSON.parse(data);
    } catch {
      return this.log('', data.slice(0, 80), '', false);
    }
    this.counts.events++;
    const type = String(json.type || '');
    const lifecycle = LIFECYCLE.exec(type);
    // toolpulse's companion items (ids `tp_…`) are injected too; their lifecycle events drive the row.
    const companion = String(json.item?.id ?? '').startsWith('tp_');
    if (companion) this.counts.injected++;
    if (lifecycle) {
      this.counts.injected++;
      this.lifecycle(lifecycle[1], lifecycle[2], json);
    } else if (type === 'response.output_text.delta') {
      if (!this.answering) this.answer.replaceChildren();
      this.answering = true;
      this.answer.append(String(json.delta ?? ''));
    } else if (type === 'response.output_text.done' && typeof json.text === 'string') {
      this.answer.textContent = json.text;
    } else if (type === 'response.failed' || type === 'error') {
      const message = json.error?.message || json.response?.error?.message || type;
      $('status').textContent = 'The response failed: ' + message;
    }
    this.log(json.sequence_number, type, detail(json), Boolean(lifecycle) || companion);
    this.updateCount();
  }

  /** A toolpulse lifecycle event: a row appears, turns to searching, then ✓ or ✗. */
  lifecycle(family, phase, json) {
    const id = String(json.item_id ?? json.output_index ?? family);
    let row = this.rows.get(id);
    if (!row) {
      row = this.addRow(id, family, String(json.name || family));
    }
    const { node, icon, status, time } = row;
    if (phase === 'in_progress' || phase === 'searching') {
      if (node.dataset.state !== 'running') return;
      if (phase === 'searching') status.textContent = 'searching…';
      node.dataset.phase = phase;
      return;
    }
    if (phase === 'progress') {
      if (node.dataset.state === 'running') this.progress(row, json);
      return;
    }
    if (row.bar) row.bar.hidden = true;
    const failed = phase === 'failed' || json.outcome === 'failed';
    const duration = Number(json.duration_ms);
    node.dataset.state = failed ? 'failed' : 'completed';
    node.dataset.phase = phase;
    icon.replaceChildren(failed ? '✗' : '✓');
    status.textContent = failed ? 'failed' : 'completed';
    if (Number.isFinite(duration)) {
      node.dataset.durationMs = String(duration);
      time.textContent = seconds(duration);
    } else {
      time.textContent = '';
    }
    time.removeAttribute('aria-hidden');
  }

  /** What the tool itself reported (out of band, through toolpulse): its message and a bar. */
  progress(row, json) {
    const progress = Number(json.progress);
    const total = Number(json.total);
    const message = typeof json.message === 'string' ? json.message : '';
    row.status.textContent =
      message || (Number.isFinite(total) ? `${progress} of ${total}` : `${progress} done`);
    row.node.dataset.progress = String(progress);
    if (!row.bar) {
      row.bar = el('progress', 'bar');
      row.bar.setAttribute('aria-label', 'tool progress');
      row.node.append(row.bar);
    }
    if (Number.isFinite(total) && total > 0) {
      row.bar.max = total;
      row.bar.value = Math.min(progress, total);
    } else {
      row.bar.removeAttribute('value'); // indeterminate: no total to measure against
    }
  }

  addRow(id, family, name) {
    const node = el('li', 'tool');
    node.dataset.item = id;
    node.dataset.kind = family;
    node.dataset.name = name;
    node.dataset.state = 'running';
    node.dataset.phase = 'in_progress';
    const icon = el('span', 'icon');
    icon.setAttribute('aria-hidden', 'true');
    icon.append(el('span', 'spinner'));
    const what = el('span', 'what');
    const kind = KINDS[family] || family.replace(/_call$/, '').replaceAll('_', ' ');
    what.append(el('span', 'kind', kind), el('code', 'name', name));
    const status = el('span', 'status', 'in progress');
    // The running counter is visual only: a screen reader hears the final duration.
    const time = el('span', 'time', '0.0 s');
    time.setAttribute('aria-hidden', 'true');
    node.append(icon, what, status, time);
    $('timeline').append(node);
    const row = { node, icon, status, time, since: performance.now() };
    this.rows.set(id, row);
    return row;
  }

  /** One line of the event log; runs of text deltas fold into one line. */
  log(seq, type, text, injected) {
    const list = $('log');
    if (type === 'response.output_text.delta' && this.lastLog?.type === type) {
      this.lastLog.n++;
      this.lastLog.detail.textContent = '×' + this.lastLog.n;
      return;
    }
    const item = el('li', injected ? 'injected' : '');
    const t = el('span', 't', '+' + (this.now() / 1000).toFixed(2) + 's');
    const number = el('span', 'seq', seq === '' || seq === undefined ? '' : '#' + seq);
    const what = el('span', 'type', (injected ? '▶ ' : '  ') + type);
    const more = el('span', 'detail', text);
    item.append(t, number, what, more);
    const following = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
    list.append(item);
    if (following) list.scrollTop = list.scrollHeight;
    this.lastLog = { type, n: 1, detail: more };
  }

  updateCount() {
    const { events, injected } = this.counts;
    $('log-count').textContent = `(${events} events, ${injected} injected)`;
  }

  finish(message) {
    this.finished = true;
    clearInterval(this.timer);
    this.tick();
    this.answer.setAttribute('aria-busy', 'false');
    const { events, injected, heartbeats } = this.counts;
    const via = this.route === 'direct' ? 'straight from the gateway' : 'through toolpulse';
    $('status').textContent =
      message ||
      `Done in ${seconds(this.now())} ${via}: ${events} events, ${injected} injected by ` +
        `toolpulse, ${heartbeats} heartbeats.`;
    if (this.rows.size === 0) {
      const empty = $('timeline-empty');
      empty.textContent =
        this.route === 'direct'
          ? 'No tool events: the gateway sent nothing while its tools ran (dead air).'
          : 'No tool events arrived.';
      empty.classList.toggle('dead-air', this.route === 'direct');
    }
  }
}

/** What the log shows after an event's type. */
function detail(json) {
  const item = json.item;
  if (item?.type === 'function_call') return `function_call ${item.name} ${item.call_id}`;
  if (item?.type === 'function_call_output') {
    const output = String(item.output ?? '').replace(/\s+/g, ' ');
    return `function_call_output ${item.call_id} “${output.slice(0, 90)}”`;
  }
  if (item?.type) return item.status ? `${item.type} ${item.status}` : item.type;
  if (json.outcome) return `${json.name} ${json.outcome} ${json.duration_ms} ms`;
  if (typeof json.progress === 'number') {
    const of = typeof json.total === 'number' ? `/${json.total}` : '';
    return `${json.name} ${json.progress}${of} ${json.message ?? ''}`.trim();
  }
  if (json.name) return json.name;
  if (typeof json.delta === 'string') return JSON.stringify(json.delta);
  return '';
}

async function start(event) {
  event.preventDefault();
  const form = $('run-form');
  if (form.dataset.state === 'running') return;
  const route = form.elements.route.value === 'direct' ? 'direct' : 'through';
  const button = $('run');
  form.dataset.state = 'running';
  form.dataset.route = route;
  button.disabled = true;
  button.textContent = 'Running…';
  const via = route === 'direct' ? 'straight to the gateway' : 'through toolpulse';
  $('status').textContent = `Streaming ${via}…`;
  const run = new Run(route);
  let failure = '';
  try {
    const response = await fetch(`/${route}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ model: 'demo-model', input: $('prompt').value, stream: true }),
    });
    if (!response.ok || !response.body) {
      failure = `The ${route === 'direct' ? 'gateway' : 'proxy'} answered ${response.status}.`;
    } else {
      const push = sseParser((e) => run.event(e), (c) => run.comment(c));
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        push(value);
      }
      push('\n\n');
    }
  } catch (error) {
    failure = 'The request failed: ' + (error?.message || error);
  }
  run.finish(failure);
  form.dataset.state = failure ? 'failed' : 'done';
  button.disabled = false;
  button.textContent = 'Run';
  button.focus();
}

document.addEventListener('DOMContentLoaded', () => {
  const form = $('run-form');
  form.addEventListener('submit', start);
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
});
