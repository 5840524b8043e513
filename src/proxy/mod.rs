//! The reverse proxy: hyper glue around the sans-IO [`Rewriter`].
//!
//! Every request, any method and path, goes to the upstream with its body streamed. Responses
//! that are uncompressed `text/event-stream` are rewritten as they arrive; everything else
//! passes through byte for byte (minus hop-by-hop headers). Errors before response headers
//! become OpenAI-style JSON errors (502/504); after headers, the body ends cleanly once open tool
//! calls are closed. The config can be swapped at run time ([`Proxy::reload`]): each stream keeps
//! the config it started with.

pub mod ag_ui;
pub mod ag_ui_body;
pub mod body;
pub mod body_refusal;
pub mod error;
pub mod log;
pub mod next_turn;
pub mod path;
pub mod request_body;
pub mod wake;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime};

use crate::net::listen::ClientBody;
use crate::net::{budget, headers, server, upstream};
use http::{Request, Response, Uri};

use crate::config::Config;
use crate::core::profiles;
use crate::core::rewrite::Rewriter;
use crate::core::settings::Settings;
use crate::features::hosted::shared::Pairs;
use crate::features::hosted::store::{MemoryStore, Tenant};
use crate::features::progress::Traceparent;
use crate::features::progress::local::LocalHub;
use crate::features::telemetry::Telemetry;
use crate::features::unconfigured;
use crate::metrics::{self, Metrics, Reload};
use body::ProxyBody;
use error::ProxyError;
use log::RequestLog;

/// The request header that picks the event profiles of one stream (`tool,stages`); it is
/// checked against `[events] allowed_profiles` and not forwarded.
pub const PROFILES_HEADER: &str = "x-toolpulse-profiles";

/// [`PROFILES_HEADER`] as a name made once (a `&str` is parsed at every lookup).
static PROFILES_FIELD: http::HeaderName = http::HeaderName::from_static(PROFILES_HEADER);

/// Shared state of one proxy: its config, the upstream client, metrics, the drain signal.
pub struct Proxy {
    current: RwLock<Current>,
    upstream: Uri,
    /// The `Host` requests go upstream with (unless `preserve_host`), made once.
    upstream_host: Option<http::HeaderValue>,
    client: upstream::Upstream,
    metrics: Arc<Metrics>,
    /// The tools without a `[[tools]]` rule already logged.
    unconfigured: Arc<unconfigured::Reported>,
    /// Cancelled when streams still running must end (the drain timeout ran out).
    end_streams: crate::net::drain::Signal,
    /// The registry of open calls for out-of-band progress, when a progress source is on.
    progress: Option<Arc<LocalHub>>,
    /// OpenTelemetry spans, when `[telemetry]` names a collector.
    telemetry: Option<Arc<Telemetry>>,
    /// The gateway's pairs behind hosted items, for the next turn.
    store: Arc<Pairs>,
    /// Makes each stream's hosted item ids its own: a random start, one more per stream.
    nonces: AtomicU64,
    /// Request bodies read whole, held at once (shared with the MCP front).
    budget: budget::BodyBudget,
}

/// The config new streams start with, and the core's settings built from it once (not once per
/// stream: they copy the tool rules, templates and sanitizer).
struct Current {
    config: Arc<Config>,
    settings: Arc<Settings>,
}

impl Current {
    fn of(config: Arc<Config>) -> Current {
        Current {
            settings: config.settings(),
            config,
        }
    }
}

impl Proxy {
    /// Builds the proxy; the config must name an upstream.
    pub fn new(config: Arc<Config>) -> anyhow::Result<Self> {
        let upstream = config.proxy.upstream.clone().ok_or_else(|| {
            anyhow::anyhow!("no upstream: set [proxy] upstream or pass --upstream URL")
        })?;
        let client = upstream::Upstream::new(&config.proxy)?;
        let hosted = &config.hosted;
        let store = MemoryStore::new(hosted.max_entries, hosted.max_bytes, hosted.ttl);
        let mut seed = [0u8; 8];
        getrandom::fill(&mut seed)?;
        let bodies = budget::BodyBudget::new(&config.clients);
        Ok(Proxy {
            store: Arc::new(Pairs::memory(store)),
            nonces: AtomicU64::new(u64::from_ne_bytes(seed)),
            current: RwLock::new(Current::of(config)),
            upstream_host: upstream
                .authority()
                .and_then(|a| http::HeaderValue::from_str(a.as_str()).ok()),
            upstream,
            client,
            metrics: Arc::new(Metrics::new()),
            unconfigured: Arc::default(),
            end_streams: crate::net::drain::Signal::default(),
            progress: None,
            telemetry: None,
            budget: bodies,
        })
    }

