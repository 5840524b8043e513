//! The demo's scripted gateway: an antwort-shaped Responses stream with an agentic turn (tool
//! calls, their results after the time the tools take, then the answer) served over real HTTP
//! on a loopback port, with the pauses where the gateway would be running tools. Its GitHub
//! tools are real: it calls them on the demo's MCP server through toolpulse's MCP front
//! ([`McpClient`]), so their progress reaches the stream. Two turns: the terminal demo's short
//! one and the web page's, with parallel, slow and failing tools.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::mcp_client::{McpClient, ToolResult};

/// One step of the script: bytes to send, or a pause.
enum Step {
    Send(String),
    Pause(Duration),
    /// The gateway starts MCP tool `tool` for the function_call at `call_index`.
    RunTool {
        call_index: u64,
        tool: &'static str,
        arguments: String,
    },
    /// The result of the tool started for `call_index`, once it is there, as the item at
    /// `index`; its two events take the numbers from `seq`.
    ToolOutput {
        index: u64,
        call_index: u64,
        seq: u64,
    },
}

/// Builds antwort-shaped events with dense sequence numbers.
#[derive(Default)]
struct Script {
    steps: Vec<Step>,
    seq: u64,
}

impl Script {
    fn event(&mut self, kind: &str, fields: Value) {
        let mut body = json!({"type": kind, "sequence_number": self.seq});
        if let (Some(body), Value::Object(fields)) = (body.as_object_mut(), fields) {
            body.extend(fields);
        }
        self.seq += 1;
        self.steps
            .push(Step::Send(format!("event: {kind}\ndata: {body}\n\n")));
    }

    fn pause(&mut self, ms: u64) {
        self.steps.push(Step::Pause(Duration::from_millis(ms)));
    }

    /// A `function_call` item at `index` (`fc_{index}`, `call_{index}`), its arguments streamed
    /// in `args` pieces, then done: from here the gateway runs the tool.
    fn call(&mut self, index: u64, name: &str, args: &[&str]) {
        let id = format!("fc_{index}");
        let item = json!({"id": id, "type": "function_call", "status": "in_progress",
                          "name": name, "call_id": format!("call_{index}"), "arguments": ""});
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        for delta in args {
            self.pause(60);
            self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": delta}),
            );
        }
        let arguments = args.concat();
        self.event(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": arguments}),
        );
        let mut done = item;
        done["status"] = "completed".into();
        done["arguments"] = arguments.into();
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        );
    }

    /// The result of the call made at `call_index`, as the item at `index`.
    fn output(&mut self, index: u64, call_index: u64, output: &str) {
        let text = output_events(self.seq, index, call_index, output);
        self.seq += 2;
        self.steps.push(Step::Send(text));
    }

    /// A function_call at `index` that the gateway runs as MCP tool `tool` of the demo's
    /// server (the call's name is `github_<tool>`); its result comes with [`Self::mcp_output`].
    fn mcp_call(&mut self, index: u64, tool: &'static str, args: &[&str]) {
        self.call(index, &format!("github_{tool}"), args);
        self.steps.push(Step::RunTool {
            call_index: index,
            tool,
            arguments: args.concat(),
        });
    }

    /// The result of the MCP tool run for the call at `call_index`, as the item at `index`.
    fn mcp_output(&mut self, index: u64, call_index: u64) {
        let seq = self.seq;
        self.seq += 2;
        self.steps.push(Step::ToolOutput {
            index,
            call_index,
            seq,
        });
    }

    /// One call that runs `runs_ms`, its output right after it.
    fn tool_call(&mut self, index: u64, name: &str, args: &[&str], runs_ms: u64, output: &str) {
        self.call(index, name, args);
        self.pause(runs_ms);
        self.output(index + 1, index, output);
    }

    fn message(&mut self, index: u64, words: &str) {
        let id = format!("msg_{index}");
        let item = json!({"id": id, "type": "message", "status": "in_progress",
                          "role": "assistant", "content": []});
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
        );
        for word in words.split_inclusive(' ') {
            self.pause(45);
            self.event(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": word}),
            );
        }
        self.event(
            "response.output_text.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "text": words}),
        );
    }
}

/// A function_call_output item's added and done events, numbered from `seq`.
fn output_events(seq: u64, index: u64, call_index: u64, output: &str) -> String {
    let item = json!({"id": format!("fco_{call_index}"), "type": "function_call_output",
                      "call_id": format!("call_{call_index}"), "output": output,
                      "status": "completed"});
    ["response.output_item.added", "response.output_item.done"]
        .iter()
        .zip(seq..)
        .map(|(kind, n)| {
            let body = json!({"type": kind, "sequence_number": n, "output_index": index,
                              "item": item});
            format!("event: {kind}\ndata: {body}\n\n")
        })
        .collect()
}

/// Which agentic turn the gateway plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// `toolpulse demo`: a web search (1.5 s), an MCP call that fails (1 s), the answer.
    Terminal,
    /// `toolpulse demo --web`: a web search and a slow MCP call (4 s) in parallel, a file
    /// search, an MCP call that fails, the answer.
    Web,
}

impl Turn {
    fn steps(self) -> Vec<Step> {
        let response = json!({"id": "resp_demo", "object": "response", "status": "in_progress",
                              "model": "demo-model", "output": []});
        let mut s = Script::default();
        s.event("response.created", json!({"response": response}));
        s.event("response.in_progress", json!({"response": response}));
        s.pause(300);
        match self {
            Turn::Terminal => terminal(&mut s),
            Turn::Web => web(&mut s),
        }
        let mut done = response;
        done["status"] = "completed".into();
        s.event("response.completed", json!({"response": done}));
        s.steps.push(Step::Send("data: [DONE]\n\n".into()));
        s.steps
    }
}

