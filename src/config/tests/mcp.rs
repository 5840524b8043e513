//! The `[mcp]` and `[progress]` sections: the MCP listener and its servers, tokens, the
//! progress bus.
use super::*;

#[test]
fn mcp_is_off_unless_configured() {
    let c = Config::from_toml_str("").expect("valid");
    assert_eq!(c.mcp, None);
    assert_eq!(c.progress, ProgressConfig::default());
    assert_eq!(c.progress.bind_window, Duration::from_secs(5));
    assert_eq!(c.progress.min_interval, Duration::from_millis(100));
    let c = Config::from_toml_str("[mcp]\nlisten = \"127.0.0.1:9999\"\n").expect("valid");
    let mcp = c.mcp.expect("listen alone turns it on");
    assert!(mcp.servers.is_empty());
    assert_eq!(mcp.listen.port(), 9999);
    assert_eq!(mcp.max_connections, 1024);
    let c = Config::from_toml_str("[mcp]\nlisten = \"127.0.0.1:1\"\nmax_connections = 3\n")
        .expect("valid");
    assert_eq!(c.mcp.map(|m| m.max_connections), Some(3));
    let e = error("[mcp]\nmax_connections = 0\n");
    assert!(e.to_string().contains("mcp.max_connections"), "{e}");
}

#[test]
fn mcp_servers_and_progress() {
    let c = Config::from_toml_str(&format!(
        r#"
        [[mcp.servers]]
        name = "github"
        upstream = "http://github-mcp:3000/mcp"
        call_name = "github_{{tool}}"
        [[mcp.servers]]
        name = "search.v2"
        upstream = "https://search:8443/"
        [progress]
        token = "{TOKEN}"
        bind_window_ms = 250
        min_interval_ms = 0
        "#
    ))
    .expect("valid");
    let mcp = c.mcp.expect("servers turn it on");
    assert_eq!(mcp.listen, "127.0.0.1:8090".parse().expect("addr"));
    let github = mcp.server("github").expect("configured");
    assert_eq!(github.upstream.path(), "/mcp");
    assert_eq!(github.function_name("create_issue"), "github_create_issue");
    let search = mcp.server("search.v2").expect("configured");
    assert_eq!(search.function_name("find"), "find", "default call_name");
    assert!(mcp.server("nope").is_none());
    let token = c.progress.token.expect("set");
    assert!(token.matches(TOKEN.as_bytes()));
    assert!(!token.matches(b"0123456789abcdef0124"));
    assert!(!token.matches(b"0123"));
    assert_eq!(format!("{token:?}"), "[redacted]", "never printed");
    assert_eq!(c.progress.bind_window, Duration::from_millis(250));
    assert_eq!(c.progress.min_interval, Duration::ZERO);
}

#[test]
fn mcp_beyond_loopback_needs_a_token() {
    let file = "[mcp]\nlisten = \"0.0.0.0:8090\"\n\n[[mcp.servers]]\nname = \"a\"\nupstream = \"http://a:1/mcp\"\n";
    let e = error(file);
    assert!(e.contains("line 2: mcp.listen"), "{e}");
    assert!(e.contains("[progress] token"), "{e}");
    // From the file or from the environment.
    let with_token = format!("{file}[progress]\ntoken = \"{TOKEN}\"\n");
    assert!(Config::from_toml_str(&with_token).is_ok());
    let c = Config::from_toml_with_token(file, Some(TOKEN)).expect("token from env");
    assert!(c.progress.token.expect("set").matches(TOKEN.as_bytes()));
    // Loopback needs none; IPv6 loopback too.
    assert!(Config::from_toml_str("[mcp]\nlisten = \"[::1]:8090\"\n").is_ok());
    // No listener, no rule.
    assert!(Config::from_toml_str("[progress]\nbind_window_ms = 1\n").is_ok());
}

