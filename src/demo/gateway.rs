//! The demo's scripted gateway: an antwort-shaped Responses stream with an agentic turn — a
//! web search (1.5 s), an MCP call that fails (1 s), then the answer — served over real HTTP on
//! a loopback port, with the pauses where the gateway would be running tools.

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

    fn tool_call(&mut self, index: u64, name: &str, args: &[&str], runs_ms: u64, output: &str) {
        let id = format!("fc_{index}");
        let call_id = format!("call_{index}");
        let item = json!({"id": id, "type": "function_call", "status": "in_progress",
                          "name": name, "call_id": call_id, "arguments": ""});
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
        self.pause(runs_ms);
        let out = json!({"id": format!("fco_{index}"), "type": "function_call_output",
                         "call_id": call_id, "output": output, "status": "completed"});
        for kind in ["response.output_item.added", "response.output_item.done"] {
            self.event(kind, json!({"output_index": index + 1, "item": out}));
        }
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

/// The demo's agentic turn.
fn script() -> Vec<Step> {
    let response = json!({"id": "resp_demo", "object": "response", "status": "in_progress",
                          "model": "demo-model", "output": []});
    let mut s = Script::default();
    s.event("response.created", json!({"response": response}));
    s.event("response.in_progress", json!({"response": response}));
    s.pause(300);
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
    let mut done = response;
    done["status"] = "completed".into();
    s.event("response.completed", json!({"response": done}));
    s.steps.push(Step::Send("data: [DONE]\n\n".into()));
    s.steps
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

async fn respond(_request: Request<Incoming>) -> Result<Response<ChannelBody>, Infallible> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        for step in script() {
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
    let response = Response::builder()
        .header("content-type", "text/event-stream")
        .body(ChannelBody(rx))
        .expect("a valid static response");
    Ok(response)
}

/// Serves the script to every request on `listener`, forever.
pub async fn serve(listener: TcpListener) {
    let builder = auto::Builder::new(TokioExecutor::new());
    while let Ok((stream, _)) = listener.accept().await {
        let builder = builder.clone();
        tokio::spawn(async move {
            let _ = builder
                .serve_connection(TokioIo::new(stream), service_fn(respond))
                .await;
        });
    }
}
