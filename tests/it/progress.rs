//! Out-of-band progress end to end: a real proxy with the in-process registry, a scripted
//! gateway that holds a tool call open, a real client; reports handed to the registry reach
//! the client's stream between the call's start and its end, and the gateway gets a
//! `traceparent` to correlate by.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::gateway::{Gateway, blocks_around_output, held, held_reply};
use common::*;
use serde_json::json;
use tokio::sync::Notify;
use toolpulse::Config;
use toolpulse::features::progress::local::LocalHub;
use toolpulse::features::progress::{
    Delivery, McpToolCall, Progress, ProgressHub, Target, TraceId,
};
use toolpulse::proxy::Proxy;

const REQUEST: &str = r#"{"model":"m","input":"hi","stream":true}"#;

async fn proxy_with_hub(upstream: &str, hub: Arc<LocalHub>) -> std::net::SocketAddr {
    let mut config = Config::default();
    config.proxy.upstream = Some(upstream.parse().expect("upstream URL"));
    let proxy = Proxy::new(Arc::new(config))
        .expect("proxy")
        .with_progress(hub);
    serve_proxy(Arc::new(proxy)).await
}

/// A streamed request picking `profiles`; its body, once the stream shows `needle`.
async fn stream_until(
    proxy: std::net::SocketAddr,
    profiles: &str,
    needle: &str,
) -> (hyper::body::Incoming, Vec<u8>) {
    let request = http::Request::post(format!("http://{proxy}/v1/responses"))
        .header("x-toolpulse-profiles", profiles)
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            REQUEST.as_bytes(),
        )))
        .expect("request");
    let response = http_client().request(request).await.expect("response");
    let mut body = response.into_body();
    let seen = read_until(&mut body, needle).await;
    (body, seen)
}