#[test]
fn mcp_errors_name_key_and_line() {
    let server = |body: &str| format!("[[mcp.servers]]\n{body}");
    let e = error(&server("name = \"a/b\"\nupstream = \"http://a:1\"\n"));
    assert!(
        e.contains("line 2: mcp.servers[0].name: must be a path segment"),
        "{e}"
    );
    let e = error(&server("name = \"..\"\nupstream = \"http://a:1\"\n"));
    assert!(e.contains("mcp.servers[0].name"), "{e}");
    let e = error(&server("name = \"a\"\nupstream = \"ftp://a\"\n"));
    assert!(
        e.contains("line 3: mcp.servers[0].upstream: must start with http"),
        "{e}"
    );
    let e = error(&server(
        "name = \"a\"\nupstream = \"http://a:1\"\ncall_name = \"github_\"\n",
    ));
    assert!(
        e.contains("line 4: mcp.servers[0].call_name: must contain {tool}"),
        "{e}"
    );
    let twice = format!(
        "{}{}",
        server("name = \"a\"\nupstream = \"http://a:1\"\n"),
        server("name = \"a\"\nupstream = \"http://b:1\"\n")
    );
    let e = error(&twice);
    assert!(
        e.contains("line 5: mcp.servers[1].name: \"a\" is already"),
        "{e}"
    );
    let e = error(&server(
        "name = \"a\"\nupstream = \"http://a:1\"\nurl = \"x\"\n",
    ));
    assert!(e.contains("unknown key `url` in [[mcp.servers]]"), "{e}");
    let e = error("[mcp]\nlisten = \"localhost:8090\"\n");
    assert!(e.contains("line 2: mcp.listen: not an address"), "{e}");
    let e = error("[progress]\ntoken = \"short\"\n");
    assert!(
        e.contains("line 2: progress.token: must be at least 16"),
        "{e}"
    );
    let e = error("[progress]\ntoken = \"has a space in it, sadly\"\n");
    assert!(e.contains("progress.token: must be visible ASCII"), "{e}");
    let e = Config::from_toml_with_token("", Some("short"))
        .expect_err("invalid")
        .to_string();
    assert!(
        e.contains("TOOLPULSE_PROGRESS_TOKEN: must be at least 16"),
        "{e}"
    );
}

#[test]
fn the_progress_bus() {
    let mcp = "[mcp]\nlisten = \"127.0.0.1:8090\"\n";
    let file =
        format!("{mcp}[progress]\nbus = \"redis://:pw@cache:6379/1\"\nbus_prefix = \"tp-eu\"\n");
    let c = Config::from_toml_str(&file).expect("valid");
    let bus = c.progress.bus.as_ref().expect("a bus");
    assert_eq!(
        (bus.url.expose(), bus.prefix.as_str()),
        ("redis://:pw@cache:6379/1", "tp-eu")
    );
    let described = c.describe();
    assert!(
        described.contains("progress: bus redis://cache:6379/1 (keys and channels tp-eu:*)"),
        "{described}"
    );
    assert!(!described.contains("pw"), "{described}");
    assert!(
        Config::from_toml_str(mcp)
            .expect("valid")
            .progress
            .bus
            .is_none(),
        "off by default"
    );

    // The environment's URL (with its password) wins; the prefix defaults.
    let env =
        |name: &str| (name == REDIS_URL_ENV).then(|| "rediss://:secret@managed:6380/0".to_string());
    let c = Config::from_toml_with_env(&file.replace("bus_prefix = \"tp-eu\"\n", ""), &env)
        .expect("valid");
    let bus = c.progress.bus.expect("a bus");
    assert_eq!(
        (bus.url.expose(), bus.prefix.as_str()),
        ("rediss://:secret@managed:6380/0", "toolpulse")
    );
    // Without the MCP listener the bus still keeps hosted pairs for every replica.
    let c = Config::from_toml_str("[progress]\nbus = \"redis://cache:6379\"\n").expect("valid");
    assert!(c.progress.bus.is_some());
    assert!(
        Config::from_toml_with_env("", &env)
            .expect("valid")
            .progress
            .bus
            .is_some()
    );

    let e = error(&format!("{mcp}[progress]\nbus = \"http://cache:6379\"\n"));
    assert!(
        e.contains("line 4: progress.bus: must start with redis://"),
        "{e}"
    );
    let e = error(&format!(
        "{mcp}[progress]\nbus = \"redis://c\"\nbus_prefix = \"a b\"\n"
    ));
    assert!(e.contains("line 5: progress.bus_prefix"), "{e}");
    let bad = |name: &str| (name == REDIS_URL_ENV).then(|| "cache:6379".to_string());
    let e = Config::from_toml_with_env(mcp, &bad)
        .expect_err("invalid")
        .to_string();
    assert!(
        e.contains("TOOLPULSE_REDIS_URL: must start with redis://"),
        "{e}"
    );
}
