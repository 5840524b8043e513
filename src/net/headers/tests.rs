//! The heads the proxy forwards: hop-by-hop fields, `X-Forwarded-*` and `Host`, the upstream
//! URI, resumption, event streams.

use super::*;

#[test]
fn hop_by_hop_and_connection_listed_fields_go() {
    let mut h = HeaderMap::new();
    h.insert(
        "connection",
        HeaderValue::from_static("keep-alive, x-secret-hop"),
    );
    h.insert("x-secret-hop", HeaderValue::from_static("1"));
    h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
    h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
    h.insert("te", HeaderValue::from_static("trailers"));
    h.insert("authorization", HeaderValue::from_static("Bearer k"));
    remove_hop_by_hop(&mut h);
    assert_eq!(h.len(), 1);
    assert!(h.contains_key("authorization"));
}

#[test]
fn uri_join_with_prefix() {
    let up: Uri = "https://gw:8443/api/".parse().expect("uri");
    let uri = upstream_uri(&up, "/v1/responses", Some("a=1")).expect("uri");
    assert_eq!(uri.to_string(), "https://gw:8443/api/v1/responses?a=1");
    let up: Uri = "http://gw".parse().expect("uri");
    assert_eq!(
        upstream_uri(&up, "/x", None).expect("uri").to_string(),
        "http://gw/x"
    );
}

#[test]
fn resumption_only_for_streamed_response_gets() {
    let get = Method::GET;
    assert_eq!(
        resumption(
            &get,
            "/v1/responses/resp_1",
            Some("stream=true&starting_after=7&x=y")
        ),
        Some((7, "stream=true&x=y".into()))
    );
    assert_eq!(
        resumption(&get, "/v1/responses/resp_1", Some("starting_after=7")),
        None
    );
    assert_eq!(
        resumption(&get, "/v1/responses", Some("stream=true&starting_after=7")),
        None
    );
    assert_eq!(
        resumption(
            &Method::POST,
            "/v1/responses/r",
            Some("stream=true&starting_after=1")
        ),
        None
    );
    assert_eq!(
        resumption(
            &get,
            "/v1/responses/r",
            Some("stream=true&starting_after=x")
        ),
        None
    );
}

#[test]
fn forwarded_fields_and_host() {
    let req = http::Request::post("/v1/responses")
        .header("host", "proxy.local:8080")
        .header("x-forwarded-for", "10.0.0.1")
        .header("accept-encoding", "gzip")
        .body(())
        .expect("request");
    let (mut head, ()) = req.into_parts();
    let uri: Uri = "http://gw:9000/v1/responses".parse().expect("uri");
    let peer: SocketAddr = "127.0.0.1:5555".parse().expect("addr");
    prepare_request(&mut head, uri, peer, false);
    assert_eq!(head.headers["host"], "gw:9000");
    assert_eq!(head.headers["x-forwarded-for"], "10.0.0.1, 127.0.0.1");
    assert_eq!(head.headers["x-forwarded-host"], "proxy.local:8080");
    assert_eq!(head.headers["x-forwarded-proto"], "http");
    assert_eq!(head.headers["accept-encoding"], "identity");
}

#[test]
fn a_preserved_host_or_else_the_upstreams() {
    let uri: Uri = "http://gw:9000/v1/responses".parse().expect("uri");
    let peer: SocketAddr = "127.0.0.1:5555".parse().expect("addr");
    let with_host = http::Request::post("/v1/responses").header("host", "proxy.local");
    let (mut head, ()) = with_host.body(()).expect("request").into_parts();
    prepare_request(&mut head, uri.clone(), peer, true);
    assert_eq!(head.headers["host"], "proxy.local");
    // An HTTP/1.0 client may send none: the upstream's, as HTTP/1.1 needs one.
    let without = http::Request::post("/v1/responses")
        .body(())
        .expect("request");
    let (mut head, ()) = without.into_parts();
    prepare_request(&mut head, uri, peer, true);
    assert_eq!(head.headers["host"], "gw:9000");
}

#[test]
fn event_stream_detection() {
    let mut h = HeaderMap::new();
    h.insert(
        "content-type",
        HeaderValue::from_static("Text/Event-Stream; charset=utf-8"),
    );
    assert!(is_plain_event_stream(&h));
    h.insert("content-encoding", HeaderValue::from_static("gzip"));
    assert!(!is_plain_event_stream(&h));
    assert!(is_event_stream(&h));
    h.insert("content-type", HeaderValue::from_static("application/json"));
    assert!(!is_event_stream(&h));
}

/// A head's fields, in the order they are written.
fn fields(headers: &HeaderMap) -> Vec<(&str, &str)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.to_str().expect("ASCII")))
        .collect()
}

