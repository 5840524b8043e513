//! Whether an output event is the next upstream event, changed only where the contract allows:
//! its `sequence_number` and `output_index` digits, and companion items spliced into the
//! `response.output` it lists (as compact JSON, each after an existing item).

use serde_json::{Map, Value};
use toolpulse::core::sse::Event;

use super::{COMPANION_PREFIX, index_of, json_of, number_of};

/// `Some(changed?)` when `out` is `inp` as the contract allows it to change, `None` when it is
/// another event, an error when it is `inp` changed beyond that.
pub fn matches(inp: &Event, out: &Event) -> Result<Option<bool>, String> {
    if inp.raw() == out.raw() {
        return Ok(Some(false));
    }
    let (Some(a), Some(b)) = (json_of(inp), json_of(out)) else {
        return Ok(None);
    };
    let added = added_companions(&a, &b);
    if strip(a.clone(), &[]) != strip(b.clone(), &added) {
        return Ok(None);
    }
    if number_of(&a) == number_of(&b) && index_of(&a) == index_of(&b) && added.is_empty() {
        return Err(format!(
            "event numbered {:?} kept its numbers but not its bytes",
            number_of(&a)
        ));
    }
    // The bytes: the input's, but for digits and the companions' compact JSON.
    let mut rest = out.raw().to_vec();
    for item in &added {
        let text = format!(",{}", serde_json::to_string(item).unwrap_or_default());
        let Some(at) = memchr::memmem::find(&rest, text.as_bytes()) else {
            return Err(format!(
                "companion {} is not spliced in as it is listed",
                item["id"]
            ));
        };
        rest.drain(at..at + text.len());
    }
    if !same_but_digits(inp.raw(), &rest) {
        return Err(format!(
            "event numbered {:?} changed beyond its numbers",
            number_of(&a)
        ));
    }
    Ok(Some(true))
}

/// Items of `out`'s `response.output` that are companions not in `inp`'s.
fn added_companions(inp: &Map<String, Value>, out: &Map<String, Value>) -> Vec<Value> {
    let listed = |json: &Map<String, Value>| -> Vec<Value> {
        json.get("response")
            .and_then(|r| r.get("output"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let before = listed(inp);
    listed(out)
        .into_iter()
        .filter(|item| is_companion(item) && !before.contains(item))
        .collect()
}

pub fn is_companion(item: &Value) -> bool {
    item.get("id")
        .and_then(Value::as_str)
        .is_some_and(|id| id.starts_with(COMPANION_PREFIX))
}

/// The event without its numbers and without `added` in its `response.output`.
fn strip(mut json: Map<String, Value>, added: &[Value]) -> Map<String, Value> {
    json.remove("sequence_number");
    json.remove("output_index");
    if let Some(Value::Array(items)) = json.get_mut("response").and_then(|r| r.get_mut("output")) {
        items.retain(|item| !added.contains(item));
    }
    json
}

/// Equal bytes, except that runs of ASCII digits may differ.
pub(super) fn same_but_digits(x: &[u8], y: &[u8]) -> bool {
    let (mut i, mut j) = (0, 0);
    loop {
        match (x.get(i), y.get(j)) {
            (None, None) => return true,
            (Some(a), Some(b)) if a.is_ascii_digit() && b.is_ascii_digit() => {
                i += x[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                j += y[j..].iter().take_while(|c| c.is_ascii_digit()).count();
            }
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(text: &str) -> Event {
        let mut parser = toolpulse::core::sse::Parser::new(usize::MAX);
        parser.push(text.as_bytes());
        match parser.next_item() {
            Some(toolpulse::core::sse::Item::Event(e)) => e,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn numbers_and_spliced_companions_only() {
        let inp = event(
            "data: {\"type\":\"x\",\"sequence_number\":5,\"output_index\":1,\"response\":{\"output\":[{\"type\":\"function_call\",\"call_id\":\"c\"}]}}\n\n",
        );
        let ok = event(
            "data: {\"type\":\"x\",\"sequence_number\":7,\"output_index\":2,\"response\":{\"output\":[{\"type\":\"function_call\",\"call_id\":\"c\"},{\"id\":\"tp_c\"}]}}\n\n",
        );
        assert_eq!(matches(&inp, &ok), Ok(Some(true)));
        let spaced = event(
            "data: {\"type\":\"x\",\"sequence_number\":7,\"output_index\":2,\"response\":{\"output\":[{\"type\":\"function_call\",\"call_id\":\"c\"},{\"id\": \"tp_c\"}]}}\n\n",
        );
        assert!(matches(&inp, &spaced).is_err());
        let other = event("data: {\"type\":\"y\",\"sequence_number\":7}\n\n");
        assert_eq!(matches(&inp, &other), Ok(None));
        let reformatted = event(
            "data: {\"type\": \"x\",\"sequence_number\":7,\"output_index\":2,\"response\":{\"output\":[{\"type\":\"function_call\",\"call_id\":\"c\"}]}}\n\n",
        );
        assert!(matches(&inp, &reformatted).is_err());
    }
}