fn report(n: f64) -> Progress {
    Progress {
        progress: n,
        total: Some(3.0),
        message: Some(format!("step {n}/3\nnext")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_stream_of_its_call_between_start_and_end() {
    let release = Arc::new(Notify::new());
    let mut gw = Gateway::start(held_reply("web_search.sse", release.clone())).await;
    let hub = LocalHub::new(Duration::from_secs(5));
    let proxy = proxy_with_hub(&gw.url(), hub.clone()).await;
    let (mut body, mut seen) =
        stream_until(proxy, "openai,progress,tool", "web_search_call.searching").await;

    // The gateway got a traceparent (the client sent none): an MCP call carrying it binds.
    let recorded = gw.requests.recv().await.expect("forwarded");
    let traceparent = recorded.header("traceparent").expect("a traceparent");
    let trace_id = TraceId::from_traceparent(traceparent).expect("valid");
    let mcp = McpToolCall {
        server: "search".into(),
        function_name: "web_search".into(),
        arguments: json!({"query": "elsewhere"}),
        trace_id: Some(trace_id),
    };
    let binding = hub.bind(mcp);
    assert_eq!(hub.progress(binding, report(1.0)), Delivery::Delivered);
    seen.extend(read_until(&mut body, "step 1/3").await);
    let by_id = hub.post_now(Target::CallId("call_1".into()), report(2.0));
    assert_eq!(by_id, Delivery::Delivered);

    release.notify_one();
    seen.extend(read_all(&mut body).await);
    let text = String::from_utf8_lossy(&seen);
    let progress = text.find(r#""type":"response.web_search_call.progress""#);
    let last = text.find("step 2/3");
    let end = text.find(r#""type":"response.web_search_call.completed""#);
    assert!(progress.is_some() && last.is_some(), "{text}");
    assert!(last < end, "the last report before the end: {text}");
    assert!(text.contains(r#""type":"tool_progress""#));
    assert!(
        text.contains(r#"step 1/3\nnext"#),
        "the message stays in one data line"
    );
    let input = read(&fixtures_dir().join("web_search.sse"));
    invariants::check(&input, &seen, usize::MAX).expect("invariants");

    // The call is over: later reports are late.
    assert_eq!(hub.progress(binding, report(3.0)), Delivery::Late);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_reports_is_paced_and_never_waits_for_the_client() {
    let release = Arc::new(Notify::new());
    let mut gw = Gateway::start(held_reply("web_search.sse", release.clone())).await;
    let hub = LocalHub::new(Duration::from_secs(5));
    let proxy = proxy_with_hub(&gw.url(), hub.clone()).await;
    let (mut body, mut seen) = stream_until(proxy, "tool", "tool_start").await;
    gw.requests.recv().await.expect("forwarded");

    // 100,000 reports while the client reads nothing: the sender never blocks.
    const REPORTS: u32 = 100_000;
    let started = std::time::Instant::now();
    for n in 1..=REPORTS {
        let delivery = hub.post_now(Target::CallId("call_1".into()), report(f64::from(n)));
        assert_eq!(delivery, Delivery::Delivered);
        if n.is_multiple_of(10_000) {
            tokio::task::yield_now().await;
        }
    }
    let flood = started.elapsed();
    release.notify_one();
    seen.extend(read_all(&mut body).await);
    let text = String::from_utf8_lossy(&seen);
    let received = text.matches(r#""type":"tool_progress""#).count();
    // At most one per 100 ms while the flood lasted, plus the first and the last.
    let allowed = 2 + (flood.as_millis() / 100) as usize + 1;
    assert!(
        (1..=allowed).contains(&received),
        "{received} progress events for a {flood:?} flood"
    );
    let last = format!(r#""progress":{REPORTS},"#);
    let (last_at, end_at) = (text.find(&last), text.find(r#""type":"tool_end""#));
    assert!(
        last_at.is_some() && last_at < end_at,
        "the last report, before the end"
    );
}

/// Two client streams continuing the same trace (`traceparent` is the client's) and running the
/// same tool: a report reaches the one whose arguments it names, and neither when its
/// arguments single out none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_trace_is_told_apart_by_the_arguments_or_reaches_nobody() {
    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let release = Arc::new(Notify::new());
    let (before, after) = blocks_around_output("web_search.sse");
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let gw = Gateway::start({
        let release = release.clone();
        move |_| {
            // The second stream searches for something else.
            let second = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1;
            let edit = |blocks: &[Vec<u8>]| -> Vec<Vec<u8>> {
                let edit = |b: &Vec<u8>| match second {
                    true => String::from_utf8_lossy(b)
                        .replace("rust sse", "tokio")
                        .into_bytes(),
                    false => b.clone(),
                };
                blocks.iter().map(edit).collect()
            };
            held(&edit(&before), &release, &edit(&after))
        }
    })
    .await;
    let hub = LocalHub::new(Duration::from_secs(5));
    let proxy = proxy_with_hub(&gw.url(), hub.clone()).await;
    let open = |proxy| async move {
        let request = http::Request::post(format!("http://{proxy}/v1/responses"))
            .header("x-toolpulse-profiles", "openai,progress")
            .header("traceparent", TRACEPARENT)
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                REQUEST.as_bytes(),
            )))
            .expect("request");
        let mut body = http_client()
            .request(request)
            .await
            .expect("response")
            .into_body();
        let seen = read_until(&mut body, "web_search_call.searching").await;
        (body, seen)
    };
    let (mut alice, mut alice_seen) = open(proxy).await;
    let (mut bob, mut bob_seen) = open(proxy).await;
    let trace_id = TraceId::from_traceparent(TRACEPARENT);
    let call = |query: &str| McpToolCall {
        server: "search".into(),
        function_name: "web_search".into(),
        arguments: json!({ "query": query }),
        trace_id,
    };
    let neither = hub.bind(call("elsewhere"));
    assert_eq!(hub.progress(neither, report(1.0)), Delivery::Ambiguous);
    let bobs = hub.bind(call("tokio"));
    assert_eq!(hub.progress(bobs, report(2.0)), Delivery::Delivered);
    bob_seen.extend(read_until(&mut bob, "step 2/3").await);

    let releaser = tokio::spawn(async move {
        loop {
            release.notify_waiters();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    alice_seen.extend(read_all(&mut alice).await);
    bob_seen.extend(read_all(&mut bob).await);
    releaser.abort();
    let (alice, bob) = (
        String::from_utf8_lossy(&alice_seen),
        String::from_utf8_lossy(&bob_seen),
    );
    assert!(!alice.contains("step "), "nothing of bob's: {alice}");
    assert!(
        bob.contains("step 2/3") && !bob.contains("step 1/3"),
        "{bob}"
    );
}
