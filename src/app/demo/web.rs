//! `toolpulse demo --web`: the scripted gateway, toolpulse in front of it, and a small loopback
//! web server for the demo page (HTML, CSS and JS embedded in the binary). The page's own
//! origin also forwards `/through/…` to toolpulse and `/direct/…` straight to the gateway, so
//! one page can send the same request both ways without CORS, and the proxy stays untouched.
//! Runs until Ctrl-C or SIGTERM.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HeaderValue,
    X_CONTENT_TYPE_OPTIONS,
};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use super::{Stack, gateway};
use crate::net::server::accept;

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_CSS: &str = include_str!("page.css");
const PAGE_JS: &str = include_str!("page.js");
/// The page draws its tool rows from the companion items of profile `openai` (`tp_…` ids)
/// beside the gateway's own items, which its event log shows too.
const PAGE_PROFILES: &str = "openai,progress";

/// Everything the page loads comes from its own origin; nothing inline, nothing remote.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";
/// The largest request body the page may send on.
const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// A browser gets this long to send a request head, and then its body.
const CLIENT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connecting to the gateway or the proxy (both on loopback) and getting response headers.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);

type WebBody = BoxBody<Bytes, hyper::Error>;
type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Where the page's two routes lead.
#[derive(Clone)]
struct Routes {
    /// toolpulse, in front of the gateway.
    through: SocketAddr,
    /// The gateway itself.
    direct: SocketAddr,
    client: HttpClient,
}

/// Serves the demo page on `listen` (a loopback address) until Ctrl-C or SIGTERM.
pub async fn run(listen: SocketAddr) -> anyhow::Result<()> {
    anyhow::ensure!(
        listen.ip().is_loopback(),
        "--listen {listen}: the demo serves on loopback only (e.g. 127.0.0.1:8080)"
    );
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let stack = Stack::start(gateway::Turn::Web, Some(PAGE_PROFILES)).await?;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;

    let slow_s = gateway::SLOW_TOOL_MS / 1000;
    let banner = [
        "toolpulse demo --web".to_string(),
        format!(
            "  scripted gateway (antwort-shaped) on http://{}: a web search and a slow MCP call",
            stack.gateway
        ),
        format!(
            "  ({slow_s} s, reporting its steps) in parallel, a file search, an MCP call that fails,"
        ),
        "  then the answer".to_string(),
        format!(
            "  toolpulse on http://{} in front of it, its MCP front on http://{}/github",
            stack.proxy, stack.mcp_front
        ),
        format!("demo page: http://{addr}/"),
        "Ctrl-C to stop.\n".to_string(),
    ];
    super::say(&banner.join("\n"))?;

    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    serve(listener, Routes::new(&stack), shutdown).await;
    super::say("stopped.\n")?;
    Ok(())
}

/// Serves the page and its two routes on `listener` until `shutdown` completes.
async fn serve(listener: TcpListener, routes: Routes, shutdown: impl Future<Output = ()>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(CLIENT_READ_TIMEOUT);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = accept(&listener, "demo page") => accepted,
            () = &mut shutdown => return,
        };
        let _ = stream.set_nodelay(true);
        let builder = builder.clone();
        let routes = routes.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let routes = routes.clone();
                async move { Ok::<_, Infallible>(routes.handle(request).await) }
            });
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

impl Routes {
    fn new(stack: &Stack) -> Routes {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(UPSTREAM_TIMEOUT));
        Routes {
            through: stack.proxy,
            direct: stack.gateway,
            client: Client::builder(TokioExecutor::new()).build(connector),
        }
    }

    async fn handle(&self, request: Request<Incoming>) -> Response<WebBody> {
        let path = request.uri().path();
        let asset = match path {
            "/" | "/index.html" => Some((PAGE_HTML, "text/html; charset=utf-8")),
            "/page.css" => Some((PAGE_CSS, "text/css; charset=utf-8")),
            "/page.js" => Some((PAGE_JS, "text/javascript; charset=utf-8")),
            _ => None,
        };
        if let Some((body, content_type)) = asset {
            return if matches!(*request.method(), Method::GET | Method::HEAD) {
                page_asset(body, content_type)
            } else {
                text(StatusCode::METHOD_NOT_ALLOWED, "GET only")
            };
        }
        let target = if let Some(rest) = path.strip_prefix("/through/") {
            Some((self.through, rest.to_string()))
        } else {
            path.strip_prefix("/direct/")
                .map(|rest| (self.direct, rest.to_string()))
        };
        match target {
            Some((addr, rest)) => self.forward(request, addr, &rest).await,
            None => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    /// Sends the request on to `addr` as `/{rest}` and streams the response back as it comes.
    async fn forward(
        &self,
        request: Request<Incoming>,
        addr: SocketAddr,
        rest: &str,
    ) -> Response<WebBody> {
        let query = request
            .uri()
            .query()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        let (parts, body) = request.into_parts();
        let body = Limited::new(body, MAX_REQUEST_BYTES).collect();
        let body = match tokio::time::timeout(CLIENT_READ_TIMEOUT, body).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(_)) => return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"),
            Err(_) => return text(StatusCode::REQUEST_TIMEOUT, "request body too slow"),
        };
        let mut upstream = Request::builder()
            .method(parts.method)
            .uri(format!("http://{addr}/{rest}{query}"));
        for name in [CONTENT_TYPE, ACCEPT] {
            if let Some(value) = parts.headers.get(&name) {
                upstream = upstream.header(name, value);
            }
        }
        let Ok(upstream) = upstream.body(Full::new(body)) else {
            return text(StatusCode::BAD_REQUEST, "bad request");
        };
        let response =
            match tokio::time::timeout(UPSTREAM_TIMEOUT, self.client.request(upstream)).await {
                Ok(Ok(response)) => response,
                Ok(Err(error)) => {
                    return text(StatusCode::BAD_GATEWAY, &format!("{addr}: {error}"));
                }
                Err(_) => return text(StatusCode::GATEWAY_TIMEOUT, &format!("{addr}: no answer")),
            };
        let (parts, body) = response.into_parts();
        let mut out = Response::builder().status(parts.status);
        for name in [CONTENT_TYPE, CACHE_CONTROL] {
            if let Some(value) = parts.headers.get(&name) {
                out = out.header(name, value);
            }
        }
        out.body(body.boxed())
            .unwrap_or_else(|_| text(StatusCode::BAD_GATEWAY, "bad upstream response"))
    }
}

