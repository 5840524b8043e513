//! The demo's scripted gateway: an antwort-shaped Responses stream with an agentic turn (tool
//! calls, their results after the time the tools take, then the answer) served over real HTTP
//! on a loopback port, with the pauses where the gateway would be running tools. Two turns:
//! the terminal demo's short one and the web page's, with parallel, slow and failing tools.

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

/// One step of the script: bytes to send, or a pause.
enum Step {
    Send(String),
    Pause(Duration),
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
        let out = json!({"id": format!("fco_{call_index}"), "type": "function_call_output",
                         "call_id": format!("call_{call_index}"), "output": output,
                         "status": "completed"});
        for kind in ["response.output_item.added", "response.output_item.done"] {
            self.event(kind, json!({"output_index": index, "item": out}));
        }
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
    s.tool_call(
        3,
        "github_create_issue",
        &["{\"repo\":", "\"acme/rocket\"}"],
        1000,
        "invalid arguments: repository acme/rocket not found",
    );
    s.pause(200);
    s.message(5, "I found three crates for an SSE proxy; filing the issue failed because the repository does not exist.");
}

/// How long the web turn's slow MCP call runs: long enough to watch (and to test) its row in
/// progress while the gateway still holds the result.
pub const SLOW_TOOL_MS: u64 = 4000;
/// How long the web turn's web search runs, in parallel with the slow MCP call.
const SEARCH_MS: u64 = 1500;

fn web(s: &mut Script) {
    // Two calls at once: the gateway runs them in parallel.
    s.call(
        1,
        "web_search",
        &["{\"query\":", "\"rust crates for ", "an SSE proxy\"}"],
    );
    s.call(
        2,
        "github_search_issues",
        &["{\"repo\":", "\"acme/rocket\",", "\"q\":\"streaming\"}"],
    );
    s.pause(SEARCH_MS);
    s.output(
        3,
        1,
        "1. hyper: HTTP/1 and HTTP/2\n2. tokio: async runtime\n3. memchr: fast byte search",
    );
    s.pause(SLOW_TOOL_MS - SEARCH_MS);
    s.output(
        4,
        2,
        "3 open issues mention streaming: #12 buffering behind nginx, #31 idle timeouts, #48 reconnects",
    );
    s.pause(300);
    s.tool_call(
        5,
        "file_search",
        &["{\"query\":", "\"deployment notes\"}"],
        1200,
        "docs/deploy.md: turn off response buffering in the load balancer",
    );
    s.pause(300);
    s.tool_call(
        7,
        "github_create_issue",
        &[
            "{\"repo\":",
            "\"acme/rockets\",",
            "\"title\":\"Show tool progress\"}",
        ],
        1000,
        "invalid arguments: repository acme/rockets not found",
    );
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

fn respond(turn: Turn) -> Response<ChannelBody> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for step in turn.steps() {
            match step {
                Step::Pause(d) => tokio::time::sleep(d).await,
                Step::Send(text) => {
                    if tx.send(Bytes::from(text)).await.is_err() {
                        return; // the client went away
                    }
                }
            }
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(ChannelBody(rx))
        .expect("a valid static response")
}

/// Plays `turn` to every request on `listener`, forever.
pub async fn serve(listener: TcpListener, turn: Turn) {
    let builder = auto::Builder::new(TokioExecutor::new());
    while let Ok((stream, _)) = listener.accept().await {
        let builder = builder.clone();
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(
                    TokioIo::new(stream),
                    service_fn(move |_request: Request<Incoming>| async move {
                        Ok::<_, Infallible>(respond(turn))
                    }),
                )
                .await;
        });
    }
}
