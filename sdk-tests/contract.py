"""The stream toolpulse should make of a gateway's stream, derived independently of toolpulse.

This is the SDK tests' oracle for the stream's guarantees (docs/profiles.md) (profile `openai`, the default, with a native
companion item per classified call) and for the opt-in `openai-inline` profile (lifecycle
events on the `function_call` item itself). Feed it the gateway's own events, one at a time, in
order; it returns the events a client should see at that point:

- every upstream event, with its `sequence_number` shifted by the events injected before it and
  its `output_index` shifted by the companions opened before its item was first seen (kept for
  all the item's events), and in `response.*` events whose `response.output` lists calls, each
  companion (in its state at that point) right after its `function_call`;
- right after a classified call's `function_call` `response.output_item.done`: the companion's
  `output_item.added`, then `response.<kind>_call.in_progress` (+ `.searching` for the search
  kinds), on the companion (`item_id` `tp_<call_id>`, `output_index` one past the highest the
  response has used) with `name`;
- right before the call's `function_call_output` `output_item.added` (or, for a call that never
  gets one, before `response.completed/failed/incomplete` / `error` or at the end of the
  stream): the terminal event (with `outcome` and `duration_ms`), then the companion's
  `output_item.done` in its final state.

Values the proxy decides (a duration, the sentence for a call that never got an output, the
exact bytes of JSON it may re-serialize while sanitizing) come out as matchers (`ANY_MS`,
`ANY_TEXT`, `JsonText`) for `assert_match`. Stdlib only; the Node tests carry the same rules
(node/harness.mjs), so each SDK suite checks toolpulse against its own copy.

`HostedOracle` is the same for profile `hosted` (docs/hosted.md, the default): one native item
(`tph_…`) in place of each gateway-run call's `function_call` and `function_call_output`, at the
`function_call`'s index, with OpenAI's own event sequence; the output's index given up (later
items move down by one); dropped events give up their sequence numbers. Its ids are opaque, so
they come out as `HostedIds` matchers: any `tph_` id, the same on every event of one call, a
different one per call. A gateway's own lifecycle events on a hosted call's `function_call` item
(antwort's in-place lifecycle events: `response.mcp_call.in_progress` … on the function_call's `item_id` and
`output_index`; gateway.py `?spec023=1`) are events of that hidden item, dropped like its other
events: the client's stream is the one the gateway gives without them, numbers dense.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field

COMPANION_PREFIX = "tp_"
# The SDK tests' toolpulse config (the same text in test_python_sdk.py and node/harness.mjs).
FAILURE_PATTERNS = [re.compile(p) for p in ("^no executor found for tool ", "^search failed: ")]
SERVER_LABEL = "gateway"
SHOWN = ("mcp", "web_search", "file_search")
TERMINAL_RESPONSE_EVENTS = ("response.completed", "response.failed", "response.incomplete", "error")


def kind_of(name: str) -> str:
    """The SDK tests' classification: config rule `github_*` → mcp, then the built-in defaults."""
    if name.startswith("github_"):
        return "mcp"
    if name in ("web_search", "web_search_preview"):
        return "web_search"
    if name == "file_search":
        return "file_search"
    return "function"


def is_failure(output: str) -> bool:
    return any(p.search(output) for p in FAILURE_PATTERNS)


# ---------------------------------------------------------------- matchers


class _Matcher:
    def matches(self, actual: object) -> bool:
        raise NotImplementedError

    def __deepcopy__(self, memo: dict) -> "_Matcher":
        return self  # immutable, and `is` identifies the singletons


class _AnyMs(_Matcher):
    def matches(self, actual: object) -> bool:
        return isinstance(actual, int) and not isinstance(actual, bool) and actual >= 0

    def __repr__(self) -> str:
        return "<any duration_ms>"


class _AnyText(_Matcher):
    def matches(self, actual: object) -> bool:
        return isinstance(actual, str) and actual.strip() != ""

    def __repr__(self) -> str:
        return "<any non-empty text>"


