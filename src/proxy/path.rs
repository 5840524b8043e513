//! A request's path as the upstream gets it: its dot segments resolved (RFC 3986 §5.2.4)
//! before the upstream's path prefix is joined, so the gateway never gets a path outside the
//! prefix (`--upstream http://gw/api` and `/../admin` would otherwise send `/api/../admin`,
//! which the gateway, or a proxy before it, resolves to `/admin`).
//!
//! A dot segment written with `%2e` counts as one (a server may decode it before resolving);
//! one that climbs above the root is refused, as nginx refuses it (400), and so is a segment
//! where an encoded slash or backslash (`%2f`, `%5c`) or a backslash sits beside `..`, which
//! a server that decodes or splits on them would read as climbing. Nothing else is changed:
//! no other percent-encoding is decoded, no slashes merged.
//!
//! Targets that are no path are toolpulse's to answer ([`target`]): `CONNECT`, `OPTIONS *`.

use std::borrow::Cow;

use http::Response;

use super::body::ProxyBody;
use super::error;

/// What the Allow header of an answer to `OPTIONS *` lists.
const ALLOWED_METHODS: &str = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/// The path a request goes upstream with ([`normalize`]), or toolpulse's own answer:
/// `CONNECT` is refused (405: toolpulse is no tunnel, and an authority is no path under the
/// upstream's prefix), `OPTIONS *` answered here (it asks about the server the client talks
/// to, and `*` cannot be joined to a prefix), a path that leaves the root refused (400).
pub fn target(head: &http::request::Parts) -> Result<String, Box<Response<ProxyBody>>> {
    if head.method == http::Method::CONNECT {
        let mut refused = error::refused(
            http::StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "CONNECT is not supported: toolpulse is a reverse proxy, not a tunnel",
        );
        let allow = http::HeaderValue::from_static(ALLOWED_METHODS);
        refused.headers_mut().insert(http::header::ALLOW, allow);
        return Err(Box::new(refused));
    }
    if head.method == http::Method::OPTIONS && head.uri.path() == "*" {
        let mut answer = Response::new(ProxyBody::full(bytes::Bytes::new()));
        let allow = http::HeaderValue::from_static(ALLOWED_METHODS);
        answer.headers_mut().insert(http::header::ALLOW, allow);
        return Err(Box::new(answer));
    }
    normalize(head.uri.path())
        .map(|path| path.into_owned())
        .map_err(|e| Box::new(error::invalid_request("invalid_path", &e.to_string())))
}

/// Why a path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the request path climbs above the root with '..'")]
    AboveRoot,
    #[error("the request path has '..' beside an encoded slash or a backslash")]
    HiddenDotSegment,
    #[error("the request target is not a path")]
    NotAPath,
}

/// `path` with its dot segments resolved; borrowed when it has none.
pub fn normalize(path: &str) -> Result<Cow<'_, str>, PathError> {
    if path.is_empty() {
        return Ok(Cow::Borrowed("/"));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(PathError::NotAPath);
    };
    // Most paths have neither a dot segment nor one hiding dots: they are looked at, not split
    // into a list.
    if !rest
        .split('/')
        .any(|segment| dot_segment(segment).is_some() || hides_dots(segment))
    {
        return Ok(Cow::Borrowed(path));
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut dots = false;
    let mut segments = rest.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        match dot_segment(segment) {
            Some(Dots::One) => dots = true,
            Some(Dots::Two) => {
                dots = true;
                kept.pop().ok_or(PathError::AboveRoot)?;
            }
            None if hides_dots(segment) => return Err(PathError::HiddenDotSegment),
            None => {
                kept.push(segment);
                continue;
            }
        }
        // A dot segment last leaves the path ending in a slash (§5.2.4: "/a/b/.." is "/a/").
        if last {
            kept.push("");
        }
    }
    if !dots {
        return Ok(Cow::Borrowed(path));
    }
    Ok(Cow::Owned(format!("/{}", kept.join("/"))))
}

enum Dots {
    One,
    Two,
}

/// Whether `segment` is `.` or `..`, each dot possibly written `%2e`.
fn dot_segment(segment: &str) -> Option<Dots> {
    let mut rest = segment.as_bytes();
    let mut n = 0;
    while !rest.is_empty() {
        rest = match rest {
            [b'.', tail @ ..] => tail,
            [b'%', b'2', b'e' | b'E', tail @ ..] => tail,
            _ => return None,
        };
        n += 1;
    }
    match n {
        1 => Some(Dots::One),
        2 => Some(Dots::Two),
        _ => None,
    }
}

/// Whether a segment split at encoded slashes, encoded backslashes or backslashes has a `..`.
fn hides_dots(segment: &str) -> bool {
    // Without a `%` or a backslash there is nothing to split at.
    if !segment.bytes().any(|b| b == b'%' || b == b'\\') {
        return false;
    }
    let lower = segment.to_ascii_lowercase();
    let split = lower
        .replace("%2f", "/")
        .replace("%5c", "/")
        .replace('\\', "/");
    split.contains('/')
        && split
            .split('/')
            .any(|p| matches!(dot_segment(p), Some(Dots::Two)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_segments_are_resolved_as_rfc_3986_says() {
        for (path, expected) in [
            ("/v1/responses", "/v1/responses"),
            ("", "/"),
            ("/", "/"),
            ("/a/./b", "/a/b"),
            ("/a/b/../c", "/a/c"),
            ("/a/b/..", "/a/"),
            ("/a/b/.", "/a/b/"),
            ("/a/%2e%2E/b", "/b"),
            ("/a/.%2e/b", "/b"),
            ("/a/%2e/b", "/a/b"),
            ("/a/.../b", "/a/.../b"),
            ("/a/..b/c", "/a/..b/c"),
            ("/a//../b", "/a/b"),
            ("/a%2fb", "/a%2fb"),
        ] {
            assert_eq!(normalize(path).as_deref(), Ok(expected), "{path}");
        }
        assert!(matches!(normalize("/v1/x"), Ok(Cow::Borrowed(_))));
    }

    #[test]
    fn climbing_above_the_root_or_hidden_dots_are_refused() {
        for path in [
            "/../admin",
            "/a/../../admin",
            "/%2e%2e/admin",
            "/..",
            "/a/%2E./..",
        ] {
            assert_eq!(normalize(path), Err(PathError::AboveRoot), "{path}");
        }
        for path in ["/..%2fadmin", "/a/..%5Cb", "/x%2F..%2fy", "/a\\..\\b"] {
            assert_eq!(normalize(path), Err(PathError::HiddenDotSegment), "{path}");
        }
        assert_eq!(normalize("*"), Err(PathError::NotAPath));
    }
}
