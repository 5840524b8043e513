//! Config parsing and validation: defaults, every key, errors that name key and line.
use super::*;
use crate::lifecycle::Kind;

fn error(text: &str) -> String {
    Config::from_toml_str(text)
        .expect_err("invalid")
        .to_string()
}

#[test]
fn empty_file_gives_defaults() {
    let c = Config::from_toml_str("").expect("valid");
    assert_eq!(c.heartbeat, Duration::from_secs(10));
    assert_eq!(c.limits, Config::default().limits);
    assert_eq!(c.classifier.classify("web_search"), Kind::WebSearch);
}

#[test]
fn listeners_default_to_loopback() {
    // Metrics and readiness must not be exposed unless asked for; the proxy neither.
    let c = Config::default();
    assert!(c.admin.listen.ip().is_loopback(), "{}", c.admin.listen);
    assert!(c.proxy.listen.ip().is_loopback(), "{}", c.proxy.listen);
}

#[test]
fn full_file() {
    let c = Config::from_toml_str(
        r#"
        [[tools]]
        match = ["github_*", "jira_*"]
        kind = "mcp"
        [failure]
        output_patterns = ["^no executor found for tool "]
        [heartbeat]
        interval_ms = 0
        [limits]
        max_event_bytes = 4096
        [proxy]
        listen = "0.0.0.0:9000"
        upstream = "https://gateway.internal:8443/v1"
        preserve_host = true
        "#,
    )
    .expect("valid");
    assert_eq!(c.classifier.classify("jira_issue"), Kind::Mcp);
    assert_eq!(c.failure.patterns().len(), 1);
    assert_eq!(c.heartbeat, Duration::ZERO);
    assert_eq!(c.limits.max_event_bytes, 4096);
    assert_eq!(c.proxy.listen.port(), 9000);
    let upstream = c.proxy.upstream.expect("set");
    assert_eq!(upstream.path(), "/v1");
    assert!(c.proxy.preserve_host);
}

#[test]
fn errors_name_key_and_line() {
    let e = error("[[tools]]\nmatch = [\"ok\", \"a[\"]\nkind = \"mcp\"\n");
    assert!(e.contains("line 2: tools[0].match[1]"), "{e}");
    let e = error("[failure]\noutput_patterns = [\n  \"(\"]\n");
    assert!(e.contains("line 3: failure.output_patterns[0]"), "{e}");
    let e = error("[limits]\nmax_event_bytes = 10\n");
    assert!(e.contains("line 2: limits.max_event_bytes"), "{e}");
    let e = error("[[tools]]\nmatch = []\nkind = \"mcp\"\n");
    assert!(e.contains("tools[0].match: must list"), "{e}");
    let e = error("[[tools]]\nmatch = [\"x\"]\nkind = \"robot\"\n");
    assert!(e.contains("line 3") && e.contains("unknown variant"), "{e}");
    let e = error("[proxy]\nupstream = \"ftp://x\"\n");
    assert!(
        e.contains("line 2: proxy.upstream: must start with http"),
        "{e}"
    );
    let e = error("[proxy]\nlisten = \"localhost\"\n");
    assert!(e.contains("line 2: proxy.listen"), "{e}");
    let e = error("[heartbeat]\ninterval = 5\n");
    assert!(e.contains("unknown field `interval`"), "{e}");
}

#[test]
fn toml_errors_are_said_once_and_fit_on_one_line_for_logs() {
    use std::error::Error;
    let e = Config::from_toml_str("[heartbeat]\ninterval_ms = \"10s\"\n").expect_err("invalid");
    // `{:#}` in main and anyhow's chains add the source: there must be none to repeat.
    assert!(e.source().is_none());
    assert_eq!(e.to_string().matches("expected u64").count(), 1, "{e}");
    assert_eq!(
        e.one_line(),
        "invalid config: line 2, column 15: invalid type: string \"10s\", expected u64 \
         (in `interval_ms = \"10s\"`)"
    );
    let e = Config::from_toml_str("[heartbeat\n").expect_err("invalid");
    assert!(
        e.one_line()
            .starts_with("invalid config: line 1, column 11: "),
        "{}",
        e.one_line()
    );
    // A regex error is several lines of its own.
    let e = Config::from_toml_str("[failure]\noutput_patterns = [\"(\"]\n").expect_err("invalid");
    assert!(e.to_string().contains('\n'), "{e}");
    let one = e.one_line();
    assert!(
        !one.contains('\n') && one.contains("line 2: failure.output_patterns[0]"),
        "{one}"
    );
}

#[test]
fn profiles_templates_kinds_and_sanitizing() {
    let c = Config::from_toml_str(
        r#"
        [[tools]]
        match = ["web_search"]
        kind = "web_search"
        display = "Searching for {query}"
        summary = "Found {count}"
        count = "/results"
        [failure]
        output_patterns = ["^a", "^b"]
        [failure.kinds]
        "^b" = "b_failed"
        [events]
        profiles = ["openai", "tool"]
        allowed_profiles = ["tool"]
        [sanitize]
        redact_keys = ["*secret*"]
        max_string_bytes = 10
        max_payload_bytes = 100
        "#,
    )
    .expect("valid");
    use crate::profiles::Profile;
    assert_eq!(c.events.profiles, [Profile::OpenAi, Profile::Tool]);
    assert_eq!(c.events.allowed_profiles, [Profile::Tool]);
    assert_eq!(c.tool_templates[0].count.as_deref(), Some("/results"));
    assert_eq!(
        c.classifier.classify_rule("web_search"),
        (Kind::WebSearch, Some(0))
    );
    assert_eq!(c.failure.kinds(), ["tool_error", "b_failed"]);
    assert_eq!(c.sanitizer.max_payload_bytes(), 100);
    assert_eq!(Config::default().events.profiles, [Profile::OpenAi]);
}

#[test]
fn profile_related_errors() {
    let e = error("[events]\nprofiles = [\"robot\"]\n");
    assert!(e.contains("unknown variant `robot`"), "{e}");
    let e = error("[[tools]]\nmatch = [\"x\"]\nkind = \"mcp\"\ncount = \"results\"\n");
    assert!(
        e.contains("line 4: tools[0].count: must be a JSON pointer"),
        "{e}"
    );
    let e = error("[failure]\noutput_patterns = [\"^a\"]\n[failure.kinds]\n\"^b\" = \"x\"\n");
    assert!(
        e.contains("failure.kinds: \"^b\" is not one of failure.output_patterns"),
        "{e}"
    );
    let e = error("[sanitize]\nredact_keys = [\"a[\"]\n");
    assert!(e.contains("sanitize.redact_keys[0]"), "{e}");
}