class _Anything(_Matcher):
    def matches(self, actual: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "<anything>"


@dataclass(frozen=True)
class MaybeAbsent(_Matcher):
    """A key that may be missing; when present its value is `value`."""

    value: object

    def matches(self, actual: object) -> bool:
        try:
            assert_match(actual, self.value)
        except AssertionError:
            return False
        return True


ANY_MS = _AnyMs()
ANY_TEXT = _AnyText()
ANYTHING = _Anything()


@dataclass(frozen=True)
class JsonText(_Matcher):
    """A string that says `text`: the same JSON value when `text` is JSON (a sanitizer may
    re-serialize it), else exactly `text`."""

    text: str

    def matches(self, actual: object) -> bool:
        if not isinstance(actual, str):
            return False
        try:
            return json.loads(actual) == json.loads(self.text)
        except ValueError:
            return actual == self.text


def assert_match(actual: object, expected: object, path: str = "$", extra_keys: frozenset = frozenset()) -> None:
    """`actual` is `expected`, where matchers stand for what the proxy decides. A key that the
    actual object has but `expected` lacks is allowed only when its value is null or its name is
    in `extra_keys` (fields an SDK helper adds, such as `snapshot`)."""
    if isinstance(expected, _Matcher):
        assert expected.matches(actual), f"{path}: {actual!r} is not {expected!r}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        expected = {k: v for k, v in expected.items() if not (isinstance(v, MaybeAbsent) and k not in actual)}
        missing = [k for k in expected if k not in actual]
        assert not missing, f"{path}: missing {missing} in {json.dumps(actual, default=str)[:600]}"
        unexpected = [k for k, v in actual.items() if k not in expected and v is not None and k not in extra_keys]
        assert not unexpected, f"{path}: unexpected {unexpected} in {json.dumps(actual, default=str)[:600]}"
        for k, v in expected.items():
            assert_match(actual[k], v, f"{path}.{k}", extra_keys)
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), (
            f"{path}: {len(actual)} entries, expected {len(expected)}:\n"
            f"  actual   {[_brief(a) for a in actual]}\n  expected {[_brief(e) for e in expected]}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_match(a, e, f"{path}[{i}]", extra_keys)
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _brief(value: object) -> object:
    if isinstance(value, dict):
        return value.get("type", "?") + (f"#{value['id']}" if isinstance(value.get("id"), str) else "")
    return value


def assert_stream(actual: list[dict], expected: list[dict], extra_keys: frozenset = frozenset()) -> None:
    """Event by event, with the first difference in the types reported as a readable diff."""
    a_types = [e.get("type") for e in actual]
    e_types = [e.get("type") for e in expected]
    if a_types != e_types:
        first = next((i for i, (a, e) in enumerate(zip(a_types, e_types)) if a != e), min(len(a_types), len(e_types)))
        raise AssertionError(
            f"event types differ first at #{first} ({len(actual)} events, expected {len(expected)}):\n"
            + "\n".join(f"  {i:3} {a_types[i] if i < len(a_types) else '-':45} {e_types[i] if i < len(e_types) else '-'}"
                        for i in range(max(0, first - 3), min(max(len(a_types), len(e_types)), first + 6))))
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_match(a, e, f"event #{i} ({e.get('type')})", extra_keys)


# ---------------------------------------------------------------- the oracle


@dataclass
class _Call:
    call_id: str
    name: str
    kind: str
    fc_item_id: str
    fc_index: int | None  # the function_call's index as the client sees it
    arguments: str = ""
    companion: dict | None = None  # its current state (profile openai)
    companion_index: int | None = None
    opened_at: float | None = None
    closed: bool = False


@dataclass
class _Response:
    index_map: dict[int, int] = field(default_factory=dict)  # upstream output_index -> client's
    opened: int = 0  # companions opened so far
    highest: int = -1  # the highest output_index the client has seen
    by_index: dict[int, _Call] = field(default_factory=dict)  # function_call items, by upstream index
    calls: dict[str, _Call] = field(default_factory=dict)  # classified calls shown, by call_id


class _Renumbering:
    """An upstream event as the client gets it: its number moved by `shift` (injected minus
    dropped events so far), its `output_index` mapped by the model's `_client_index`."""

    shift: int
    next_seq: int | None

    def _client_index(self, upstream_index: int) -> int:
        raise NotImplementedError

    def _upstream(self, event: dict) -> dict:
        out = copy.deepcopy(event)
        seq = event.get("sequence_number")
        if isinstance(seq, int):
            out["sequence_number"] = seq + self.shift
            self.next_seq = out["sequence_number"] + 1
        index = event.get("output_index")
        if isinstance(index, int):
            out["output_index"] = self._client_index(index)
        return out


class Oracle(_Renumbering):
    """See the module docstring. `profile` is "openai" or "openai-inline"; `clock` (seconds),
    when given, makes `duration_ms` a number instead of `ANY_MS` (for a stand-in proxy)."""

    def __init__(self, profile: str = "openai", server_label: str = SERVER_LABEL, clock=None) -> None:
        assert profile in ("openai", "openai-inline"), profile
        self.profile = profile
        self.server_label = server_label
        self.clock = clock
        self.response = _Response()
        self.shift = 0  # events injected so far
        self.next_seq: int | None = None

    @property
    def companions(self) -> bool:
        return self.profile == "openai"


    def _client_index(self, upstream_index: int) -> int:
        r = self.response
        if upstream_index not in r.index_map:
            r.index_map[upstream_index] = upstream_index + r.opened
            r.highest = max(r.highest, r.index_map[upstream_index])
        return r.index_map[upstream_index]

    def _injected(self, event_type: str, **fields) -> dict:
        event = {"type": event_type}
        if self.next_seq is not None:
            event["sequence_number"] = self.next_seq
            self.next_seq += 1
        event.update(fields)
        self.shift += 1
        return event

    # -- the stream

    def feed(self, event: dict) -> list[dict]:
        t = event.get("type")
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        out: list[dict] = []
        if t == "response.created":
            self.response = _Response()  # numbers restart with a new response
        if t in TERMINAL_RESPONSE_EVENTS:
            out += self._close_all()
        if t == "response.output_item.added" and item.get("type") == "function_call_output":
            call = self.response.calls.get(item.get("call_id"))
            if call and not call.closed:
                output = item.get("output")
                out += self._close(call, output if isinstance(output, str) else json.dumps(output))
        forwarded = self._upstream(event)
        if self.companions and isinstance((forwarded.get("response") or {}).get("output"), list):
            forwarded["response"]["output"] = self._with_companions(forwarded["response"]["output"])
        out.append(forwarded)
        if t == "response.output_item.added" and item.get("type") == "function_call":
            self.response.by_index[event["output_index"]] = _Call(
                call_id=item["call_id"], name=item["name"], kind=kind_of(item["name"]),
                fc_item_id=item["id"], fc_index=forwarded["output_index"])
        if t == "response.output_item.done" and item.get("type") == "function_call":
            call = self.response.by_index.get(event["output_index"])
            if call and call.kind in SHOWN and call.call_id not in self.response.calls:
                call.arguments = item.get("arguments", "")
                out += self._open(call)
        return out

    def end(self) -> list[dict]:
        """The upstream stream ended (EOF): calls still open are closed, failed."""
        return self._close_all()

    def _open(self, call: _Call) -> list[dict]:
        r = self.response
        r.calls[call.call_id] = call
        call.opened_at = self.clock() if self.clock else None
        out = []
        if self.companions:
            call.companion_index = r.highest + 1
            r.highest = call.companion_index
            r.opened += 1
            call.companion = self._companion_item(call)
            out.append(self._injected("response.output_item.added", output_index=call.companion_index,
                                      item=copy.deepcopy(call.companion)))
        for suffix in ("in_progress", "searching") if call.kind != "mcp" else ("in_progress",):
            out.append(self._lifecycle(call, f"response.{call.kind}_call.{suffix}"))
        return out

    def _lifecycle(self, call: _Call, event_type: str, **more) -> dict:
        if self.companions:
            where = {"output_index": call.companion_index, "item_id": COMPANION_PREFIX + call.call_id}
        else:
            where = {"output_index": call.fc_index, "item_id": call.fc_item_id}
            if call.fc_index is None:
                del where["output_index"]
        return self._injected(event_type, **where, name=call.name, **more)

    def _companion_item(self, call: _Call) -> dict:
        cid = COMPANION_PREFIX + call.call_id
        try:
            args = json.loads(call.arguments)
        except ValueError:
            args = None
        args = args if isinstance(args, dict) else {}
        if call.kind == "mcp":
            return {"type": "mcp_call", "id": cid, "server_label": self.server_label, "name": call.name,
                    "arguments": JsonText(call.arguments), "status": "in_progress"}
        if call.kind == "web_search":
            action = {"type": "search"}
            if isinstance(args.get("query"), str):
                action["query"] = args["query"]
            return {"type": "web_search_call", "id": cid, "status": "in_progress", "action": action}
        queries = args.get("queries")
        if not (isinstance(queries, list) and all(isinstance(q, str) for q in queries)):
            queries = [args["query"]] if isinstance(args.get("query"), str) else []
        return {"type": "file_search_call", "id": cid, "status": "in_progress", "queries": queries}

    def _close(self, call: _Call, output: str | None) -> list[dict]:
        call.closed = True
        failed = output is None or is_failure(output)
        if call.kind == "mcp":
            terminal = "response.mcp_call.failed" if failed else "response.mcp_call.completed"
        else:
            terminal = f"response.{call.kind}_call.completed"
        duration = ANY_MS if self.clock is None else int((self.clock() - call.opened_at) * 1000)
        out = [self._lifecycle(call, terminal, outcome="failed" if failed else "completed", duration_ms=duration)]
        if self.companions:
            final = dict(call.companion, status="failed" if failed else "completed")
            if call.kind == "mcp":
                if failed:
                    text = output if output is not None else ANY_TEXT
                    final["error"] = {"type": "mcp_tool_execution_error",
                                      "content": [{"type": "text", "text": text}]}
                else:
                    final["output"] = JsonText(output)
            call.companion = final
            out.append(self._injected("response.output_item.done", output_index=call.companion_index,
                                      item=copy.deepcopy(final)))
        return out

    def _close_all(self) -> list[dict]:
        out = []
        for call in self.response.calls.values():
            if not call.closed:
                out += self._close(call, None)
        return out

    def _with_companions(self, output: list) -> list:
        spliced = []
        for item in output:
            spliced.append(item)
            if isinstance(item, dict) and item.get("type") == "function_call":
                call = self.response.calls.get(item.get("call_id"))
                if call and call.companion is not None:
                    spliced.append(copy.deepcopy(call.companion))
        return spliced


# ---------------------------------------------------------------- profile hosted

HOSTED_PREFIX = "tph_"
HOSTED_TYPES = {"mcp": "mcp_call", "web_search": "web_search_call", "file_search": "file_search_call"}
# docs/hosted.md: the error text of an MCP call the stream closed before its output arrived.
HOSTED_NO_OUTPUT_TEXT = "The stream ended before the tool's output arrived."


class HostedIds:
    """The ids of one client's view of hosted items, learnt as they are matched: any
    `tph_`-prefixed string, bound to its call at its first occurrence; from then on that call's
    events and listings must carry the same id, and no other call may carry it."""

    def __init__(self) -> None:
        self.by_call: dict[str, str] = {}
        self.call_of: dict[str, str] = {}

    def of(self, call_id: str) -> "_HostedId":
        return _HostedId(self, call_id)

    def __getitem__(self, call_id: str) -> str:
        """The id the client was given for `call_id` (after a stream was matched)."""
        return self.by_call[call_id]


class _HostedId(_Matcher):
    def __init__(self, ids: HostedIds, call_id: str) -> None:
        self.ids = ids
        self.call_id = call_id

    def matches(self, actual: object) -> bool:
        if not (isinstance(actual, str) and actual.startswith(HOSTED_PREFIX) and len(actual) > len(HOSTED_PREFIX)):
            return False
        bound = self.ids.by_call.get(self.call_id)
        if bound is not None:
            return actual == bound
        if actual in self.ids.call_of:  # another call's id
            return False
        self.ids.by_call[self.call_id] = actual
        self.ids.call_of[actual] = self.call_id
        return True

    def __repr__(self) -> str:
        bound = self.ids.by_call.get(self.call_id)
        other = [c for c, i in self.ids.by_call.items() if c != self.call_id]
        return (f"<the hosted id of {self.call_id}: {bound}>" if bound else
                f"<a new tph_ id for {self.call_id} (ids of {other} taken)>")


@dataclass
class _HostedCall:
    call_id: str
    name: str
    kind: str
    index: int  # the hosted item's index (the function_call's, as the client sees it)
    fc_upstream_index: int
    item: dict = field(default_factory=dict)  # its current state
    arguments: str = ""
    opened_at: float | None = None
    closed: bool = False
    output_given_up: bool = False


@dataclass
class _HostedResponse:
    index_map: dict[int, int] = field(default_factory=dict)  # upstream output_index -> client's
    given_up: int = 0  # output indices given up so far
    highest_upstream: int = -1  # the highest upstream output_index seen
    fc_at: dict[int, _HostedCall] = field(default_factory=dict)  # hosted calls by their function_call's upstream index
    hidden: set[int] = field(default_factory=set)  # upstream indices whose events are dropped (outputs given up)
    calls: dict[str, _HostedCall] = field(default_factory=dict)  # by call_id


class HostedOracle(_Renumbering):
    """Profile `hosted` (docs/hosted.md): feed it the gateway's events in order, one at a time;
    it returns what the client should see at that point. `declared`: the names of the request's
    own `function` tools (those calls are the client's: untouched). `ids`: the `HostedIds` the
    expected ids bind to (share one between a stream and its final response)."""

    def __init__(self, server_label: str = SERVER_LABEL, declared=(), ids: HostedIds | None = None,
                 clock=None) -> None:
        self.server_label = server_label
        self.declared = frozenset(declared)
        self.ids = ids if ids is not None else HostedIds()
        self.clock = clock
        self.response = _HostedResponse()
        self.shift = 0  # sequence numbers: injected events so far less dropped ones
        self.next_seq: int | None = None

    # -- numbering

    def _drop(self, event: dict) -> None:
        seq = event.get("sequence_number")
        if isinstance(seq, int):
            if self.next_seq is None:
                self.next_seq = seq + self.shift
            self.shift -= 1

    def _injected(self, event_type: str, **fields) -> dict:
        event = {"type": event_type}
        if self.next_seq is not None:
            event["sequence_number"] = self.next_seq
            self.next_seq += 1
        event.update(fields)
        self.shift += 1
        return event

    def _client_index(self, upstream_index: int) -> int:
        r = self.response
        if upstream_index not in r.index_map:
            r.index_map[upstream_index] = upstream_index - r.given_up
            r.highest_upstream = max(r.highest_upstream, upstream_index)
        return r.index_map[upstream_index]

    def _kind(self, name: str) -> str:
        return "function" if name in self.declared else kind_of(name)

    # -- the stream

    def feed(self, event: dict) -> list[dict]:
        t = event.get("type")
        item = event.get("item") if isinstance(event.get("item"), dict) else {}
        index = event.get("output_index")
        r = self.response
        if t == "response.created":
            self.response = r = _HostedResponse()
        out: list[dict] = []
        if t in TERMINAL_RESPONSE_EVENTS:
            out += self._close_all()

        # The hosted call's function_call item: its events become the hosted item's (the
        # gateway's own in-place lifecycle events on it are dropped with the rest).
        if isinstance(index, int) and index in r.fc_at:
            call = r.fc_at[index]
            self._drop(event)
            if t == "response.function_call_arguments.delta" and call.kind == "mcp":
                out.append(self._on(call, "response.mcp_call_arguments.delta", delta=event.get("delta"),
                                    name=MaybeAbsent(call.name)))
            elif t == "response.output_item.done" and item.get("type") == "function_call":
                call.arguments = item.get("arguments", "")
                call.opened_at = self.clock() if self.clock else None
                if call.kind == "mcp":
                    call.item["arguments"] = call.arguments
                    out.append(self._on(call, "response.mcp_call_arguments.done", arguments=call.arguments,
                                        name=MaybeAbsent(call.name)))
                else:
                    out.append(self._on(call, f"response.{call.kind}_call.searching", name=call.name))
            return out
        # A given-up output's events are dropped.
        if isinstance(index, int) and index in r.hidden:
            self._drop(event)
            return out
        if t == "response.output_item.added" and item.get("type") == "function_call_output":
            call = r.calls.get(item.get("call_id"))
            if call and not call.closed:
                output = item.get("output")
                out += self._close(call, output if isinstance(output, str) else json.dumps(output))
                if index > r.highest_upstream:  # nothing the client has moves: given up
                    r.hidden.add(index)
                    r.given_up += 1
                    r.highest_upstream = index
                    call.output_given_up = True
                    self._drop(event)
                    return out
        if t == "response.output_item.added" and item.get("type") == "function_call" and isinstance(index, int):
            kind = self._kind(item.get("name", ""))
            if kind in SHOWN and item.get("call_id") not in r.calls:
                call = _HostedCall(call_id=item["call_id"], name=item["name"], kind=kind,
                                   index=self._client_index(index), fc_upstream_index=index)
                call.item = self._initial_item(call)
                r.fc_at[index] = call
                r.calls[call.call_id] = call
                self._drop(event)
                out.append(self._injected("response.output_item.added", output_index=call.index,
                                          item=copy.deepcopy(call.item)))
                out.append(self._on(call, f"response.{kind}_call.in_progress", name=call.name))
                return out

        forwarded = self._upstream(event)
        if isinstance((forwarded.get("response") or {}).get("output"), list):
            forwarded["response"]["output"] = self._listing(forwarded["response"]["output"])
        out.append(forwarded)
        return out

    def end(self) -> list[dict]:
        """The upstream stream ended (EOF): calls still open are closed, failed."""
        return self._close_all()

    def _on(self, call: _HostedCall, event_type: str, **more) -> dict:
        return self._injected(event_type, item_id=self.ids.of(call.call_id), output_index=call.index, **more)

    def _initial_item(self, call: _HostedCall) -> dict:
        hid = self.ids.of(call.call_id)
        if call.kind == "mcp":
            return {"type": "mcp_call", "id": hid, "server_label": self.server_label, "name": call.name,
                    "arguments": "", "status": "in_progress"}
        if call.kind == "web_search":
            # docs/hosted.md says only "status in_progress"; openai-python's ResponseFunctionWebSearch
            # requires `action`, and the query is not known yet: {"type": "search"}.
            return {"type": "web_search_call", "id": hid, "status": "in_progress", "action": {"type": "search"}}
        return {"type": "file_search_call", "id": hid, "status": "in_progress", "queries": []}

    def _close(self, call: _HostedCall, output: str | None) -> list[dict]:
        call.closed = True
        failed = output is None or is_failure(output)
        try:
            args = json.loads(call.arguments)
        except ValueError:
            args = None
        args = args if isinstance(args, dict) else {}
        final = dict(call.item, status="failed" if failed else "completed")
        if call.kind == "mcp":
            terminal = "response.mcp_call.failed" if failed else "response.mcp_call.completed"
            final["arguments"] = call.arguments
            if failed:
                final["error"] = {"type": "mcp_tool_execution_error", "content": [
                    {"type": "text", "text": output if output is not None else HOSTED_NO_OUTPUT_TEXT}]}
            else:
                final["output"] = output
        elif call.kind == "web_search":
            terminal = "response.web_search_call.completed"
            final["action"] = {"type": "search", **({"query": args["query"]} if isinstance(args.get("query"), str) else {})}
        else:
            terminal = "response.file_search_call.completed"
            queries = args.get("queries")
            if not (isinstance(queries, list) and all(isinstance(q, str) for q in queries)):
                queries = [args["query"]] if isinstance(args.get("query"), str) else []
            final["queries"] = queries
        call.item = final
        duration = ANY_MS if self.clock is None or call.opened_at is None else int((self.clock() - call.opened_at) * 1000)
        return [self._on(call, terminal, name=call.name, outcome="failed" if failed else "completed",
                         duration_ms=duration),
                self._injected("response.output_item.done", output_index=call.index, item=copy.deepcopy(final))]

    def _close_all(self) -> list[dict]:
        out = []
        for call in self.response.calls.values():
            if not call.closed:
                out += self._close(call, None)
        return out

    def _listing(self, output: list) -> list:
        """A response's `output` as the client sees it: each hosted call's item (its state now)
        where its function_call was, its given-up function_call_output left out."""
        listed = []
        for item in output:
            call = self.response.calls.get(item.get("call_id")) if isinstance(item, dict) else None
            if call is not None and item.get("type") == "function_call":
                listed.append(copy.deepcopy(call.item))
            elif call is not None and item.get("type") == "function_call_output" and call.output_given_up:
                continue
            else:
                listed.append(item)
        return listed


def expected_stream(upstream: list[dict], profile: str = "openai", declared=(), ids: HostedIds | None = None) -> list[dict]:
    """The whole stream a client should see for the gateway's `upstream` events, with the
    response timestamps (which differ between two requests to the gateway) left open. For
    profile `hosted`, `declared` names the request's function tools and `ids` (a `HostedIds`)
    learns the hosted items' ids as the stream is matched."""
    oracle = HostedOracle(declared=declared, ids=ids) if profile == "hosted" else Oracle(profile)
    out = [e for event in upstream for e in oracle.feed(event)] + oracle.end()
    for e in out:
        if isinstance(e.get("response"), dict):
            e["response"]["created_at"] = ANYTHING
            e["response"]["completed_at"] = ANYTHING
    return out


def final_output(expected: list[dict]) -> list[dict]:
    """The `response.output` of the expected stream's terminal response event."""
    return next(e["response"]["output"] for e in reversed(expected) if isinstance(e.get("response"), dict))


def to_plain(value: object, hosted_id=lambda call_id: HOSTED_PREFIX + call_id) -> object:
    """The expected value with its matchers replaced by concrete values (for a stand-in proxy);
    `hosted_id(call_id)` makes a hosted item's id."""
    if isinstance(value, _HostedId):
        return hosted_id(value.call_id)
    if isinstance(value, MaybeAbsent):
        return to_plain(value.value, hosted_id)
    if isinstance(value, JsonText):
        return value.text
    if value is ANY_TEXT:
        return "the stream ended before the tool's output"
    if value is ANY_MS or value is ANYTHING:
        return 0
    if isinstance(value, dict):
        return {k: to_plain(v, hosted_id) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v, hosted_id) for v in value]
    return value
