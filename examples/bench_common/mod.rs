//! The event script shared by `bench_upstream` (which serves it) and `bench_client` (which
//! regenerates it to verify what it received). A stream is fully determined by its [`Params`]:
//! `response.created`, `events` text deltas of ~20 characters with a tool round before every
//! `tool_every`-th delta, `response.completed`; dense `sequence_number`s from 0. With `ts` on,
//! each event's JSON ends with `"t_ns":…`, the upstream's CLOCK_MONOTONIC when it was written.
//!
//! A tool round (`EVENTS_PER_ROUND` events): `output_item.added` of a `function_call` item,
//! `ARG_DELTAS` `function_call_arguments.delta`s, `.done`, `output_item.done`, a pause of
//! `tool_delay_us` (the gateway runs the tool), then `output_item.added`/`.done` of its
//! `function_call_output`. Tool names rotate by seed over [`TOOL_NAMES`]; one output in five is
//! a failure (`search failed: …`).

#![allow(dead_code)] // each example uses its own part

use std::fmt;

/// `web_search` and `file_search` are built-in kinds, `mcp__*` needs a `[[tools]]` rule (the
/// benchmark's config has one), `get_weather` is a plain function (nothing injected).
pub const TOOL_NAMES: [&str; 4] = [
    "web_search",
    "mcp__github__search",
    "file_search",
    "get_weather",
];
pub const ARG_DELTAS: u64 = 3;
pub const EVENTS_PER_ROUND: u64 = ARG_DELTAS + 5;
/// Upper bound of `events` per stream, so a request cannot ask for an endless stream.
pub const MAX_EVENTS: u64 = 10_000_000;
/// Upper bound of `pace_us` and `tool_delay_us` (10 s).
pub const MAX_PAUSE_US: u64 = 10_000_000;

const WORDS: [&str; 16] = [
    "the", "stream", "of", "tokens", "flows", "through", "a", "proxy", "while", "tools", "run",
    "quietly", "and", "events", "arrive", "fast",
];

/// What one stream looks like; travels as the request's query string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Text-delta events.
    pub events: u64,
    /// 0: as fast as the connection takes them, many events per write; else one event per
    /// write every `pace_us` µs.
    pub pace_us: u64,
    /// A tool round before every `tool_every`-th text delta; 0: none.
    pub tool_every: u64,
    /// How long the "tool runs": the pause between a call's `output_item.done` and its output.
    pub tool_delay_us: u64,
    pub seed: u64,
    /// Stamp events with `t_ns` (off to get bytes a client can regenerate exactly).
    pub ts: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            events: 100,
            pace_us: 0,
            tool_every: 0,
            tool_delay_us: 0,
            seed: 1,
            ts: true,
        }
    }
}

impl Params {
    /// Parses `events=…&pace_us=…&tool_every=…&tool_delay_us=…&seed=…&ts=0|1`; missing keys
    /// keep their defaults, unknown keys are an error.
    pub fn from_query(query: &str) -> Result<Params, String> {
        let mut p = Params::default();
        for pair in query.split('&').filter(|s| !s.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?}: expected key=value"))?;
            let n: u64 = value
                .parse()
                .map_err(|_| format!("{key}={value:?}: not a number"))?;
            match key {
                "events" => p.events = n,
                "pace_us" => p.pace_us = n,
                "tool_every" => p.tool_every = n,
                "tool_delay_us" => p.tool_delay_us = n,
                "seed" => p.seed = n,
                "ts" => p.ts = n != 0,
                _ => return Err(format!("unknown parameter {key:?}")),
            }
        }
        if p.events > MAX_EVENTS {
            return Err(format!("events={} is over {MAX_EVENTS}", p.events));
        }
        if p.pace_us > MAX_PAUSE_US || p.tool_delay_us > MAX_PAUSE_US {
            return Err(format!("pauses are limited to {MAX_PAUSE_US} µs"));
        }
        Ok(p)
    }

    /// Tool rounds in the stream.
    pub fn rounds(&self) -> u64 {
        if self.tool_every == 0 || self.events == 0 {
            0
        } else {
            (self.events - 1) / self.tool_every
        }
    }

    /// Events the upstream sends (created + deltas + rounds + completed).
    pub fn event_count(&self) -> u64 {
        2 + self.events + self.rounds() * EVENTS_PER_ROUND
    }

    /// Events of the rounds whose tool the gateway runs (every tool but the plain function
    /// `get_weather`): profile `hosted` shows each such round as one hosted item instead, so
    /// none of these reaches the client. Regenerates the script (only called when the count
    /// of upstream events that arrived is not [`Params::event_count`]).
    pub fn gateway_run_events(&self) -> u64 {
        let mut script = Script::new(self);
        let mut out = Vec::new();
        let (mut rounds, mut hidden) = (0, 0);
        while script.next(&mut out, None) != Step::End {
            out.clear();
            if script.rounds > rounds {
                rounds = script.rounds;
                hidden += u64::from(script.tool != "get_weather") * EVENTS_PER_ROUND;
            }
        }
        hidden
    }
}

