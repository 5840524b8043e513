//! Request bodies: companions stripped, `previous_response_id` read and replaced, declared
//! functions.

use serde_json::{Value, json};

use super::*;

#[test]
fn previous_response_id_is_read_and_replaced_in_place() {
    let body =
        br#"{"input":"hi", "previous_response_id" : "resp_a","x":{"previous_response_id":"no"}}"#;
    let previous = |body| TopLevel::of(body).previous_response_id();
    assert_eq!(previous(body).as_deref(), Some("resp_a"));
    let out = set_previous_response_id(body, "resp_\"b").expect("set");
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        r#"{"input":"hi", "previous_response_id" : "resp_\"b","x":{"previous_response_id":"no"}}"#
    );
    for none in [
        &br#"{"input":"hi"}"#[..],
        br#"{"previous_response_id":null}"#,
        b"[1]",
    ] {
        assert_eq!(previous(none), None);
    }
    assert_eq!(set_previous_response_id(br#"{"a":1}"#, "x"), None);
}

#[test]
fn removes_companions_and_references_to_them() {
    let body = br#"{"model":"m", "input": [ {"type":"function_call","id":"fc_1","call_id":"c1"}, {"type":"mcp_call","id":"tp_c1","status":"completed"}, {"type":"item_reference","id":"tp_c2"}, {"type":"item_reference","id":"msg_1"}, {"type":"message","id":"tp_user_msg","role":"user","content":"hi"} ] ,"stream":true}"#;
    let out = strip_companions(body).expect("changed");
    let v: Value = serde_json::from_slice(&out).expect("JSON");
    assert_eq!(
        v["input"],
        json!([
            {"type":"function_call","id":"fc_1","call_id":"c1"},
            {"type":"item_reference","id":"msg_1"},
            {"type":"message","id":"tp_user_msg","role":"user","content":"hi"}
        ])
    );
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.starts_with(r#"{"model":"m", "input": [{"type":"function_call""#));
    assert!(text.ends_with(r#"] ,"stream":true}"#), "{text}");
}

#[test]
fn declared_function_tools_by_name() {
    let body = br#"{"tools":[{"type":"function","name":"web_search","parameters":{}},{"type":"web_search"},{"type":"mcp","server_label":"x"},{"type":"function","name":"lookup"}],"input":"hi"}"#;
    let declared = |body| TopLevel::of(body).declared_functions();
    assert_eq!(declared(body), ["web_search", "lookup"]);
    assert!(declared(br#"{"input":"hi"}"#).is_empty());
    assert!(declared(br#"{"tools":"no"}"#).is_empty());
    assert!(declared(br#"{"tools":null,"tools":[{"type":"function","name":"x"}]}"#).len() == 1);
    assert!(declared(b"not json").is_empty());
}

#[test]
fn everything_else_is_left_alone() {
    for body in [
        &br#"{"input":"just text"}"#[..],
        br#"{"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}"#,
        br#"{"model":"m"}"#,
        br#"not json {"input":[{"type":"mcp_call","id":"tp_x"}]}"#,
        br#"{"input":[{"type":"mcp_call","id":"mcp_x"}]}"#,
        b"\xff",
    ] {
        assert_eq!(strip_companions(body), None, "{body:?}");
    }
    let all = br#"{"input":[{"type":"web_search_call","id":"tp_a"}]}"#;
    assert_eq!(
        strip_companions(all).as_deref(),
        Some(&br#"{"input":[]}"#[..])
    );
}

/// One pass finds each member as `members::get` finds it: the last, unless `null`, through
/// serde_json where the scan declines (an escaped key, deep nesting), none in what is not one
/// JSON object.
#[test]
fn top_level_members_are_what_get_finds() {
    let deep = format!(
        r#"{{"tools":{}1{},"input":"x"}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    for body in [
        r#"{"input":"hi","tools":[],"previous_response_id":"r"}"#,
        r#"{"input":[1],"input":null,"tools":null}"#,
        r#"{"input":null,"input":[1],"previous_response_id":"a","previous_response_id":"b"}"#,
        r#"{"in\u0070ut":[1],"tools":[2]}"#,
        r#" { "tools" : [ ] , "input" : "x" } "#,
        r#"{"input":[1],"x":"#,
        r#"{"input":[1]} {}"#,
        "[1]",
        "not json",
        "",
        &deep,
    ] {
        let top = TopLevel::of(body.as_bytes());
        assert_eq!(top.input, members::get(body, "input"), "{body}");
        assert_eq!(top.tools, members::get(body, "tools"), "{body}");
        let previous = members::get(body, "previous_response_id");
        assert_eq!(top.previous_response_id, previous, "{body}");
    }
    let top = TopLevel::of(b"{\"input\":[],\"x\":\"\xff\"}");
    assert_eq!((top.text, top.input), (None, None), "not UTF-8");
}