    /// The budget of request bodies read whole, for the MCP front to share.
    pub fn body_budget(&self) -> &budget::BodyBudget {
        &self.budget
    }

    /// Traces every request: a server span (continuing the client's trace), the gateway told
    /// its `traceparent`, a span per tool call.
    pub fn with_telemetry(mut self, telemetry: Arc<Telemetry>) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// Keeps the pairs behind hosted items in Redis too, through the bus's `link`, so that a
    /// next turn reaching another replica (or this one restarted) maps them.
    pub fn with_shared_pairs(
        mut self,
        link: Arc<crate::features::progress::bus::link::Link>,
    ) -> Self {
        let config = self.config();
        let hosted = &config.hosted;
        let memory = MemoryStore::new(hosted.max_entries, hosted.max_bytes, hosted.ttl);
        // A key not configured is the one the replicas share through Redis (`serve`).
        let shared_key = (!hosted.key_configured).then(|| hosted.key.clone());
        self.store = Arc::new(Pairs::shared(memory, link, hosted.ttl, shared_key));
        self
    }

    /// Registers every stream's running calls with `hub`, so progress can reach them; the
    /// gateway then always gets a `traceparent` (the client's, else a new one) to match by.
    pub fn with_progress(mut self, hub: Arc<LocalHub>) -> Self {
        self.progress = Some(hub);
        self
    }

    /// The config new streams start with.
    pub fn config(&self) -> Arc<Config> {
        self.current().0
    }

    /// The config new streams start with and the settings their rewriters take, as one.
    fn current(&self) -> (Arc<Config>, Arc<Settings>) {
        let current = self
            .current
            .read()
            .expect("config lock is never poisoned: no panics while held");
        (current.config.clone(), current.settings.clone())
    }

