//! The next turn's mapping: hosted items and references mapped back, refusals, companions
//! removed, bodies left alone.

use super::*;
use crate::features::hosted::store::{Gone, Pair};

fn key() -> Key {
    Key::new(b"a key of sixteen bytes")
}

fn input(body: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(body).expect("JSON");
    v["input"].clone()
}

fn map(body: &str, found: &Found) -> Result<(Option<Vec<u8>>, Mapped), Refusal> {
    let turn = Turn::of(TopLevel::of(body.as_bytes()));
    let (out, mapped) = map_input(&turn, &key(), found, 1 << 20)?;
    Ok((out.map(Rewritten::into_bytes), mapped))
}

#[test]
fn items_and_references_become_the_gateways_pair() {
    let key = key();
    let web = key.id_for("call_web", 1);
    let mcp = key.id_for("call_mcp", 1);
    let call = r#"{"type":"function_call","id":"fc_1","call_id":"call_web","name":"web_search","arguments":"{\"query\":\"q\"}","status":"completed"}"#;
    let output = r#"{"type":"function_call_output","id":"fco_1","call_id":"call_web","output":"[{\"title\":\"exact\"}]"}"#;
    let pair = Pair {
        call_item: call.into(),
        output_item: output.into(),
    };
    let mut found = Found::default();
    found.0.insert(web.clone(), Ok(pair));
    found.0.insert(mcp.clone(), Err(Gone::AnotherCaller));
    let body = format!(
        r#"{{"model":"m","input":[{{"role":"user","content":"hi"}},{{"type":"item_reference","id":"{web}"}},{{"type":"mcp_call","id":"{mcp}","name":"lookup","arguments":"{{}}","output":"42","status":"completed","server_label":"s"}},{{"type":"mcp_call","id":"tp_call_x"}},{{"type":"message","id":"msg_1","role":"assistant","content":[]}},{{"id":"{web}"}}],"stream":true}}"#
    );
    let (out, mapped) = map(&body, &found).expect("mapped");
    let out = out.expect("changed");
    let expected = Mapped {
        from_store: 2,
        from_content: 1,
        companions: 1,
    };
    assert_eq!(mapped, expected);
    let items = input(&out);
    let types: Vec<_> = items
        .as_array()
        .expect("list")
        .iter()
        .map(|i| i["type"].clone())
        .collect();
    let (fc, fco) = (json!("function_call"), json!("function_call_output"));
    let all = [
        &Value::Null,
        &fc,
        &fco,
        &fc,
        &fco,
        &json!("message"),
        &fc,
        &fco,
    ];
    assert_eq!(types.iter().collect::<Vec<_>>(), all);
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.contains(call) && text.contains(output),
        "verbatim: {text}"
    );
    assert_eq!(items[3]["call_id"], "call_mcp", "the verified call id");
    assert_eq!(items[4]["output"], "42");
    assert!(text.ends_with(r#","stream":true}"#));
}

#[test]
fn references_that_cannot_be_mapped_are_refused_naming_the_item_and_why() {
    let key = key();
    let theirs = Key::new(b"another deployment!!").id_for("call_1", 1);
    let ours = key.id_for("call_2", 1);
    let reference = |id: &str| format!(r#"{{"input":[{{"type":"item_reference","id":"{id}"}}]}}"#);
    let mut found = Found::default();
    for (gone, reason) in [
        (Gone::Expired, "expired"),
        (Gone::Evicted, "evicted"),
        (Gone::AnotherCaller, "another_caller"),
        (Gone::NotKept, "not_kept"),
    ] {
        found.0.insert(ours.clone(), Err(gone));
        let refusal = map(&reference(&ours), &found).expect_err("refused");
        assert_eq!(refusal.reason().as_str(), reason);
        assert_eq!(refusal.code(), "hosted_item_unavailable");
        assert!(refusal.to_string().contains(&ours), "{refusal}");
    }
    let refusal = map(&reference(&theirs), &found).expect_err("refused");
    assert_eq!(refusal.reason().as_str(), "unverified");
    // A full item whose id does not verify maps from its content, with the call id it
    // carries, and never from the store.
    found.0.insert(
        theirs.clone(),
        Ok(Pair {
            call_item: "{\"secret\":1}".into(),
            output_item: String::new(),
        }),
    );
    let body = format!(
        r#"{{"input":[{{"type":"web_search_call","id":"{theirs}","status":"completed","action":{{"type":"search","query":"q"}}}}]}}"#
    );
    let (out, mapped) = map(&body, &found).expect("mapped");
    let text = String::from_utf8(out.expect("changed")).expect("utf-8");
    assert!(!text.contains("secret"), "{text}");
    assert_eq!(mapped.from_content, 1);
    let items = input(text.as_bytes());
    assert_eq!(items[0]["name"], "web_search");
    assert_eq!(items[0]["arguments"], r#"{"query":"q"}"#);
    assert_eq!(items[0]["call_id"], "call_1", "the call id the id carries");
    assert_eq!(items[1]["output"], LOST_OUTPUT);
}

#[test]
fn many_references_to_one_large_pair_are_refused_by_size_before_they_are_built() {
    let key = key();
    let id = key.id_for("call_big", 1);
    let pair = Pair {
        call_item: format!(
            r#"{{"type":"function_call","call_id":"call_big","output":"{}"}}"#,
            "x".repeat(10_000)
        ),
        output_item: String::new(),
    };
    let mut found = Found::default();
    found.0.insert(id.clone(), Ok(pair));
    let one = format!(r#"{{"type":"item_reference","id":"{id}"}}"#);
    let body = format!(r#"{{"input":[{}]}}"#, vec![one.clone(); 40_000].join(","));
    let turn = Turn::of(TopLevel::of(body.as_bytes()));
    let refused = map_input(&turn, &key, &found, 1 << 20).expect_err("too large");
    assert_eq!(refused, Refusal::TooLarge { limit: 1 << 20 });
    assert!(refused.to_string().contains("1048576 bytes"), "{refused}");
    let few = format!(r#"{{"input":[{}]}}"#, vec![one; 3].join(","));
    let few = Turn::of(TopLevel::of(few.as_bytes()));
    let (out, _) = map_input(&few, &key, &found, 1 << 20).expect("within");
    let out = out.expect("changed");
    let len = out.len();
    assert_eq!(
        out.into_bytes().len(),
        len,
        "the planned length is the written one"
    );
    assert_eq!(signed_ids(&turn, &key), [id], "one lookup per distinct id");
}

#[test]
fn ambiguous_bodies_are_refused_when_they_hold_hosted_ids() {
    let key = key();
    let id = key.id_for("call_1", 1);
    let found = Found::default();
    let twice = format!(r#"{{"input":[{{"type":"item_reference","id":"{id}"}}],"input":"hi"}}"#);
    let refused = map(&twice, &found).expect_err("ambiguous");
    assert_eq!(
        refused,
        Refusal::Ambiguous {
            what: "input".into()
        }
    );
    let item = format!(r#"{{"input":[{{"type":"mcp_call","id":"{id}","id":"mcp_1"}}]}}"#);
    assert_eq!(
        map(&item, &found).expect_err("ambiguous").reason().as_str(),
        "ambiguous"
    );
    let plain = r#"{"input":"a","input":"b"}"#;
    assert_eq!(
        map(plain, &found),
        Ok((None, Mapped::default())),
        "nothing of ours"
    );
    let escaped = twice.replacen("tph_", "\\u0074ph_", 1);
    assert_eq!(
        map(&escaped, &found)
            .expect_err("ambiguous")
            .reason()
            .as_str(),
        "ambiguous"
    );
    let lenient = format!("\u{feff}{}", twice.replacen(r#","input":"hi""#, "", 1));
    assert_eq!(map(&lenient, &found), Err(Refusal::Unreadable));
}

#[test]
fn bodies_without_hosted_items_are_left_alone() {
    let found = Found::default();
    for body in [
        r#"{"input":"text"}"#,
        r#"{"input":[{"type":"function_call","id":"fc","call_id":"c"}]}"#,
        r#"{"input":[{"type":"mcp_call","id":"mcp_1"}]}"#,
        r#"{"input":[{"id":"msg_1"}]}"#,
        "not json",
    ] {
        assert_eq!(map(body, &found), Ok((None, Mapped::default())));
    }
}
