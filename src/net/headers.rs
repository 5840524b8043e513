//! Request and response heads across the proxy: hop-by-hop fields (RFC 9110 §7.6.1), the
//! `X-Forwarded-*` fields, `Host`, the upstream URI, and stream resumption's `starting_after`.

use std::net::SocketAddr;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri, request};

/// Fields that describe one connection, never forwarded (besides those `Connection` names).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Removes hop-by-hop fields, including every field the `Connection` header lists.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// Where an incoming request goes upstream: the upstream's scheme and authority, its path prefix
/// followed by the request's path, and the request's query.
pub fn upstream_uri(upstream: &Uri, path: &str, query: Option<&str>) -> Result<Uri, http::Error> {
    let prefix = upstream.path().trim_end_matches('/');
    let path_and_query = match query {
        Some(q) => format!("{prefix}{path}?{q}"),
        None => format!("{prefix}{path}"),
    };
    let parts = upstream.clone().into_parts();
    Uri::builder()
        .scheme(parts.scheme.expect("validated upstream has a scheme"))
        .authority(
            parts
                .authority
                .expect("validated upstream has an authority"),
        )
        .path_and_query(path_and_query)
        .build()
}

/// Stream resumption: for `GET …/responses/{id}?stream=true&starting_after=N`, returns `N` and
/// the query without `starting_after` (the proxy rewrites from the start and drops what the
/// client has seen, since the client's numbers are the rewritten ones).
pub fn resumption(method: &Method, path: &str, query: Option<&str>) -> Option<(u64, String)> {
    let query = query?;
    let mut segments = path.trim_end_matches('/').rsplit('/');
    let is_response =
        segments.next().is_some_and(|id| !id.is_empty()) && segments.next() == Some("responses");
    if method != Method::GET || !is_response {
        return None;
    }
    let params: Vec<(&str, &str)> = query
        .split('&')
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    if !params.contains(&("stream", "true")) {
        return None;
    }
    let n = params
        .iter()
        .find(|(k, _)| *k == "starting_after")
        .and_then(|(_, v)| v.parse().ok())?;
    let rest: Vec<String> = params
        .iter()
        .filter(|(k, _)| *k != "starting_after")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    Some((n, rest.join("&")))
}

/// Whether the response to this request may be an event stream the proxy rewrites: then the
/// upstream is asked not to compress it.
pub fn may_stream(method: &Method, query: Option<&str>) -> bool {
    *method == Method::POST || query.is_some_and(|q| q.split('&').any(|p| p == "stream=true"))
}

/// Prepares a request head for the upstream: hop-by-hop fields out, `X-Forwarded-*` in, `Host`
/// set to the upstream's authority unless `preserve_host`.
pub fn prepare_request(head: &mut request::Parts, uri: Uri, peer: SocketAddr, preserve_host: bool) {
    let original_host = head.headers.get(header::HOST).cloned().or_else(|| {
        head.uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    });
    remove_hop_by_hop(&mut head.headers);
    let forwarded_for = match head
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        Some(earlier) => format!("{earlier}, {}", peer.ip()),
        None => peer.ip().to_string(),
    };
    let headers = &mut head.headers;
    if let Ok(v) = HeaderValue::from_str(&forwarded_for) {
        headers.insert("x-forwarded-for", v);
    }
    headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
    if let Some(host) = &original_host {
        headers.insert("x-forwarded-host", host.clone());
    }
    if may_stream(&head.method, head.uri.query()) {
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    // Always a `Host` (HTTP/1.1 needs one): the client's when preserved, else the upstream's.
    let upstream_host = || {
        uri.authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    };
    let host = original_host
        .filter(|_| preserve_host)
        .or_else(upstream_host);
    headers.remove(header::HOST);
    if let Some(host) = host {
        headers.insert(header::HOST, host);
    }
    // One canonical value (`000…05` is `5`), as the framing read it; the field itself is
    // checked where the request head was read.
    let length = crate::http1::head::content_length(headers, false);
    if let Some(length) = length {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    head.uri = uri;
    // The upstream connection's own protocol (ALPN) decides the version.
    head.version = http::Version::HTTP_11;
}

/// Whether a response is an event stream the proxy can rewrite (not compressed).
pub fn is_plain_event_stream(headers: &HeaderMap) -> bool {
    let sse = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        });
    sse && is_identity(headers)
}

pub fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

fn is_identity(headers: &HeaderMap) -> bool {
    headers.get_all(header::CONTENT_ENCODING).iter().all(|v| {
        v.to_str()
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("identity"))
    })
}

/// Response head of a rewritten stream: its length changes, and no cache or buffering proxy
/// may hold it back.
pub fn prepare_rewritten_response(headers: &mut HeaderMap) {
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
}

#[cfg(test)]
mod tests {
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
}