    /// The connections to the upstream.
    pub fn upstream(&self) -> &upstream::Upstream {
        &self.client
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Applies a new config to streams that start from now on. The `[proxy]`, `[admin]` and
    /// `[mcp]` sections (addresses, upstream, TLS, limits, MCP servers) and `[progress]`'s token
    /// and bind window need a restart: they are kept, with a warning if they changed.
    pub fn reload(&self, mut new: Config) {
        let mut lock = self.current.write().expect("config lock is never poisoned");
        let current = &lock.config;
        // What the listeners and the progress registry were built from; `min_interval_ms`
        // is read per stream, so it does apply.
        let fixed = |c: &Config| (c.progress.token.clone(), c.progress.bind_window);
        let mut kept = Vec::new();
        if new.proxy != current.proxy {
            kept.push("[proxy]");
        }
        if new.admin != current.admin {
            kept.push("[admin]");
        }
        if new.mcp != current.mcp {
            kept.push("[mcp]");
        }
        if fixed(&new) != fixed(current) {
            kept.push("[progress] token and bind_window_ms");
        }
        if new.telemetry != current.telemetry {
            kept.push("[telemetry]");
        }
        if new.clients != current.clients {
            kept.push("[clients]");
        }
        if !kept.is_empty() {
            let sections = kept.join(", ");
            tracing::warn!(
                %sections,
                "these changes need a restart; keeping the running values"
            );
        }
        new.proxy = current.proxy.clone();
        new.admin = current.admin.clone();
        new.mcp = current.mcp.clone();
        new.progress.token = current.progress.token.clone();
        new.progress.bind_window = current.progress.bind_window;
        new.telemetry = current.telemetry.clone();
        new.clients = current.clients.clone();
        // Without a configured key, the one in use stays (the process's, or the one the
        // replicas share through Redis): a new one would orphan every id given out.
        if !new.hosted.key_configured {
            new.hosted.key = current.hosted.key.clone();
        }
        *lock = Current::of(Arc::new(new));
        self.unconfigured.forget();
        self.metrics.config_reload(Reload::Applied);
    }

    /// Ends every stream still running: open calls get their terminal events, bodies end.
    pub fn end_streams(&self) {
        self.end_streams.raise();
    }

    /// Forwards one request from `peer` and returns the (possibly rewritten) response; a body
    /// read whole is held within `budget`, its connection's ([`budget::BodyBudget::connection`]).
    pub async fn handle(
        &self,
        request: Request<ClientBody>,
        peer: SocketAddr,
        budget: &budget::BodyBudget,
    ) -> Response<ProxyBody> {
        let (config, settings) = self.current();
        let (mut head, body) = request.into_parts();
        let client_path = head.uri.path().to_string();
        let mut log = RequestLog::new(self.metrics.clone(), head.method.clone(), client_path);
        if let Some(problem) = crate::net::listen::host_problem(head.version, &head.headers) {
            log.status = 400;
            log.response = metrics::Response::InvalidRequest;
            let response = error::invalid_request("invalid_host", problem);
            return response.map(|body| body.with_log(log));
        }
        let path = match path::target(&head) {
            Ok(path) => path,
            Err(response) => {
                log.status = response.status().as_u16();
                log.response = metrics::Response::InvalidRequest;
                return (*response).map(|body| body.with_log(log));
            }
        };
        if let Some(ag_ui) = config.ag_ui.as_ref().filter(|a| a.path == path) {
            // Boxed, as the upstream request below: the run is not kept inside `handle`.
            return Box::pin(self.ag_ui((head, body), peer, budget, ag_ui, log)).await;
        }
        // An invalid `traceparent` is not carried on, not even into the span's parent.
        let trace = Traceparent::check(&mut head.headers);
        // Before anything can answer, so every request has its span; it also sets the
        // `traceparent` the gateway gets.
        log.span = self
            .telemetry
            .as_ref()
            .map(|t| t.request(&mut head, &config));
        let profiles = match head.headers.remove(&PROFILES_FIELD) {
            None => None,
            Some(value) => {
                let allowed = &config.events.allowed_profiles;
                let picked = value.to_str().map_err(|_| "not ASCII".to_string());
                match picked.and_then(|v| profiles::parse_list(v, allowed)) {
                    Ok(picked) => Some(picked),
                    Err(message) => {
                        log.status = 400;
                        log.response = metrics::Response::InvalidRequest;
                        let message = format!("{PROFILES_HEADER}: {message}");
                        let response = error::invalid_request("invalid_profiles", &message);
                        return response.map(|body| body.with_log(log));
                    }
                }
            }
        };
        let resume = headers::resumption(&head.method, &path, head.uri.query());
        let query = match &resume {
            Some((_, rest)) => Some(rest.as_str()).filter(|q| !q.is_empty()),
            None => head.uri.query(),
        };
        let uri = match headers::upstream_uri_of(&self.upstream, &head.uri, &path, query) {
            Ok(uri) => uri,
            Err(e) => {
                return self.fail(ProxyError::Upstream, &format!("bad upstream URI: {e}"), log);
            }
        };
        let upstream_host = |_: &Uri| self.upstream_host.clone();
        let preserve_host = config.proxy.preserve_host;
        headers::prepare_request_to(&mut head, uri, upstream_host, peer, preserve_host);
        let responses_create = request_body::is_responses_create(&head);
        // With tracing on, the trace id is the server span's (already in the header).
        let traced = log.span.as_ref().map(|span| span.trace_id()).or(trace.id());
        let trace_id = match traced {
            Some(id) => Some(id),
            // The gateway's MCP calls are matched by trace, and a removed one is restarted.
            None if self.progress.is_some() || trace == Traceparent::Removed => {
                Some(Traceparent::restart(&mut head.headers))
            }
            None => None,
        };
        let progress = self.progress.as_ref().zip(trace_id);
        let progress = progress.map(|(hub, trace_id)| (hub.clone(), trace_id));
        let prepared = request_body::prepare(
            (&mut head, responses_create),
            body,
            &config,
            &self.store,
            &self.metrics,
            budget,
        );
        let (body, facts) = match prepared.await {
            Ok(prepared) => prepared,
            Err(e) => return self.refuse_body(&e, log),
        };
        let refusal = facts.refusal.clone();
        let fault = body.fault();

        let started = Instant::now();
        let timeout = config.proxy.header_timeout;
        // Boxed: hyper keeps room for the whole `handle` future for as long as the client's
        // connection lives, so this (large) one must not be inside it.
        let pending = Box::pin(self.client.request(Request::from_parts(head, body)));
        let response = match tokio::time::timeout(timeout, pending).await {
            Ok(Ok(response)) => response,
            Ok(Err(_)) if refusal.is_set() => {
                return self.refuse_body(&request_body::PrepareError::HostedPastLimit, log);
            }
            Ok(Err(e)) => {
                if let Some(failure) = fault.take() {
                    // The client's own body failed on its way: its error, not the upstream's.
                    let error = request_body::PrepareError::Read(failure);
                    return self.refuse_body(&error, log);
                }
                let kind = match e {
                    upstream::UpstreamError::Connect(_) => ProxyError::Unreachable,
                    _ => ProxyError::Upstream,
                };
                let message = format!("upstream request failed: {}", error_chain(&e));
                return self.fail(kind, &message, log);
            }
            Err(_) => {
                let message = format!(
                    "upstream sent no response headers within {} ms",
                    timeout.as_millis()
                );
                return self.fail(ProxyError::HeaderTimeout, &message, log);
            }
        };
        log.upstream_latency = Some(started.elapsed());
        log.status = response.status().as_u16();
        if response.status() == http::StatusCode::NOT_FOUND {
            let url = headers::upstream_uri(&self.upstream, &path, None);
            log.not_found = url.ok().map(|url| url.to_string());
        }

        let (mut head, body) = response.into_parts();
        headers::remove_hop_by_hop(&mut head.headers);
        let shape = profiles.as_deref().unwrap_or(&config.events.profiles);
        let hosted = responses_create && shape.contains(&profiles::Profile::Hosted);
        if hosted && !headers::is_event_stream(&head.headers) {
            let nonce = self.nonces.fetch_add(1, Ordering::Relaxed);
            let tenant = Tenant {
                owner: facts.owner,
                response: nonce,
            };
            let facts = (&facts.client_functions[..], tenant);
            match self
                .present_json(&mut head, body, &config, &settings, facts)
                .await
            {
                Ok(body) => {
                    log.response = metrics::Response::Presented;
                    return Response::from_parts(head, body.with_log(log));
                }
                Err(body) => {
                    log.response = metrics::Response::Passthrough;
                    return Response::from_parts(head, ProxyBody::passthrough(body, log));
                }
            }
        }
        if !headers::is_plain_event_stream(&head.headers) {
            if headers::is_event_stream(&head.headers) {
                tracing::warn!(
                    "compressed event stream from upstream: forwarded without tool events"
                );
            }
            log.response = metrics::Response::Passthrough;
            return Response::from_parts(head, ProxyBody::passthrough(body, log));
        }
        headers::prepare_rewritten_response(&mut head.headers);
        let now = tokio::time::Instant::now().into_std();
        let interval = config.progress.min_interval;
        let nonce = self.nonces.fetch_add(1, Ordering::Relaxed);
        let mut rewriter = Rewriter::new(settings)
            .with_wall_clock(SystemTime::now(), now)
            .with_progress_interval(interval)
            .with_client_functions(facts.client_functions)
            .with_nonce(nonce);
        if let Some(profiles) = profiles {
            rewriter = rewriter.with_profiles(profiles);
        }
        if let Some((n, _)) = resume {
            rewriter = rewriter.resume_after(n);
        }
        if log.span.is_some()
            && self
                .telemetry
                .as_ref()
                .is_some_and(|t| t.records_payloads())
        {
            rewriter = rewriter.with_output_observations();
        }
        log.response = metrics::Response::Rewritten;
        self.metrics.streams_active.inc();
        let drain = self.end_streams.watch();
        let sinks = body::Sinks {
            unconfigured: self.unconfigured.clone(),
            progress: progress.map(|(hub, trace_id)| hub.stream(Some(trace_id))),
            store: self.store.clone(),
            tenant: Tenant {
                owner: facts.owner,
                response: nonce,
            },
        };
        let body = ProxyBody::rewritten(body, rewriter, drain, sinks, log);
        Response::from_parts(head, body)
    }

    /// Profile `hosted` for a JSON response (not a stream): read whole when its
    /// `Content-Length` is within `[hosted] max_json_bytes`, presented, its pairs stored. Gives
    /// the body back unread (`Err`) when it is not such a response.
    async fn present_json(
        &self,
        head: &mut http::response::Parts,
        body: upstream::UpstreamBody,
        config: &Config,
        settings: &Settings,
        (client_functions, tenant): (&[String], Tenant),
    ) -> Result<ProxyBody, upstream::UpstreamBody> {
        let is_json = head
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let length = head
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let encoded = head.headers.contains_key(http::header::CONTENT_ENCODING);
        let fits = length.is_some_and(|n| n <= config.hosted.max_json_bytes);
        if !is_json || encoded || !head.status.is_success() || !fits {
            if is_json && head.status.is_success() && !fits {
                tracing::info!(
                    limit = config.hosted.max_json_bytes,
                    "JSON response without a Content-Length within [hosted] max_json_bytes: forwarded as it is"
                );
            }
            return Err(body);
        }
        let whole = match http_body_util::BodyExt::collect(body).await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                tracing::warn!(error = %e, "upstream JSON response broke off");
                return Ok(ProxyBody::full(bytes::Bytes::new()));
            }
        };
        let now = std::time::Instant::now();
        let nonce = tenant.response;
        let presented =
            crate::features::hosted::json::present(&whole, settings, client_functions, nonce, now);
        let Some(presented) = presented else {
            return Ok(ProxyBody::full(whole));
        };
        for (id, pair) in presented.pairs {
            if self.store.put(&id, pair, tenant, now) {
                self.metrics.hosted_pairs_stored.inc();
            }
        }
        let length = http::HeaderValue::from(presented.body.len());
        head.headers.insert(http::header::CONTENT_LENGTH, length);
        Ok(ProxyBody::full(bytes::Bytes::from(presented.body)))
    }

    fn fail(&self, kind: ProxyError, message: &str, mut log: RequestLog) -> Response<ProxyBody> {
        tracing::warn!(
            code = kind.code(),
            detail = message,
            "answering with a proxy error"
        );
        self.metrics.upstream_error(kind.cause());
        log.status = kind.status().as_u16();
        kind.response(message).map(|body| body.with_log(log))
    }
}

