//! Request and response heads across the proxy: hop-by-hop fields (RFC 9110 §7.6.1), the
//! `X-Forwarded-*` fields, `Host`, the upstream URI, and stream resumption's `starting_after`.

use std::net::{IpAddr, SocketAddr};

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Uri, request};

/// Fields that describe one connection, never forwarded (besides those `Connection` names), in
/// the order they are removed. `Connection` is first: the fields it lists go before the rest.
const HOP_BY_HOP_NAMES: [&str; 9] = [
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

/// [`HOP_BY_HOP_NAMES`] as names, made once.
static HOP_BY_HOP: [HeaderName; 9] = {
    let n = &HOP_BY_HOP_NAMES;
    let name = HeaderName::from_static;
    [
        name(n[0]),
        name(n[1]),
        name(n[2]),
        name(n[3]),
        name(n[4]),
        name(n[5]),
        name(n[6]),
        name(n[7]),
        name(n[8]),
    ]
};

/// The lengths of the [`HOP_BY_HOP_NAMES`], as bits.
const HOP_BY_HOP_LENGTHS: u32 = {
    let mut bits = 0;
    let mut at = 0;
    while at < HOP_BY_HOP_NAMES.len() {
        bits |= 1 << HOP_BY_HOP_NAMES[at].len();
        at += 1;
    }
    bits
};

// Names the proxy writes, made once: a `&str` name is parsed at every use, and a field it adds
// copies the name into an allocation of its own.
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// Removes hop-by-hop fields, including every field the `Connection` header lists.
pub fn remove_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the names finds the fixed fields that are there (most heads have none, or
    // `Transfer-Encoding` alone): only those are removed, each a lookup. They are removed in
    // the order of [`HOP_BY_HOP`], after those `Connection` lists, as if all were: a removal
    // moves the last field into the place it frees, so the order decides the fields' order.
    let mut present = 0u16;
    for name in headers.keys() {
        // Most names are not as long as any of these: compared to none of them.
        let len = name.as_str().len();
        if len >= 32 || HOP_BY_HOP_LENGTHS & (1 << len) == 0 {
            continue;
        }
        if let Some(at) = HOP_BY_HOP.iter().position(|hop| hop == name) {
            present |= 1 << at;
        }
    }
    if present == 0 {
        return;
    }
    // `Connection` is there: the fields it lists go first.
    if present & 1 != 0 {
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
    }
    for (at, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << at) != 0 {
            headers.remove(name);
        }
    }
}

/// Where an incoming request goes upstream: the upstream's scheme and authority, its path prefix
/// followed by the request's path, and the request's query.
pub fn upstream_uri(upstream: &Uri, path: &str, query: Option<&str>) -> Result<Uri, http::Error> {
    let prefix = upstream.path().trim_end_matches('/');
    let length = prefix.len() + path.len() + query.map_or(0, |q| q.len() + 1);
    let mut path_and_query = String::with_capacity(length);
    path_and_query.push_str(prefix);
    path_and_query.push_str(path);
    if let Some(q) = query {
        path_and_query.push('?');
        path_and_query.push_str(q);
    }
    on_upstream(upstream, PathAndQuery::try_from(path_and_query)?)
}

/// `path_and_query` at the upstream's scheme and authority.
fn on_upstream(upstream: &Uri, path_and_query: PathAndQuery) -> Result<Uri, http::Error> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(
        upstream
            .scheme()
            .expect("validated upstream has a scheme")
            .clone(),
    );
    parts.authority = Some(
        upstream
            .authority()
            .expect("validated upstream has an authority")
            .clone(),
    );
    parts.path_and_query = Some(path_and_query);
    Ok(Uri::from_parts(parts)?)
}

/// [`upstream_uri`] for a request whose target was `client`: when what it joins is the
/// client's path and query as they came (the upstream has no path prefix, the path had no dot
/// segment, the query is not resumption's), they are shared rather than joined and parsed
/// again.
pub fn upstream_uri_of(
    upstream: &Uri,
    client: &Uri,
    path: &str,
    query: Option<&str>,
) -> Result<Uri, http::Error> {
    let no_prefix = upstream.path().trim_end_matches('/').is_empty();
    let joined = |sent: &PathAndQuery| {
        let rest = sent.as_str().strip_prefix(path);
        rest.is_some_and(|rest| match query {
            None => rest.is_empty(),
            Some(query) => rest.strip_prefix('?') == Some(query),
        })
    };
    match client
        .path_and_query()
        .filter(|sent| no_prefix && joined(sent))
    {
        Some(path_and_query) => on_upstream(upstream, path_and_query.clone()),
        None => upstream_uri(upstream, path, query),
    }
}