impl fmt::Display for Params {
    /// The query string [`Params::from_query`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "events={}&pace_us={}&tool_every={}&tool_delay_us={}&seed={}&ts={}",
            self.events,
            self.pace_us,
            self.tool_every,
            self.tool_delay_us,
            self.seed,
            u8::from(self.ts)
        )
    }
}

/// What [`Script::next`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// One event was appended.
    Event,
    /// Nothing appended: the tool runs this long (µs) before its output.
    Pause(u64),
    /// The stream is over.
    End,
}

#[derive(Debug, Clone, Copy)]
enum Stage {
    Start,
    Text,
    /// Position inside the current tool round.
    Round(u64),
    Done,
}

/// Generates one stream's events, one at a time.
pub struct Script {
    p: Params,
    rng: u64,
    seq: u64,
    deltas: u64,
    rounds: u64,
    stage: Stage,
    tool: &'static str,
    fails: bool,
}

impl Script {
    pub fn new(p: &Params) -> Script {
        Script {
            p: p.clone(),
            rng: p.seed ^ 0x9e37_79b9_7f4a_7c15,
            seq: 0,
            deltas: 0,
            rounds: 0,
            stage: Stage::Start,
            tool: TOOL_NAMES[0],
            fails: false,
        }
    }

    /// splitmix64.
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Appends the next event to `out`, stamped with `t_ns` if given.
    pub fn next(&mut self, out: &mut Vec<u8>, t_ns: Option<u64>) -> Step {
        let t_ns = t_ns.filter(|_| self.p.ts);
        match self.stage {
            Stage::Start => {
                self.open(out, "response.created");
                push_all(out, &[r#""response":{"id":"resp_"#]);
                push_num(out, self.p.seed);
                out.extend_from_slice(
                    br#"","object":"response","status":"in_progress","model":"bench"}"#,
                );
                self.stage = Stage::Text;
            }
            Stage::Text if self.deltas == self.p.events => {
                self.open(out, "response.completed");
                push_all(out, &[r#""response":{"id":"resp_"#]);
                push_num(out, self.p.seed);
                out.extend_from_slice(
                    br#"","object":"response","status":"completed","model":"bench"}"#,
                );
                self.stage = Stage::Done;
            }
            Stage::Text
                if self.p.tool_every > 0 && self.rounds < self.deltas / self.p.tool_every =>
            {
                self.rounds += 1;
                let r = self.random();
                self.tool = TOOL_NAMES[(r % TOOL_NAMES.len() as u64) as usize];
                self.fails = (r >> 8).is_multiple_of(5);
                self.stage = Stage::Round(0);
                return self.next(out, t_ns);
            }
            Stage::Text => {
                self.open(out, "response.output_text.delta");
                out.extend_from_slice(
                    br#""item_id":"msg_0","output_index":0,"content_index":0,"delta":""#,
                );
                let start = out.len();
                while out.len() - start < 17 {
                    let word = WORDS[(self.random() % WORDS.len() as u64) as usize];
                    push_all(out, &[word, " "]);
                }
                out.push(b'"');
                self.deltas += 1;
            }
            Stage::Round(k) => return self.round(k, out, t_ns),
            Stage::Done => return Step::End,
        }
        close(out, t_ns);
        Step::Event
    }

    fn round(&mut self, k: u64, out: &mut Vec<u8>, t_ns: Option<u64>) -> Step {
        let c = self.rounds;
        let index = 2 * c - 1;
        self.stage = Stage::Round(k + 1);
        match k {
            0 => {
                self.open(out, "response.output_item.added");
                self.call_item(out, index, "in_progress", "");
            }
            k if k <= ARG_DELTAS => {
                self.open(out, "response.function_call_arguments.delta");
                self.item_ref(out, index);
                let piece = match k {
                    1 => r#"{\"query\":"#.to_string(),
                    k if k < ARG_DELTAS => format!(r#"\"bench query {c}"#),
                    _ => r#"\"}"#.to_string(),
                };
                push_all(out, &[r#","delta":""#, &piece, "\""]);
            }
            k if k == ARG_DELTAS + 1 => {
                self.open(out, "response.function_call_arguments.done");
                self.item_ref(out, index);
                push_all(out, &[r#","arguments":""#, &arguments(c), "\""]);
            }
            k if k == ARG_DELTAS + 2 => {
                self.open(out, "response.output_item.done");
                self.call_item(out, index, "completed", &arguments(c));
            }
            k if k == ARG_DELTAS + 3 => return Step::Pause(self.p.tool_delay_us),
            k if k == ARG_DELTAS + 4 || k == ARG_DELTAS + 5 => {
                let kind = if k == ARG_DELTAS + 4 {
                    "response.output_item.added"
                } else {
                    self.stage = Stage::Text;
                    "response.output_item.done"
                };
                self.open(out, kind);
                out.extend_from_slice(br#""output_index":"#);
                push_num(out, index + 1);
                out.extend_from_slice(br#","item":{"id":"fco_"#);
                push_num(out, c);
                out.extend_from_slice(br#"","type":"function_call_output","call_id":"call_"#);
                push_num(out, c);
                let output = if self.fails {
                    "search failed: upstream timeout"
                } else {
                    "3 results: alpha, beta, gamma"
                };
                push_all(
                    out,
                    &[r#"","output":""#, output, r#"","status":"completed"}"#],
                );
            }
            _ => unreachable!("a round has {EVENTS_PER_ROUND} events and one pause"),
        }
        close(out, t_ns);
        Step::Event
    }

    fn open(&mut self, out: &mut Vec<u8>, kind: &str) {
        push_all(out, &["event: ", kind, "\ndata: {\"type\":\"", kind]);
        out.extend_from_slice(b"\",\"sequence_number\":");
        push_num(out, self.seq);
        out.push(b',');
        self.seq += 1;
    }

    fn item_ref(&self, out: &mut Vec<u8>, index: u64) {
        out.extend_from_slice(br#""item_id":"fc_"#);
        push_num(out, self.rounds);
        out.extend_from_slice(br#"","output_index":"#);
        push_num(out, index);
    }

    fn call_item(&self, out: &mut Vec<u8>, index: u64, status: &str, arguments: &str) {
        out.extend_from_slice(br#""output_index":"#);
        push_num(out, index);
        out.extend_from_slice(br#","item":{"id":"fc_"#);
        push_num(out, self.rounds);
        push_all(
            out,
            &[
                r#"","type":"function_call","status":""#,
                status,
                r#"","name":""#,
                self.tool,
                r#"","call_id":"call_"#,
            ],
        );
        push_num(out, self.rounds);
        push_all(out, &[r#"","arguments":""#, arguments, r#""}"#]);
    }
}

/// The call's arguments, JSON-escaped for use inside a string.
fn arguments(c: u64) -> String {
    format!(r#"{{\"query\":\"bench query {c}\"}}"#)
}

fn close(out: &mut Vec<u8>, t_ns: Option<u64>) {
    if let Some(t) = t_ns {
        out.extend_from_slice(br#","t_ns":"#);
        push_num(out, t);
    }
    out.extend_from_slice(b"}\n\n");
}

fn push_all(out: &mut Vec<u8>, parts: &[&str]) {
    for part in parts {
        out.extend_from_slice(part.as_bytes());
    }
}

fn push_num(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The whole stream at once, as the upstream sends it (without timestamps unless `p.ts`).
pub fn generate(p: &Params, t_ns: Option<u64>) -> Vec<u8> {
    let mut script = Script::new(p);
    let mut out = Vec::new();
    while script.next(&mut out, t_ns) != Step::End {}
    out
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the machine.
pub fn monotonic_ns() -> u64 {
    timespec_ns(rustix::time::clock_gettime(
        rustix::time::ClockId::Monotonic,
    ))
}

/// CPU time (user + system) this process has used, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    timespec_ns(rustix::time::clock_gettime(
        rustix::time::ClockId::ProcessCPUTime,
    ))
}

fn timespec_ns(t: rustix::time::Timespec) -> u64 {
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}