use upstream::error_chain;

impl Proxy {
    /// The answer to a request body that is not forwarded, or whose streamed part failed on
    /// the client's side: 400 (unreadable, hosted items past the read limit or that cannot be
    /// mapped back), 408 (too slow), 503 (over the body budget or a share of it).
    fn refuse_body(
        &self,
        error: &request_body::PrepareError,
        mut log: RequestLog,
    ) -> Response<ProxyBody> {
        use budget::ReadError;
        use request_body::PrepareError;
        let (status, code) = match error {
            PrepareError::Read(ReadError::Client(_)) => (400, "unreadable_body"),
            PrepareError::Read(ReadError::Timeout(_)) => (408, "request_body_timeout"),
            PrepareError::Read(e) if e.is_over_budget() => (503, "request_bodies_over_budget"),
            PrepareError::Read(_) => (400, "unreadable_body"),
            PrepareError::HostedPastLimit => (400, "hosted_items_past_read_limit"),
            PrepareError::Hosted(refusal) => (400, refusal.code()),
        };
        if let PrepareError::Read(read) = error {
            self.metrics
                .request_body_refused(metrics::Listener::Proxy, read.reason());
        }
        tracing::info!(code, "request body refused");
        log.status = status;
        log.response = metrics::Response::InvalidRequest;
        let status = http::StatusCode::from_u16(status).expect("a valid status");
        let response = error::refused(status, code, &error.to_string());
        response.map(|body| body.with_log(log))
    }
}

/// The proxy listener serves the proxy.
impl server::Service for Proxy {
    type Body = ProxyBody;

    fn config(&self) -> Arc<Config> {
        Proxy::config(self)
    }

    fn metrics(&self) -> &Arc<Metrics> {
        Proxy::metrics(self)
    }

    fn body_budget(&self) -> &budget::BodyBudget {
        Proxy::body_budget(self)
    }

    fn handle(
        &self,
        request: Request<ClientBody>,
        peer: SocketAddr,
        budget: &budget::BodyBudget,
    ) -> impl Future<Output = Response<ProxyBody>> + Send {
        Proxy::handle(self, request, peer, budget)
    }

    fn end_streams(&self) {
        Proxy::end_streams(self);
    }
}