fn terminal(s: &mut Script) {
    s.tool_call(
        1,
        "web_search",
        &["{\"query\":", "\"rust sse ", "proxy\"}"],
        1500,
        "1. hyper: a fast HTTP implementation\n2. tokio: async runtime\n3. memchr",
    );
    s.pause(200);
    s.mcp_call(
        3,
        "search_issues",
        &["{\"repo\":", "\"acme/rocket\",", "\"q\":\"streaming\"}"],
    );
    s.mcp_output(4, 3);
    s.pause(200);
    s.mcp_call(5, "create_issue", &["{\"repo\":", "\"acme/rockets\"}"]);
    s.mcp_output(6, 5);
    s.pause(200);
    s.message(
        7,
        "I found three crates for an SSE proxy, and acme/rocket already tracks streaming in #12, \
         #31 and #48; filing the issue failed because there is no repository acme/rockets.",
    );
}

/// How long the web turn's slow MCP call runs (four steps): long enough to watch (and to
/// test) its row in progress while the gateway still waits for the result.
pub const SLOW_TOOL_MS: u64 = 4000;
/// How long each of the terminal demo's slow MCP call's four steps takes.
pub const TERMINAL_STEP_MS: u64 = 600;
/// How long the web turn's web search runs, in parallel with the slow MCP call.
const SEARCH_MS: u64 = 1500;

fn web(s: &mut Script) {
    // Two calls at once: the gateway runs them in parallel.
    s.call(
        1,
        "web_search",
        &["{\"query\":", "\"rust crates for ", "an SSE proxy\"}"],
    );
    s.mcp_call(
        2,
        "search_issues",
        &["{\"repo\":", "\"acme/rocket\",", "\"q\":\"streaming\"}"],
    );
    s.pause(SEARCH_MS);
    s.output(
        3,
        1,
        "1. hyper: HTTP/1 and HTTP/2\n2. tokio: async runtime\n3. memchr: fast byte search",
    );
    s.mcp_output(4, 2);
    s.pause(300);
    s.tool_call(
        5,
        "file_search",
        &["{\"query\":", "\"deployment notes\"}"],
        1200,
        "docs/deploy.md: turn off response buffering in the load balancer",
    );
    s.pause(300);
    s.mcp_call(
        7,
        "create_issue",
        &[
            "{\"repo\":",
            "\"acme/rockets\",",
            "\"title\":\"Show tool progress\"}",
        ],
    );
    s.mcp_output(8, 7);
    s.pause(300);
    s.message(
        9,
        "Build it on hyper and tokio, with memchr to find event boundaries. acme/rocket already \
         tracks streaming in #12, #31 and #48, and the deployment notes say to turn off response \
         buffering in the load balancer. Filing the new issue failed: there is no repository \
         acme/rockets.",
    );
}

/// A response body fed from a channel.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// The gateway's side of one request: the turn's steps, the MCP tools run through `mcp` with
/// the request's trace context.
struct Turnout {
    turn: Turn,
    mcp: McpClient,
    traceparent: Option<String>,
}

impl Turnout {
    async fn play(self, tx: mpsc::Sender<Bytes>) {
        let mut running: HashMap<u64, JoinHandle<ToolResult>> = HashMap::new();
        for step in self.turn.steps() {
            let text = match step {
                Step::Pause(d) => {
                    tokio::time::sleep(d).await;
                    continue;
                }
                Step::RunTool {
                    call_index,
                    tool,
                    arguments,
                } => {
                    let (mcp, traceparent) = (self.mcp.clone(), self.traceparent.clone());
                    let run =
                        async move { mcp.call(tool, &arguments, traceparent.as_deref()).await };
                    running.insert(call_index, tokio::spawn(run));
                    continue;
                }
                Step::ToolOutput {
                    index,
                    call_index,
                    seq,
                } => {
                    let result = match running.remove(&call_index) {
                        Some(run) => run.await.map(|r| r.text).unwrap_or_default(),
                        None => String::new(),
                    };
                    output_events(seq, index, call_index, &result)
                }
                Step::Send(text) => text,
            };
            if tx.send(Bytes::from(text)).await.is_err() {
                return; // the client went away
            }
        }
    }
}

fn respond(turnout: Turnout) -> Response<ChannelBody> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(turnout.play(tx));
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(ChannelBody(rx))
        .expect("a valid static response")
}

/// Plays `turn` to every request on `listener`, forever, running its MCP tools through `mcp`.
pub async fn serve(listener: TcpListener, turn: Turn, mcp: McpClient) {
    let builder = auto::Builder::new(TokioExecutor::new());
    while let Ok((stream, _)) = listener.accept().await {
        let builder = builder.clone();
        let mcp = mcp.clone();
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(
                    TokioIo::new(stream),
                    service_fn(move |request: Request<Incoming>| {
                        let traceparent = request
                            .headers()
                            .get("traceparent")
                            .and_then(|v| v.to_str().ok())
                            .map(String::from);
                        let turnout = Turnout {
                            turn,
                            mcp: mcp.clone(),
                            traceparent,
                        };
                        async move { Ok::<_, Infallible>(respond(turnout)) }
                    }),
                )
                .await;
        });
    }
}