fn page_asset(body: &'static str, content_type: &'static str) -> Response<WebBody> {
    let mut response = Response::new(full(Bytes::from_static(body.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

fn text(status: StatusCode, message: &str) -> Response<WebBody> {
    let mut response = Response::new(full(Bytes::from(format!("{message}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn full(bytes: Bytes) -> WebBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack and the page server on loopback; everything stops with the test's runtime.
    async fn start() -> SocketAddr {
        let stack = Stack::start(gateway::Turn::Web, Some(PAGE_PROFILES))
            .await
            .expect("stack");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, Routes::new(&stack), std::future::pending()));
        addr
    }

    async fn send(addr: SocketAddr, method: Method, path: &str) -> Response<Incoming> {
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        let body = r#"{"model":"demo-model","input":"hi","stream":true}"#;
        let request = Request::builder()
            .method(method)
            .uri(format!("http://{addr}{path}"))
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .expect("request");
        tokio::time::timeout(Duration::from_secs(10), client.request(request))
            .await
            .expect("in time")
            .expect("response")
    }

    /// The body up to and including the first chunk that completes `needle`, within 15 s.
    async fn read_until(mut body: Incoming, needle: &str) -> String {
        let mut text = String::new();
        let read = async {
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame.expect("frame").into_data() {
                    text.push_str(&String::from_utf8_lossy(&data));
                    if text.contains(needle) {
                        return;
                    }
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(15), read)
            .await
            .expect("in time");
        text
    }

    #[tokio::test]
    async fn serves_the_page_and_its_assets_from_its_own_origin() {
        let addr = start().await;
        let page = send(addr, Method::GET, "/").await;
        assert_eq!(page.status(), StatusCode::OK);
        assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(
            page.headers()[CONTENT_SECURITY_POLICY]
                .to_str()
                .is_ok_and(|csp| {
                    csp.contains("script-src 'self'") && csp.contains("connect-src 'self'")
                })
        );
        let html = read_until(page.into_body(), "</html>").await;
        for asset in ["/page.css", "/page.js"] {
            assert!(html.contains(asset), "the page loads {asset}");
            assert_eq!(
                send(addr, Method::GET, asset).await.status(),
                StatusCode::OK
            );
        }
        for remote in [r#"src="http"#, r#"href="http"#, r#"src="//"#, r#"href="//"#] {
            assert!(!html.contains(remote), "nothing remote: {remote}");
        }
        assert_eq!(send(addr, Method::GET, "/nope").await.status(), 404);
        assert_eq!(send(addr, Method::POST, "/").await.status(), 405);
    }

    #[tokio::test]
    async fn through_gets_tool_events_and_direct_gets_dead_air() {
        let addr = start().await;
        let (through, direct) = tokio::join!(
            send(addr, Method::POST, "/through/v1/responses"),
            send(addr, Method::POST, "/direct/v1/responses"),
        );
        for response in [&through, &direct] {
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()[CONTENT_TYPE], "text/event-stream");
        }
        let first_output = r#""type":"function_call_output","call_id":"call_1""#;
        let (through, direct) = tokio::join!(
            read_until(through.into_body(), first_output),
            read_until(direct.into_body(), first_output),
        );
        // toolpulse announced both parallel calls before the first result came.
        let before = &through[..through.find(first_output).expect("an output")];
        assert!(before.contains("response.web_search_call.searching"));
        assert!(before.contains("response.mcp_call.in_progress"));
        assert!(
            !direct.contains("_call.in_progress"),
            "the gateway alone says nothing"
        );
    }

    #[tokio::test]
    async fn refuses_to_listen_beyond_loopback() {
        let error = run(SocketAddr::from(([0, 0, 0, 0], 0)))
            .await
            .expect_err("not loopback");
        assert!(error.to_string().contains("loopback only"), "{error}");
    }
}