/// What each removal does to the order is pinned: a removal moves the last field into the
/// place it frees, so which fields are removed, and when, decide the order the upstream and
/// the client see.
#[test]
fn removing_and_adding_fields_keeps_their_order() {
    let mut response = HeaderMap::new();
    for (name, value) in [
        ("content-type", "text/event-stream"),
        ("transfer-encoding", "chunked"),
        ("date", "d"),
        ("cache-control", "no-cache"),
    ] {
        response.insert(name, HeaderValue::from_static(value));
    }
    remove_hop_by_hop(&mut response);
    let kept = [
        ("content-type", "text/event-stream"),
        ("cache-control", "no-cache"),
        ("date", "d"),
    ];
    assert_eq!(fields(&response), kept);

    let prepared = |method, target: &str, sent: &[(&str, &'static str)], peer: &str, keep| {
        let mut request = http::Request::builder().method(method).uri(target);
        for (name, value) in sent {
            request = request.header(*name, HeaderValue::from_static(value));
        }
        let (mut head, ()) = request.body(()).expect("request").into_parts();
        let uri: Uri = format!("http://gw:9000{target}").parse().expect("uri");
        let peer: SocketAddr = peer.parse().expect("addr");
        prepare_request(&mut head, uri, peer, keep);
        head.headers
    };
    let sent = [
        ("host", "proxy.local:8080"),
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
        ("content-length", "46"),
    ];
    let head = prepared("POST", "/v1/responses", &sent, "127.0.0.1:5555", false);
    let expected = [
        ("accept-encoding", "identity"),
        ("content-type", "application/json"),
        ("accept", "text/event-stream"),
        ("content-length", "46"),
        ("x-forwarded-for", "127.0.0.1"),
        ("x-forwarded-proto", "http"),
        ("x-forwarded-host", "proxy.local:8080"),
        ("host", "gw:9000"),
    ];
    assert_eq!(fields(&head), expected);
    let sent = [
        ("connection", "keep-alive, x-hop"),
        ("host", "proxy.local"),
        ("x-hop", "1"),
        ("keep-alive", "timeout=5"),
        ("authorization", "Bearer k"),
        ("te", "trailers"),
        ("x-forwarded-for", "10.0.0.1"),
        ("content-length", "007"),
        ("accept-encoding", "gzip"),
    ];
    let head = prepared("POST", "/v1/responses", &sent, "[2001:db8::1]:443", true);
    let expected = [
        ("x-forwarded-for", "10.0.0.1, 2001:db8::1"),
        ("x-forwarded-host", "proxy.local"),
        ("content-length", "7"),
        ("accept-encoding", "identity"),
        ("authorization", "Bearer k"),
        ("x-forwarded-proto", "http"),
        ("host", "proxy.local"),
    ];
    assert_eq!(fields(&head), expected);
    // No `Host` and an origin-form target: no `X-Forwarded-Host`, the upstream's `Host`.
    let sent = [("transfer-encoding", "chunked"), ("accept", "*/*")];
    let head = prepared(
        "GET",
        "/v1/responses/r?stream=true",
        &sent,
        "10.1.2.3:9",
        false,
    );
    let expected = [
        ("accept", "*/*"),
        ("x-forwarded-for", "10.1.2.3"),
        ("x-forwarded-proto", "http"),
        ("accept-encoding", "identity"),
        ("host", "gw:9000"),
    ];
    assert_eq!(fields(&head), expected);
}

#[test]
fn a_peer_address_is_written_as_std_writes_it() {
    for ip in [
        "0.0.0.0",
        "127.0.0.1",
        "10.200.3.45",
        "255.255.255.255",
        "::1",
        "::ffff:1.2.3.4",
    ] {
        let ip: IpAddr = ip.parse().expect("ip");
        assert_eq!(ip_value(ip).expect("value"), ip.to_string().as_str());
    }
}

/// Sharing the client's path and query changes nothing: the URI is the one joined.
#[test]
fn a_shared_target_is_the_joined_one() {
    // Each target with the path the proxy sends on (dot segments resolved).
    let targets = [
        ("/v1/responses", "/v1/responses"),
        ("/v1/responses?stream=true", "/v1/responses"),
        ("/v1/responses?", "/v1/responses"),
        ("/a/../v1/responses", "/v1/responses"),
        (
            "/v1/responses/r?stream=true&starting_after=3",
            "/v1/responses/r",
        ),
        ("http://proxy.local?x=1", "/"),
        ("http://proxy.local/p#frag", "/p"),
        ("http://proxy.local", "/"),
    ];
    for upstream in ["http://gw:9000", "http://gw:9000/", "https://gw/api"] {
        let upstream: Uri = upstream.parse().expect("upstream");
        for (target, path) in targets {
            let client: Uri = target.parse().expect("target");
            let resumed = resumption(&Method::GET, path, client.query());
            let queries = [
                client.query(),
                resumed.as_ref().map(|(_, rest)| rest.as_str()),
            ];
            for query in queries {
                let shared = upstream_uri_of(&upstream, &client, path, query).expect("uri");
                let joined = upstream_uri(&upstream, path, query).expect("uri");
                let what = format!("{upstream} {target} {query:?}");
                assert_eq!(shared.path_and_query(), joined.path_and_query(), "{what}");
                assert_eq!(shared.to_string(), joined.to_string(), "{what}");
            }
        }
    }
}
