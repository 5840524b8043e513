//! Config parsing and validation: defaults, every key, errors that name key and line.
use super::*;
use crate::core::lifecycle::Kind;

mod defaults;
mod mcp;

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
    assert!(e.contains("unknown key `interval` in [heartbeat]"), "{e}");
}

#[test]
fn toml_errors_are_said_once_and_fit_on_one_line_for_logs() {
    use std::error::Error;
    let e = Config::from_toml_str("[heartbeat]\ninterval_ms = \"10s\"\n").expect_err("invalid");
    // `{:#}` in main and anyhow's chains add the source: there must be none to repeat.
    assert!(e.source().is_none());
    let expected = "expected a whole number (0 or more)";
    assert_eq!(e.to_string().matches(expected).count(), 1, "{e}");
    assert_eq!(
        e.one_line(),
        "invalid config: line 2, column 15: invalid type: string \"10s\", expected a whole \
         number (0 or more) (in `interval_ms = \"10s\"`)"
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
    use crate::core::profiles::Profile;
    assert_eq!(c.events.profiles, [Profile::OpenAi, Profile::Tool]);
    assert_eq!(c.events.allowed_profiles, [Profile::Tool]);
    assert_eq!(c.tool_templates[0].count.as_deref(), Some("/results"));
    assert_eq!(
        c.classifier.classify_rule("web_search"),
        (Kind::WebSearch, Some(0))
    );
    assert_eq!(c.failure.kinds(), ["tool_error", "b_failed"]);
    assert_eq!(c.sanitizer.max_payload_bytes(), 100);
    assert_eq!(Config::default().events.profiles, [Profile::Hosted]);
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

const TOKEN: &str = "0123456789abcdef0123";

#[test]
fn telemetry_is_off_by_default_and_configured_from_the_file_or_the_environment() {
    let c = Config::from_toml_str("").expect("empty");
    assert_eq!(c.telemetry.traces_endpoint, None);
    assert_eq!(c.telemetry.service_name, "toolpulse");
    assert_eq!(c.telemetry.sample_ratio, 1.0);
    assert!(!c.telemetry.record_payloads);

    let env = |name: &str| match name {
        "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://env-collector:4318".to_string()),
        "OTEL_SERVICE_NAME" => Some("edge-proxy".to_string()),
        "LANGFUSE_AUTH" => Some("cGs6c2s=".to_string()),
        _ => None,
    };
    let c = Config::from_toml_with_env("", &env).expect("from the environment");
    let url = c.telemetry.traces_endpoint.expect("on").to_string();
    assert_eq!(url, "http://env-collector:4318/v1/traces");
    assert_eq!(c.telemetry.service_name, "edge-proxy");

    let file = r#"
[telemetry]
otlp_endpoint = "https://cloud.langfuse.com/api/public/otel"
service_name = "gateway-front"
sample_ratio = 0.25
record_payloads = true
[telemetry.headers]
Authorization = "Basic ${LANGFUSE_AUTH}"
"#;
    let c = Config::from_toml_with_env(file, &env).expect("valid");
    let t = &c.telemetry;
    assert_eq!(
        t.traces_endpoint
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some("https://cloud.langfuse.com/api/public/otel/v1/traces"),
        "the file wins over the environment"
    );
    assert_eq!(t.service_name, "gateway-front");
    assert_eq!(t.sample_ratio, 0.25);
    assert!(t.record_payloads);
    assert_eq!(
        t.headers,
        vec![("authorization".to_string(), "Basic cGs6c2s=".to_string())]
    );
    assert!(
        c.describe()
            .contains("telemetry: spans to https://cloud.langfuse.com")
    );
}

#[test]
fn telemetry_errors_name_key_and_line() {
    let e = error("[telemetry]\notlp_endpoint = \"collector:4318\"\n");
    assert!(
        e.contains("line 2: telemetry.otlp_endpoint: must start with http"),
        "{e}"
    );
    let e = error("[telemetry]\nsample_ratio = 1.5\n");
    assert!(
        e.contains("line 2: telemetry.sample_ratio: must be between"),
        "{e}"
    );
    let e = error("[telemetry.headers]\nx-key = \"${UNSET_SECRET}\"\n");
    assert!(
        e.contains("telemetry.headers.x-key: environment variable UNSET_SECRET is not set"),
        "{e}"
    );
    let e = error("[telemetry.headers]\n\"bad name\" = \"v\"\n");
    assert!(e.contains("not an HTTP header name"), "{e}");
    let e = error("[telemetry]\nendpoint = \"http://c:4318\"\n");
    assert!(e.contains("unknown key `endpoint`"), "{e}");
}

#[test]
fn type_errors_say_the_expected_type_in_words() {
    let serde = regex::Regex::new(r"\b([ui](8|16|32|64|size)|f64|sequence|a boolean)\b");
    let serde = serde.expect("valid");
    for (text, words) in [
        (
            "[limits]\nmax_open_calls = -1\n",
            "expected a whole number (0 or more)",
        ),
        (
            "[telemetry]\nsample_ratio = \"all\"\n",
            "expected a number such as 1.0",
        ),
        (
            "[proxy]\npreserve_host = \"yes\"\n",
            "expected true or false",
        ),
        (
            "[sanitize]\nredact_keys = \"x\"\n",
            "expected a list such as [\"a\", \"b\"]",
        ),
        (
            "[sanitize]\nmax_string_bytes = [1]\n",
            "invalid type: a list",
        ),
    ] {
        let e = Config::from_toml_str(text).expect_err("invalid");
        let (full, one) = (e.to_string(), e.one_line());
        for message in [&full, &one] {
            assert!(message.contains(words), "{text}: {message}");
            assert!(
                !serde.is_match(message),
                "serde's words in {text}: {message}"
            );
        }
    }
}

#[test]
fn a_file_s_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("toolpulse-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("named.toml");
    for text in [
        "[heartbeat]\ninterval_ms = \"10s\"\n",
        "[limits]\nmax_open_calls = 0\n",
    ] {
        std::fs::write(&path, text).expect("write");
        let e = Config::load(&path).expect_err("invalid");
        let named = format!("{}: invalid config", path.display());
        assert!(e.to_string().starts_with(&named), "{e}");
        let line = format!("{named}: line 2");
        assert!(e.one_line().starts_with(&line), "{}", e.one_line());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_listen_address_error_gives_examples() {
    assert_eq!(
        parse_listen("0.0.0.0:8183"),
        Ok(([0, 0, 0, 0], 8183).into())
    );
    let e = parse_listen("8183").expect_err("a port alone");
    assert!(
        e.contains("give 127.0.0.1:8183 (this machine only) or 0.0.0.0:8183"),
        "{e}"
    );
    let e = parse_listen("localhost:80").expect_err("a name");
    assert!(e.contains("such as 127.0.0.1:8080"), "{e}");
}

#[test]
fn an_upstream_ending_in_the_clients_path_is_warned_about() {
    let warning = |url: &str| upstream_path_warning(&parse_upstream(url).expect("valid"));
    for url in [
        "http://gw:9000",
        "http://gw:9000/",
        "https://gw/api",
        "http://gw/v10",
    ] {
        assert_eq!(warning(url), None, "{url}");
    }
    let text = warning("https://gw:9000/v1/").expect("a warning");
    assert!(
        text.contains("POST /v1/responses goes to https://gw:9000/v1/v1/responses"),
        "{text}"
    );
    assert!(text.ends_with("without it: https://gw:9000"), "{text}");
    let text = warning("http://gw/openai/v1").expect("a warning");
    assert!(text.ends_with("without it: http://gw/openai"), "{text}");
}

/// `config/toolpulse.toml` without its `[[tools]]` tables (examples, not defaults).
fn without_tool_rules(text: &str) -> String {
    let mut in_rule = false;
    let mut kept = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed == "[[tools]]" {
            in_rule = true;
            continue;
        }
        if in_rule && (trimmed.is_empty() || trimmed.starts_with('[')) {
            in_rule = false;
        }
        if !in_rule {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

#[test]
fn the_documented_config_shows_the_built_in_defaults() {
    let text = include_str!("../../config/toolpulse.toml");
    let rules_left_out = without_tool_rules(text);
    assert_ne!(rules_left_out, text, "the file has example rules");
    let no_env = |_: &str| None;
    let mut file = Config::from_toml_with_env(&rules_left_out, &no_env).expect("valid");
    let empty = Config::from_toml_with_env("", &no_env).expect("valid");
    // What `toolpulse check` shows, then every resolved value (the hosted key is random per
    // process unless configured).
    assert_eq!(file.describe(), empty.describe());
    assert!(!file.hosted.key_configured);
    file.hosted.key = empty.hosted.key.clone();
    assert_eq!(format!("{file:#?}"), format!("{empty:#?}"));
}

#[test]
fn a_reload_error_on_a_secret_line_does_not_quote_it() {
    let error = Config::from_toml_str("[progress]\ntoken = \"SUPERSECRET-0123456789\" x\n")
        .expect_err("a syntax error");
    let line = error.one_line();
    assert!(
        line.contains("line 2, column") && !line.contains("SUPERSECRET"),
        "{line}"
    );
    assert!(!error.to_string().contains("SUPERSECRET"), "{error}");
}

#[test]
fn an_unknown_key_is_named_with_its_section_and_the_nearest_known_key() {
    let e = error("[heartbeat]\nintervl_ms = 5\n");
    assert!(
        e.contains("line 2: unknown key `intervl_ms` in [heartbeat]; did you mean `interval_ms`?"),
        "{e}"
    );
    assert!(!e.contains("TOML parse error"), "{e}");
    let e = error("[heartbeat]\ninterval_ms = 5\n[nosuch]\nx = 1\n");
    assert!(e.contains("line 3: unknown section [nosuch]"), "{e}");
    let e = error("[[tools]]\nmatch = [\"a\"]\nkind = \"mcp\"\npatterns = 1\n");
    assert!(
        e.contains("line 4: unknown key `patterns` in [[tools]]"),
        "{e}"
    );
    assert!(e.contains("match, kind"), "the keys it has: {e}");
    let e = error("[proxy]\nupstream_url = \"http://x\"\n");
    assert!(e.contains("did you mean `upstream`?"), "{e}");
}
