//! The input as the rewriter must repair it before anything else is asked of the output: the
//! rules of docs/stream-rules.md that toolpulse mends from what it has seen. Written apart from
//! the rewriter (serde_json and the SSE lines read anew), so it checks it rather than echoes it.
//!
//! - `response_id`: every event of a response carries the id its `response.created` gave it.
//!   An event is mended when its JSON `type` lists the response (`response.completed`, …),
//!   whatever its `event:` line says (clients read the data's type); a `response.created` counts
//!   the same way.

use serde_json::value::RawValue;
use toolpulse::core::sse::Event;

use super::split;

/// Events whose `response` is the response so far (or at its end).
const LISTS_RESPONSE: &[&str] = &[
    "response.completed",
    "response.failed",
    "response.incomplete",
    "response.in_progress",
    "response.queued",
];
const CREATED: &str = "response.created";

/// `input` with its events mended; events over `max_event_bytes` (forwarded unread) and the
/// unterminated tail stay as they are.
pub fn mend(input: &[u8], max_event_bytes: usize) -> Vec<u8> {
    let (events, tail) = split(input);
    let mut out = Vec::with_capacity(input.len());
    let mut created: Option<String> = None;
    for event in &events {
        let raw = event.raw();
        if raw.len() > max_event_bytes {
            out.extend_from_slice(raw);
            continue;
        }
        match (response_id(event), &created) {
            (Some(Listed { kind, id }), _) if kind == CREATED => {
                created = id.map(|(value, _)| value);
                out.extend_from_slice(raw);
            }
            (
                Some(Listed {
                    id: Some((value, Some(span))),
                    ..
                }),
                Some(shown),
            ) if *shown != value => {
                let shown = serde_json::Value::from(shown.as_str()).to_string();
                out.extend_from_slice(&raw[..span.start]);
                out.extend_from_slice(shown.as_bytes());
                out.extend_from_slice(&raw[span.end..]);
            }
            _ => out.extend_from_slice(raw),
        }
    }
    out.extend_from_slice(&tail);
    out
}

type Span = std::ops::Range<usize>;

/// An event that starts or lists a response: its `type`, and its `response.id` if it has one.
struct Listed {
    kind: String,
    /// The id, and where it lies in the raw bytes (`None` when not in one piece).
    id: Option<(String, Option<Span>)>,
}

/// For an event that starts or lists a response (by its data's `type`): its type, and
/// its `response.id` with where that lies in the raw bytes (`None` when not in one piece).
fn response_id(event: &Event) -> Option<Listed> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "type")]
        kind: Option<String>,
        #[serde(borrow)]
        response: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Response<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    let data = event.data()?;
    let text = std::str::from_utf8(&data).ok()?;
    let envelope: Envelope<'_> = serde_json::from_str(text).ok()?;
    let kind = envelope.kind?;
    if kind != CREATED && !LISTS_RESPONSE.contains(&kind.as_str()) {
        return None;
    }
    let id = envelope
        .response
        .and_then(|r| serde_json::from_str::<Response<'_>>(r.get()).ok())
        .and_then(|r| r.id)
        .and_then(|raw| {
            let value: String = serde_json::from_str(raw.get()).ok()?;
            let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            Some((value, raw_span(event.raw(), start..start + raw.get().len())))
        });
    Some(Listed { kind, id })
}

/// Where the data bytes `span` lie in the raw event, if in one piece: the data is the `data:`
/// lines' values joined by `\n` (SSE), read here from the lines themselves.
fn raw_span(raw: &[u8], span: Span) -> Option<Span> {
    let mut data_at = 0;
    let mut first = true;
    let mut line_start = 0;
    while line_start < raw.len() {
        let end = raw[line_start..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
            .map_or(raw.len(), |p| line_start + p);
        let line = &raw[line_start..end];
        if let Some(value) = line.strip_prefix(b"data") {
            let value_at = match value {
                [b':', b' ', ..] => line_start + 6,
                [b':', ..] => line_start + 5,
                [] => end,
                _ => usize::MAX,
            };
            if value_at != usize::MAX {
                if !first {
                    data_at += 1; // the `\n` joining it to the line before
                }
                first = false;
                let len = end - value_at;
                if span.start >= data_at && span.end <= data_at + len {
                    let at = value_at + (span.start - data_at);
                    return Some(at..at + span.len());
                }
                data_at += len;
            }
        }
        line_start = match raw.get(end..end + 2) {
            Some(b"\r\n") => end + 2,
            _ => end + 1,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_id_is_put_back_whatever_the_line_says() {
        let input = concat!(
            "data: {\"type\":\"response.created\",\"response\":{\"id\":\"A\"}}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\n",
            "data: \"response\":{\"id\":\"B\",\"x\":\"B\"}}\n\n",
            "data:\rdata: {\"type\":\"response.completed\",\"response\":{\"id\":\"B\"}}\r\r",
            "event: other\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"B\"}}\n\n",
        );
        let want = concat!(
            "data: {\"type\":\"response.created\",\"response\":{\"id\":\"A\"}}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\n",
            "data: \"response\":{\"id\":\"A\",\"x\":\"B\"}}\n\n",
            "data:\rdata: {\"type\":\"response.completed\",\"response\":{\"id\":\"A\"}}\r\r",
            "event: other\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"A\"}}\n\n",
        );
        assert_eq!(
            String::from_utf8(mend(input.as_bytes(), usize::MAX)).expect("utf-8"),
            want
        );
        assert_eq!(mend(input.as_bytes(), 60), input.as_bytes());
    }
}