/// Stream resumption: for `GET …/responses/{id}?stream=true&starting_after=N`, returns `N` and
/// the query without `starting_after` (the proxy rewrites from the start and drops what the
/// client has seen, since the client's numbers are the rewritten ones).
pub fn resumption(method: &Method, path: &str, query: Option<&str>) -> Option<(u64, String)> {
    let query = query?;
    if method != Method::GET {
        return None;
    }
    let mut segments = path.trim_end_matches('/').rsplit('/');
    let is_response =
        segments.next().is_some_and(|id| !id.is_empty()) && segments.next() == Some("responses");
    if !is_response {
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
    let upstream_host = |uri: &Uri| {
        uri.authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    };
    prepare_request_to(head, uri, upstream_host, peer, preserve_host);
}

/// [`prepare_request`] with the upstream's `Host` value given by `upstream_host` (the proxy
/// keeps one, made once, for its one upstream), asked only when the request goes with it.
pub fn prepare_request_to(
    head: &mut request::Parts,
    uri: Uri,
    upstream_host: impl FnOnce(&Uri) -> Option<HeaderValue>,
    peer: SocketAddr,
    preserve_host: bool,
) {
    // The client's `Host` is taken out of its field (a placeholder is left, which goes with the
    // field below): moved rather than copied where it is only forwarded as `X-Forwarded-Host`.
    let original_host = match head.headers.get_mut(header::HOST) {
        Some(host) => Some(std::mem::replace(host, HeaderValue::from_static(""))),
        None => head
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok()),
    };
    remove_hop_by_hop(&mut head.headers);
    let earlier = head
        .headers
        .get(&X_FORWARDED_FOR)
        .and_then(|v| v.to_str().ok());
    let forwarded_for = match earlier {
        Some(earlier) => HeaderValue::from_str(&format!("{earlier}, {}", peer.ip())),
        None => ip_value(peer.ip()),
    };
    let headers = &mut head.headers;
    if let Ok(v) = forwarded_for {
        headers.insert(&X_FORWARDED_FOR, v);
    }
    headers.insert(&X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    let (forwarded_host, original_host) = match original_host {
        Some(host) if preserve_host => (Some(host.clone()), Some(host)),
        host => (host, None),
    };
    if let Some(host) = forwarded_host {
        headers.insert(&X_FORWARDED_HOST, host);
    }
    if may_stream(&head.method, head.uri.query()) {
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    // Always a `Host` (HTTP/1.1 needs one): the client's when preserved, else the upstream's.
    let host = original_host.or_else(|| upstream_host(&uri));
    headers.remove(header::HOST);
    if let Some(host) = host {
        headers.insert(header::HOST, host);
    }
    // One canonical value (`000…05` is `5`), as the framing read it; the field itself is
    // checked where the request head was read. A field that is already that one value stays.
    let length = crate::http1::head::content_length(headers, false);
    if let Some(length) = length {
        let mut text = itoa::Buffer::new();
        let text = text.format(length).as_bytes();
        let mut fields = headers.get_all(header::CONTENT_LENGTH).iter();
        let canonical =
            fields.next().is_some_and(|v| v.as_bytes() == text) && fields.next().is_none();
        if !canonical {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
    }
    head.uri = uri;
    // The upstream connection's own protocol (ALPN) decides the version.
    head.version = http::Version::HTTP_11;
}

/// A peer's address as a field value: an IPv4 one written without the formatting machinery
/// (every request has one).
fn ip_value(ip: IpAddr) -> Result<HeaderValue, http::header::InvalidHeaderValue> {
    let IpAddr::V4(v4) = ip else {
        return HeaderValue::from_str(&ip.to_string());
    };
    let mut out = [0u8; 15];
    let mut len = 0;
    for (n, octet) in v4.octets().into_iter().enumerate() {
        if n > 0 {
            out[len] = b'.';
            len += 1;
        }
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(octet).as_bytes();
        out[len..len + digits.len()].copy_from_slice(digits);
        len += digits.len();
    }
    HeaderValue::from_bytes(&out[..len])
}

/// Whether a response is an event stream the proxy can rewrite (not compressed).
pub fn is_plain_event_stream(headers: &HeaderMap) -> bool {
    let sse = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            // The usual value, the type alone, compared as it is.
            v.eq_ignore_ascii_case("text/event-stream")
                || v.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream"))
        });
    sse && is_identity(headers)
}

/// Whether a response says it is an event stream, compressed or not.
pub fn is_event_stream(headers: &HeaderMap) -> bool {
    const SSE: &[u8] = b"text/event-stream";
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let v = v.trim_start().as_bytes();
            v.get(..SSE.len())
                .is_some_and(|t| t.eq_ignore_ascii_case(SSE))
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
    headers.insert(&X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
}

#[cfg(test)]
mod tests;
