//! The AG-UI side of each tracked call: which events its lifecycle transitions become. A call of
//! a tool the run's input declares is the client's (start, arguments, end); any other call is
//! run by the gateway and is shown while it runs, by an activity message whose content the
//! transitions patch, and ends with its result.

use serde_json::{Value, json};

use super::event::AgUiEvent;
use super::ids::Ids;
use crate::core::lifecycle::{Call, Outcome, Phase, Progress, Transition};

/// The `activityType` of a running call's activity message.
pub const ACTIVITY_TYPE: &str = "tool_call";

/// What the run has shown of one open call.
#[derive(Debug)]
struct Shown {
    call_id: String,
    /// Its `toolCallId`: the `call_id`, unless the run used that already.
    id: String,
    /// Its activity's `messageId`.
    activity: String,
    /// Run by the gateway (its tool is not one the input declares).
    gateway: bool,
    /// Bytes of the arguments sent as `TOOL_CALL_ARGS`.
    args_sent: usize,
    ended: bool,
    /// The search query is in the activity's content.
    query: bool,
}

impl Shown {
    fn delta(&self, patch: Value, emit: &mut dyn FnMut(&AgUiEvent<'_>)) {
        emit(&AgUiEvent::ActivityDelta {
            message_id: &self.activity,
            activity_type: ACTIVITY_TYPE,
            patch,
        });
    }

    /// Ends the call's arguments, once: what of them was not streamed as deltas goes first (a
    /// gateway that sent them whole in the item).
    fn end(&mut self, call: &Call, emit: &mut dyn FnMut(&AgUiEvent<'_>)) {
        if self.ended {
            return;
        }
        self.ended = true;
        let rest = call.arguments.get(self.args_sent..).unwrap_or("");
        if !call.arguments_truncated && !rest.is_empty() {
            self.args_sent = call.arguments.len();
            emit(&AgUiEvent::ToolCallArgs {
                tool_call_id: &self.id,
                delta: rest,
            });
        }
        emit(&AgUiEvent::ToolCallEnd {
            tool_call_id: &self.id,
        });
    }
}

/// The open calls as shown; at most as many as the tracker holds open.
#[derive(Debug, Default)]
pub struct Calls {
    open: Vec<Shown>,
}

impl Calls {
    /// Renders `transition` into events, handed one at a time to `emit`. `client_tools` are the
    /// names of the tools the input declares; `ids` the run's.
    pub fn render(
        &mut self,
        transition: &Transition,
        client_tools: &[String],
        ids: &mut Ids,
        emit: &mut dyn FnMut(&AgUiEvent<'_>),
    ) {
        let call = &transition.call;
        if let Phase::Started = transition.phase {
            self.start(call, client_tools, ids, emit);
            return;
        }
        let Some(i) = self.open.iter().position(|s| s.call_id == call.call_id) else {
            return;
        };
        let shown = &mut self.open[i];
        match &transition.phase {
            Phase::Started | Phase::StillRunning { .. } => {}
            Phase::ArgumentsDelta { chunk } => {
                if !shown.ended && !chunk.is_empty() {
                    shown.args_sent += chunk.len();
                    emit(&AgUiEvent::ToolCallArgs {
                        tool_call_id: &shown.id,
                        delta: chunk,
                    });
                }
            }
            Phase::Running => {
                shown.end(call, emit);
                if shown.gateway
                    && !shown.query
                    && let Some(query) = query(call)
                {
                    shown.query = true;
                    let patch = json!([{"op": "add", "path": "/query", "value": query}]);
                    shown.delta(patch, emit);
                }
            }
            Phase::Progress { report, .. } => {
                if shown.gateway {
                    shown.delta(progress_patch(report), emit);
                }
            }
            Phase::Finished {
                outcome, output, ..
            } => {
                let mut shown = self.open.remove(i);
                shown.end(call, emit);
                if !shown.gateway {
                    return;
                }
                if let Some(output) = output {
                    let message_id = ids.unique(Some(&format!("result-{}", shown.id)), "result");
                    emit(&AgUiEvent::ToolCallResult {
                        message_id: &message_id,
                        tool_call_id: &shown.id,
                        content: &output.text,
                        role: "tool",
                    });
                }
                let status = match outcome {
                    Outcome::Completed => "completed",
                    Outcome::Failed(_) => "failed",
                };
                let patch = json!([{"op": "add", "path": "/status", "value": status}]);
                shown.delta(patch, emit);
            }
        }
    }

    /// A call starts: `TOOL_CALL_START`, and the activity of a call the gateway runs.
    fn start(
        &mut self,
        call: &Call,
        client_tools: &[String],
        ids: &mut Ids,
        emit: &mut dyn FnMut(&AgUiEvent<'_>),
    ) {
        let id = ids.unique(Some(&call.call_id), "call");
        let activity = ids.unique(Some(&format!("activity-{id}")), "activity");
        let gateway = !client_tools.contains(&call.name);
        emit(&AgUiEvent::ToolCallStart {
            tool_call_id: &id,
            tool_call_name: &call.name,
        });
        let query = query(call);
        if gateway {
            let kind = call.kind.as_str();
            let mut content = json!({"toolCallId": id, "kind": kind, "status": "running"});
            if let Some(query) = &query {
                content["query"] = json!(query);
            }
            emit(&AgUiEvent::ActivitySnapshot {
                message_id: &activity,
                activity_type: ACTIVITY_TYPE,
                content,
            });
        }
        self.open.push(Shown {
            call_id: call.call_id.clone(),
            id,
            activity,
            gateway,
            args_sent: 0,
            ended: false,
            query: query.is_some(),
        });
    }
}

/// The search query of a call, from its arguments: `query`, else its `queries` joined.
fn query(call: &Call) -> Option<String> {
    let args: Value = serde_json::from_str(&call.arguments).ok()?;
    match (args.get("query"), args.get("queries")) {
        (Some(Value::String(query)), _) => Some(query.clone()),
        (_, Some(Value::Array(list))) => {
            let list: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
            (!list.is_empty()).then(|| list.join(", "))
        }
        _ => None,
    }
}

/// The patch of a progress report: `progress`, and `total` and `message` when it has them.
fn progress_patch(report: &Progress) -> Value {
    let mut patch = vec![json!({"op": "add", "path": "/progress", "value": report.progress})];
    if let Some(total) = report.total {
        patch.push(json!({"op": "add", "path": "/total", "value": total}));
    }
    if let Some(message) = &report.message {
        patch.push(json!({"op": "add", "path": "/message", "value": message}));
    }
    Value::Array(patch)
}
