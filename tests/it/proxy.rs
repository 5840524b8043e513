//! End to end over real sockets on 127.0.0.1: a scripted gateway, the proxy, a real HTTP client.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::gateway::{Action, Gateway, HANG_GUARD, Reply};
use common::*;
use http_body_util::BodyExt;
use tokio::sync::Notify;
use toolpulse::Config;

const REQUEST: &str = r#"{"model":"m","input":"hi","stream":true}"#;

fn fixture(name: &str) -> Vec<u8> {
    read(&fixtures_dir().join(name))
}

/// Index of the first block whose bytes contain `needle`.
fn position(blocks: &[Vec<u8>], needle: &str) -> usize {
    blocks
        .iter()
        .position(|b| String::from_utf8_lossy(b).contains(needle))
        .unwrap_or_else(|| panic!("no block contains {needle:?}"))
}

/// What the proxy should send for `input` under `config`, computed with the core directly.
fn expected(config: &Config, input: &[u8]) -> Vec<u8> {
    rewrite_whole(&Arc::new(config.clone()), input, Instant::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_progress_reaches_the_client_while_the_tool_runs() {
    let input = fixture("web_search.sse");
    let blocks = blocks(&input);
    let output_at = position(&blocks, "\"type\":\"function_call_output\"");
    let release = Arc::new(Notify::new());
    let gate = release.clone();
    let gw = Gateway::start(move |_| {
        let mut reply = Reply::sse(blocks[..output_at].to_vec());
        reply.actions.pop(); // not the end yet
        reply.actions.push(Action::Wait(gate.clone()));
        reply
            .actions
            .extend(blocks[output_at..].iter().cloned().map(Action::Chunk));
        reply.actions.push(Action::End);
        reply
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let client = http_client();
    let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["cache-control"], "no-cache");
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    assert!(response.headers().get("content-length").is_none());
    let mut body = response.into_body();
    // The gateway holds the tool's output until the client has seen the injected event.
    let mut seen = read_until(&mut body, "response.web_search_call.searching").await;
    assert!(!String::from_utf8_lossy(&seen).contains("function_call_output"));
    release.notify_one();
    seen.extend(read_all(&mut body).await);
    invariants::check(&input, &seen, usize::MAX).expect("invariants");
    assert_eq!(
        comparable(&seen),
        comparable(&expected(&Config::default(), &input))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_without_tools_and_non_sse_bodies_arrive_byte_identical() {
    let recording = fixture("recordings/openai/openai-web-search-tool.1.sse");
    let chunks: Vec<Vec<u8>> = recording.chunks(777).map(<[u8]>::to_vec).collect();
    let json = br#"{"id":"resp_1","object":"response","output":[]}"#.to_vec();
    let json_len = json.len();
    let gw = Gateway::start(move |req| {
        if req.target.ends_with("/json") {
            Reply {
                head: format!(
                    "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: {json_len}\r\nx-custom: kept\r\nconnection: x-hop\r\nx-hop: dropped"
                ),
                actions: vec![Action::Raw(json.clone())],
            }
        } else {
            Reply::sse(chunks.clone())
        }
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let client = http_client();
    let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
    let mut body = response.into_body();
    assert!(
        read_all(&mut body).await == recording,
        "no-tool stream changed"
    );

    let response = post(&client, format!("http://{proxy}/v1/json"), "{}").await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["x-custom"], "kept");
    assert_eq!(
        response.headers()["content-length"],
        json_len.to_string().as_str()
    );
    assert!(
        response.headers().get("x-hop").is_none(),
        "Connection-listed field"
    );
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    assert_eq!(
        &body[..],
        br#"{"id":"resp_1","object":"response","output":[]}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_forwarded_with_forwarding_headers() {
    let mut gw = Gateway::start(|_| Reply::sse(vec![b"data: {}\n\n".to_vec()])).await;
    let mut config = Config::default();
    config.proxy.preserve_host = false;
    let proxy = start_proxy(config, &format!("{}/prefix", gw.url())).await;
    let client = http_client();
    let request = http::Request::post(format!("http://{proxy}/v1/responses?x=1"))
        .header("authorization", "Bearer sk-test")
        .header("accept-encoding", "gzip, br")
        .header("connection", "keep-alive")
        .header("te", "trailers")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            REQUEST.as_bytes(),
        )))
        .expect("request");
    let response = client.request(request).await.expect("response");
    read_all(&mut response.into_body()).await;
    let seen = gw.requests.recv().await.expect("a request");
    assert_eq!(seen.method, "POST");
    assert_eq!(seen.target, "/prefix/v1/responses?x=1");
    assert_eq!(seen.body, REQUEST.as_bytes());
    assert_eq!(seen.header("host"), Some(gw.addr.to_string().as_str()));
    assert_eq!(seen.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(seen.header("accept-encoding"), Some("identity"));
    assert_eq!(seen.header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(seen.header("x-forwarded-proto"), Some("http"));
    assert_eq!(
        seen.header("x-forwarded-host"),
        Some(proxy.to_string().as_str())
    );
    assert_eq!(seen.header("te"), None);

    let mut config = Config::default();
    config.proxy.preserve_host = true;
    let proxy = start_proxy(config, &gw.url()).await;
    read_all(
        &mut post(&client, format!("http://{proxy}/v1/responses"), REQUEST)
            .await
            .into_body(),
    )
    .await;
    let seen = gw.requests.recv().await.expect("a request");
    assert_eq!(seen.header("host"), Some(proxy.to_string().as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnect_closes_the_upstream_connection() {
    let input = fixture("web_search.sse");
    let blocks = blocks(&input);
    let running = position(&blocks, "\"type\":\"function_call_output\"");
    let mut gw = Gateway::start(move |_| Reply {
        head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked"
            .into(),
        actions: blocks[..running]
            .iter()
            .cloned()
            .map(Action::Chunk)
            .chain([Action::WaitForClose(HANG_GUARD)])
            .collect(),
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let client = http_client();
    let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
    let mut body = response.into_body();
    read_until(&mut body, "web_search_call.searching").await;
    drop(body);
    drop(client);
    gw.saw_close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_break_closes_open_calls_and_ends_the_body() {
    let input = fixture("open_at_eof.sse");
    let config = config_for("open_at_eof.sse");
    let chunks = blocks(&input);
    let gw = Gateway::start(move |_| {
        let mut reply = Reply::sse(chunks.clone());
        reply.actions.pop();
        reply.actions.push(Action::Raw(b"5\r\nda".to_vec())); // a broken chunk, then gone
        reply.actions.push(Action::Close);
        reply
    })
    .await;
    let proxy = start_proxy(config, &gw.url()).await;
    let client = http_client();
    let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
    let out = read_all(&mut response.into_body()).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("response.mcp_call.in_progress"), "{text}");
    assert!(text.contains("response.mcp_call.failed"), "{text}");
    // hyper may hand on the two bytes of the broken chunk before its error: then they are the
    // unterminated tail, after the closing event.
    let sent = if out.ends_with(b"da") {
        [&input[..], b"da"].concat()
    } else {
        input
    };
    invariants::check(&sent, &out, usize::MAX).expect("invariants");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_upstream_is_502_and_silent_upstream_is_504() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let dead = closed.local_addr().expect("addr");
    drop(closed);
    let proxy = start_proxy(Config::default(), &format!("http://{dead}")).await;
    let client = http_client();
    let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
    assert_eq!(response.status(), 502);
    let json = json_body(response).await;
    assert_eq!(json["error"]["type"], "proxy_error");
    assert_eq!(json["error"]["code"], "upstream_unreachable");
    // The message names the address tried, so a wrong port or host shows at once.
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("connecting to {dead}")),
        "{message}"
    );

    let gw = Gateway::start(|_| Reply {
        head: String::new(),
        actions: vec![Action::WaitForClose(Duration::from_secs(10))],
    })
    .await;
    let mut config = Config::default();
    config.proxy.header_timeout = Duration::from_millis(200);
    let proxy = start_proxy(config, &gw.url()).await;
    let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
    assert_eq!(response.status(), 504);
    let json = json_body(response).await;
    assert_eq!(json["error"]["code"], "upstream_timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumed_stream_sends_exactly_what_the_client_missed() {
    let input = fixture("web_search.sse");
    let chunks = vec![input.clone()];
    let mut gw = Gateway::start(move |_| Reply::sse(chunks.clone())).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let client = http_client();
    let full = expected(&Config::default(), &input);
    let full_blocks = blocks(&full);
    for n in [0u64, 6, 7, 8, 12] {
        let url = format!("http://{proxy}/v1/responses/resp_1?stream=true&starting_after={n}");
        let response = client
            .get(url.parse().expect("uri"))
            .await
            .expect("response");
        let got = read_all(&mut response.into_body()).await;
        let seen = gw.requests.recv().await.expect("request");
        assert_eq!(seen.target, "/v1/responses/resp_1?stream=true");
        let want: Vec<u8> = full_blocks[n as usize + 1..].concat();
        assert_eq!(comparable(&got), comparable(&want), "starting_after={n}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_while_the_tool_runs_and_upstream_is_silent() {
    let input = fixture("web_search.sse");
    let blocks = blocks(&input);
    let output_at = position(&blocks, "\"type\":\"function_call_output\"");
    let gw = Gateway::start(move |_| {
        let mut actions: Vec<Action> = blocks[..output_at]
            .iter()
            .cloned()
            .map(Action::Chunk)
            .collect();
        actions.push(Action::Sleep(Duration::from_millis(450)));
        actions.extend(blocks[output_at..].iter().cloned().map(Action::Chunk));
        actions.push(Action::End);
        Reply {
            head: Reply::sse(vec![]).head,
            actions,
        }
    })
    .await;
    let config = Config {
        heartbeat: Duration::from_millis(100),
        ..Config::default()
    };
    let proxy = start_proxy(config, &gw.url()).await;
    let client = http_client();
    let out = read_all(
        &mut post(&client, format!("http://{proxy}/v1/responses"), REQUEST)
            .await
            .into_body(),
    )
    .await;
    let text = String::from_utf8_lossy(&out);
    let beats = text.matches(": keep-alive\n\n").count();
    assert!(
        beats >= 1,
        "no heartbeat in a 450 ms tool run at 100 ms: {text}"
    );
    let searching = text.find("web_search_call.searching").expect("searching");
    let completed = text.find("web_search_call.completed").expect("completed");
    let first_beat = text.find(": keep-alive").expect("beat");
    assert!(
        searching < first_beat && first_beat < completed,
        "heartbeats while the tool runs"
    );
    invariants::check(&input, &out, usize::MAX).expect("invariants");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_clients_and_compressed_streams() {
    let input = fixture("web_search.sse");
    let gzipped = b"\x1f\x8b\x08\x00fake-gzip-bytes".to_vec();
    let (plain, compressed) = (input.clone(), gzipped.clone());
    let gw = Gateway::start(move |req| {
        if req.target.ends_with("/gzip") {
            Reply {
                head: "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked".into(),
                actions: vec![Action::Chunk(compressed.clone()), Action::End],
            }
        } else {
            Reply::sse(vec![plain.clone()])
        }
    })
    .await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let h2: HttpClient =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build_http();
    let response = post(&h2, format!("http://{proxy}/v1/responses"), REQUEST).await;
    assert_eq!(response.version(), http::Version::HTTP_2);
    let out = read_all(&mut response.into_body()).await;
    assert_eq!(
        comparable(&out),
        comparable(&expected(&Config::default(), &input))
    );

    let response = post(&http_client(), format!("http://{proxy}/v1/gzip"), REQUEST).await;
    assert_eq!(response.headers()["content-encoding"], "gzip");
    assert_eq!(
        read_all(&mut response.into_body()).await,
        gzipped,
        "forwarded untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_streams_are_all_correct() {
    let input = fixture("parallel_reversed.sse");
    let config = config_for("parallel_reversed.sse");
    let chunks: Vec<Vec<u8>> = input.chunks(101).map(<[u8]>::to_vec).collect();
    let gw = Gateway::start(move |_| Reply::sse(chunks.clone())).await;
    let proxy = start_proxy(config.clone(), &gw.url()).await;
    let want = comparable(&expected(&config, &input));
    let client = http_client();
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let response = post(&client, format!("http://{proxy}/v1/responses"), REQUEST).await;
                read_all(&mut response.into_body()).await
            })
        })
        .collect();
    for task in tasks {
        let out = task.await.expect("task");
        invariants::check(&input, &out, usize::MAX).expect("invariants");
        assert_eq!(comparable(&out), want);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_picks_its_profiles_by_header() {
    let input = fixture("web_search.sse");
    let chunks = vec![input.clone()];
    let mut gw = Gateway::start(move |_| Reply::sse(chunks.clone())).await;
    let mut config = Config::default();
    config.events.allowed_profiles = vec![
        toolpulse::core::profiles::Profile::OpenAi,
        toolpulse::core::profiles::Profile::Tool,
        toolpulse::core::profiles::Profile::Stages,
    ];
    let proxy = start_proxy(config, &gw.url()).await;
    let client = http_client();
    let request = |profiles: &str| {
        http::Request::post(format!("http://{proxy}/v1/responses"))
            .header("x-toolpulse-profiles", profiles)
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                REQUEST.as_bytes(),
            )))
            .expect("request")
    };

    let response = client
        .request(request("tool, stages"))
        .await
        .expect("response");
    let out = read_all(&mut response.into_body()).await;
    let seen = gw.requests.recv().await.expect("forwarded");
    assert_eq!(
        seen.header("x-toolpulse-profiles"),
        None,
        "the header is not forwarded"
    );
    invariants::check(&input, &out, usize::MAX).expect("invariants");
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains(r#""type":"tool_start""#) && text.contains(r#""type":"tool_end""#));
    assert!(text.contains(r#""type":"tool.stage""#));
    assert!(
        !text.contains("web_search_call"),
        "only the picked profiles: {text}"
    );

    // Companions combine with a payload profile, one per call whatever the mix.
    let response = client
        .request(request("openai,tool"))
        .await
        .expect("response");
    let out = read_all(&mut response.into_body()).await;
    gw.requests.recv().await.expect("forwarded");
    invariants::check(&input, &out, usize::MAX).expect("invariants");
    let text = String::from_utf8_lossy(&out);
    assert_eq!(
        text.matches(r#""type":"web_search_call","id":"tp_"#)
            .count(),
        2
    );
    assert!(text.contains(r#""type":"tool_start""#));

    for bad in ["tool_call", "robot", "", "openai,openai-inline"] {
        let response = client.request(request(bad)).await.expect("response");
        assert_eq!(response.status(), 400, "{bad:?}");
        let json = json_body(response).await;
        assert_eq!(json["error"]["code"], "invalid_profiles");
    }
    assert!(
        gw.requests.try_recv().is_err(),
        "refused requests are not forwarded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_companions_never_reach_the_gateway() {
    // A client replays the first response's output as input: inline (openai-agents'
    // `to_input_list()`) and as `item_reference`s (the AI SDK with `store`), with a length and
    // chunked. The gateway gets everything else, byte for byte.
    const REPLAY: &str = r#"{"model":"m","input":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"web_search","arguments":"{}"},{"type":"web_search_call","id":"tp_c1","status":"completed","action":{"type":"search"}},{"type":"item_reference","id":"tp_c2"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"stream":true}"#;
    const FORWARDED: &str = r#"{"model":"m","input":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"web_search","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"stream":true}"#;
    let mut gw = Gateway::start(|_| Reply::sse(vec![b"data: {}\n\n".to_vec()])).await;
    let proxy = start_proxy(Config::default(), &gw.url()).await;
    let client = http_client();
    read_all(
        &mut post(&client, format!("http://{proxy}/v1/responses"), REPLAY)
            .await
            .into_body(),
    )
    .await;
    let seen = gw.requests.recv().await.expect("a request");
    assert_eq!(String::from_utf8_lossy(&seen.body), FORWARDED);
    assert_eq!(
        seen.header("content-length"),
        Some(FORWARDED.len().to_string().as_str())
    );

    let (half, rest) = REPLAY.split_at(100);
    let frames = [half, rest].map(|part| {
        Ok::<_, std::convert::Infallible>(http_body::Frame::data(bytes::Bytes::from(part)))
    });
    let chunked = http_body_util::StreamBody::new(futures::stream::iter(frames));
    let request = http::Request::post(format!("http://{proxy}/v1/responses"))
        .header("content-type", "application/json")
        .body(chunked.boxed())
        .expect("request");
    let chunked_client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let response = chunked_client.request(request).await.expect("response");
    read_all(&mut response.into_body()).await;
    let seen = gw.requests.recv().await.expect("a request");
    assert_eq!(String::from_utf8_lossy(&seen.body), FORWARDED);

    // A body over the read limit goes on as it is.
    let pad = "x".repeat(toolpulse::proxy::request_body::MAX_READ_BODY_BYTES);
    let big: &'static str = REPLAY
        .replacen("{", &format!("{{\"pad\":\"{pad}\","), 1)
        .leak();
    read_all(
        &mut post(&client, format!("http://{proxy}/v1/responses"), big)
            .await
            .into_body(),
    )
    .await;
    let seen = gw.requests.recv().await.expect("a request");
    assert!(seen.body == big.as_bytes(), "forwarded unchanged");

    // Other paths and bodies stream through untouched.
    read_all(
        &mut post(&client, format!("http://{proxy}/v1/other"), REPLAY)
            .await
            .into_body(),
    )
    .await;
    let seen = gw.requests.recv().await.expect("a request");
    assert_eq!(String::from_utf8_lossy(&seen.body), REPLAY);
}
