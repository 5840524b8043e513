//! Profile `openai` (the default): OpenAI's hosted-tool lifecycle events, as antwort's spec
//! (seed 000) and PRODUCT.md §2 define them.
//!
//! | kind        | running                          | finished                                   |
//! |-------------|----------------------------------|--------------------------------------------|
//! | mcp         | `mcp_call.in_progress`           | `mcp_call.completed` / `mcp_call.failed`   |
//! | web_search  | `web_search_call.in_progress`, `.searching` | `web_search_call.completed` + outcome |
//! | file_search | `file_search_call.in_progress`, `.searching` | `file_search_call.completed` + outcome |
//!
//! Every event carries `item_id`/`output_index` of the `function_call` item itself (an item the
//! client already has) and `name`; terminal events add `outcome` and `duration_ms`. No event has
//! a top-level `error` key: openai-python raises `APIError` on one. A call that never reached
//! `running` had no `in_progress`, so it gets no terminal event either.

use crate::lifecycle::{Kind, Outcome, Phase, Transition};
use crate::sse::NewEvent;

pub fn shows(kind: Kind) -> bool {
    matches!(kind, Kind::Mcp | Kind::WebSearch | Kind::FileSearch)
}

pub fn render(transition: &Transition, out: &mut Vec<NewEvent>) {
    let call = &transition.call;
    let base = |event_type| {
        let event = NewEvent::new(event_type).with("item_id", call.item_id.as_str());
        let event = match call.output_index {
            Some(i) => event.with("output_index", i),
            None => event,
        };
        event.with("name", call.name.as_str())
    };
    match (&transition.phase, call.kind) {
        (Phase::Started, _) => {}
        (Phase::Running, Kind::Mcp) => out.push(base("response.mcp_call.in_progress")),
        (Phase::Running, Kind::WebSearch) => out.extend([
            base("response.web_search_call.in_progress"),
            base("response.web_search_call.searching"),
        ]),
        (Phase::Running, Kind::FileSearch) => out.extend([
            base("response.file_search_call.in_progress"),
            base("response.file_search_call.searching"),
        ]),
        (
            Phase::Finished {
                outcome, duration, ..
            },
            kind,
        ) if call.running_since.is_some() => {
            let event_type = match (kind, outcome) {
                (Kind::Mcp, Outcome::Completed) => "response.mcp_call.completed",
                (Kind::Mcp, Outcome::Failed(_)) => "response.mcp_call.failed",
                (Kind::WebSearch, _) => "response.web_search_call.completed",
                (Kind::FileSearch, _) => "response.file_search_call.completed",
                (Kind::Function | Kind::Ignore, _) => return,
            };
            let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            out.push(
                base(event_type)
                    .with("outcome", outcome.as_str())
                    .with("duration_ms", millis),
            );
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::lifecycle::{Call, Failure};

    fn call(kind: Kind, running: bool) -> Call {
        let now = Instant::now();
        Call {
            call_id: "call_1".into(),
            item_id: "fc_1".into(),
            output_index: Some(2),
            name: "tool".into(),
            kind,
            rule: None,
            arguments: String::new(),
            arguments_truncated: false,
            added_at: now,
            running_since: running.then_some(now),
        }
    }

    fn types(kind: Kind, phase: Phase, running: bool) -> Vec<&'static str> {
        let mut out = Vec::new();
        render(
            &Transition {
                call: call(kind, running),
                phase,
            },
            &mut out,
        );
        out.iter().map(|e| e.event_type).collect()
    }

    fn finished(outcome: Outcome) -> Phase {
        Phase::Finished {
            outcome,
            duration: Duration::from_millis(1500),
            output: None,
        }
    }

    #[test]
    fn table_of_events() {
        let failed = || Outcome::Failed(Failure::NoOutput);
        assert_eq!(
            types(Kind::Mcp, Phase::Running, true),
            ["response.mcp_call.in_progress"]
        );
        assert_eq!(
            types(Kind::WebSearch, Phase::Running, true),
            [
                "response.web_search_call.in_progress",
                "response.web_search_call.searching"
            ]
        );
        assert_eq!(
            types(Kind::FileSearch, Phase::Running, true),
            [
                "response.file_search_call.in_progress",
                "response.file_search_call.searching"
            ]
        );
        assert_eq!(
            types(Kind::Mcp, finished(failed()), true),
            ["response.mcp_call.failed"]
        );
        assert_eq!(
            types(Kind::WebSearch, finished(failed()), true),
            ["response.web_search_call.completed"]
        );
        assert!(types(Kind::Function, Phase::Running, true).is_empty());
        assert!(types(Kind::Mcp, Phase::Started, false).is_empty());
        assert!(
            types(Kind::Mcp, finished(Outcome::Completed), false).is_empty(),
            "no terminal without in_progress"
        );
    }

    #[test]
    fn fields_of_a_terminal_event() {
        let mut out = Vec::new();
        let t = Transition {
            call: call(Kind::FileSearch, true),
            phase: finished(Outcome::Failed(Failure::Error)),
        };
        render(&t, &mut out);
        let keys: Vec<_> = out[0].fields.iter().map(|f| f.0).collect();
        assert_eq!(
            keys,
            ["item_id", "output_index", "name", "outcome", "duration_ms"]
        );
        assert_eq!(out[0].fields[3].1, "failed");
        assert_eq!(out[0].fields[4].1, 1500);
    }
}
