//! Running toolpulse as a service: the proxy, MCP and admin listeners, readiness, signals.
//!
//! - With `[progress] bus` and no `[hosted] key`, the replicas' shared key is read from Redis
//!   (made there by the first replica) before anything listens; Redis not answering for 30 s
//!   stops the start (`crate::features::hosted::shared_key` says why).
//! - SIGTERM/SIGINT: stop accepting, `/readyz` turns 503, in-flight streams get up to
//!   `drain_timeout` to finish; then the rest are ended with their open calls closed. The MCP
//!   listener (when configured) stops too: its GET streams end at once, answers to calls get
//!   the same drain time. A second signal exits at once.
//! - SIGHUP: re-read the config file; a valid one applies to new streams, an invalid one is
//!   logged (with the key and line) and the running config stays.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::app::admin::{self, Admin};
use crate::config::{Config, Overrides};
use crate::features::mcp::{self, Front};
use crate::features::progress::ProgressHub;
use crate::features::progress::bus::{BusHub, link};
use crate::features::progress::local::LocalHub;
use crate::features::telemetry::Telemetry;
use crate::metrics::Reload;
use crate::{net::server, proxy::Proxy};

/// How long the spans still queued at exit may take to reach the collector.
const TELEMETRY_FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Exit status after a second stop signal.
const FORCED_EXIT_CODE: i32 = 130;

pub async fn run(
    mut config: Config,
    config_path: Option<PathBuf>,
    overrides: Overrides,
) -> anyhow::Result<()> {
    if let Some(bus) = &config.progress.bus
        && !config.hosted.key_configured
    {
        // Every replica must verify the others' ids: without a configured key they share one.
        let timeout = crate::features::hosted::shared_key::AGREE_TIMEOUT;
        config.hosted.key = crate::features::hosted::shared_key::agree(bus, timeout).await?;
    }
    let config = Arc::new(config);
    if let Some(warning) = config
        .proxy
        .upstream
        .as_ref()
        .and_then(crate::config::upstream_path_warning)
    {
        tracing::warn!("{warning}");
    }
    let mut proxy = Proxy::new(config.clone())?;
    let bus = match &config.progress.bus {
        Some(bus) => Some(BusHub::start(
            bus,
            config.progress.bind_window,
            proxy.metrics().clone(),
        )?),
        None => None,
    };
    if let Some(bus) = &bus {
        // Listening only once Redis answered (or could not: then the bus is down, logged,
        // and the replica serves on its own until it is back).
        let limit = link::CONNECT_TIMEOUT + link::OP_TIMEOUT;
        if !bus.settled(limit).await {
            tracing::warn!("serving before the progress bus is up");
        }
        proxy = proxy.with_shared_pairs(bus.link());
    }
    let hub = progress_hub(&config, bus);
    if let Some((streams, _)) = &hub {
        proxy = proxy.with_progress(streams.clone());
    }
    let telemetry = Telemetry::start(&config.telemetry, proxy.metrics().clone())
        .context("[telemetry]: cannot set up the OTLP exporter")?;
    if let Some(telemetry) = &telemetry {
        proxy = proxy.with_telemetry(telemetry.clone());
    }
    let proxy = Arc::new(proxy);
    let admin = Arc::new(Admin::new(proxy.metrics().clone()));
    let listener = TcpListener::bind(config.proxy.listen)
        .await
        .with_context(|| {
            let at = config.proxy.listen;
            format!("cannot listen on {at} (proxy.listen; --listen ADDR or TOOLPULSE_LISTEN)")
        })?;
    let admin_listener = TcpListener::bind(config.admin.listen)
        .await
        .with_context(|| {
            // The admin port is the one users forget they have: say how to move it.
            let at = config.admin.listen;
            format!(
                "cannot listen on {at} for the admin endpoints (admin.listen); pick another \
             address with --admin-listen ADDR or TOOLPULSE_ADMIN_LISTEN, e.g. 127.0.0.1:0"
            )
        })?;
    let admin_addr = admin_listener.local_addr()?;
    let front = match hub {
        Some((_, hub)) => Front::new(&config, hub, proxy.metrics().clone())?
            .map(|front| front.with_body_budget(proxy.body_budget().clone()))
            .map(|front| match &telemetry {
                Some(telemetry) => front.with_telemetry(telemetry.clone()),
                None => front,
            })
            .map(Arc::new),
        None => None,
    };
    let mcp = match &front {
        Some(front) => {
            let listener = TcpListener::bind(front.listen())
                .await
                .with_context(|| format!("cannot listen on {} (mcp.listen)", front.listen()))?;
            Some((listener, front.clone()))
        }
        None => None,
    };
    tokio::spawn(admin::serve(
        admin_listener,
        admin.clone(),
        config.clients.clone(),
        config.admin.max_connections,
        std::future::pending(),
    ));

    let stop = CancellationToken::new();
    tokio::spawn(handle_signals(
        proxy.clone(),
        admin.clone(),
        stop.clone(),
        config_path,
        overrides,
    ));
    admin.set_ready(true);
    let mcp_addr = match &mcp {
        Some((listener, _)) => Some(listener.local_addr()?),
        None => None,
    };
    tracing::info!(
        listen = %listener.local_addr()?,
        admin = %admin_addr,
        mcp = mcp_addr.map(|a| a.to_string()),
        upstream = config.proxy.upstream.as_ref().map(ToString::to_string),
        otlp = config.telemetry.traces_endpoint.as_ref().map(|_| "on"),
        "toolpulse listening"
    );
    let mcp_serving = async {
        match mcp {
            Some((listener, front)) => {
                let shutdown = stop.clone().cancelled_owned();
                Some(mcp::server::serve(listener, front, shutdown).await)
            }
            None => None,
        }
    };
    let proxy_serving = server::serve(listener, proxy.clone(), stop.clone().cancelled_owned());
    let (connections, mcp_connections) = tokio::join!(proxy_serving, mcp_serving);
    admin.set_ready(false);
    let drain_timeout = config.proxy.drain_timeout;
    tracing::info!(
        ?drain_timeout,
        "stopped accepting; draining in-flight streams"
    );
    let mcp_drain = async {
        match (mcp_connections, &front) {
            (Some(connections), Some(front)) => connections.drain(drain_timeout, front).await,
            _ => true,
        }
    };
    let (clean, mcp_clean) = tokio::join!(connections.drain(drain_timeout), mcp_drain);
    if let Some(telemetry) = &telemetry
        && !telemetry.flush(TELEMETRY_FLUSH_TIMEOUT).await
    {
        tracing::warn!("spans still queued at exit were not all exported in time");
    }
    tracing::info!(clean = clean && mcp_clean, "stopped");
    Ok(())
}

/// Where the proxy registers its streams, and the hub the MCP front reports to.
type Hubs = (Arc<LocalHub>, Arc<dyn ProgressHub>);

/// The registry of open calls, when something can report progress (the MCP listener): the
/// in-process one, or with `[progress] bus` the one shared through Redis. Either way the proxy
/// registers its streams in the in-process registry (returned first); the MCP front talks to
/// the hub.
fn progress_hub(config: &Config, bus: Option<Arc<BusHub>>) -> Option<Hubs> {
    config.mcp.as_ref()?;
    Some(match bus {
        None => {
            let local = LocalHub::new(config.progress.bind_window);
            (local.clone(), local)
        }
        Some(hub) => (hub.streams(), hub),
    })
}

async fn handle_signals(
    proxy: Arc<Proxy>,
    admin: Arc<Admin>,
    stop: CancellationToken,
    config_path: Option<PathBuf>,
    overrides: Overrides,
) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    loop {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {
                reload(&proxy, config_path.as_ref(), &overrides);
                continue;
            }
        }
        if stop.is_cancelled() {
            tracing::warn!("second stop signal: exiting now");
            std::process::exit(FORCED_EXIT_CODE);
        }
        tracing::info!("stop signal: draining (send it again to exit at once)");
        admin.set_ready(false);
        stop.cancel();
    }
}

fn reload(proxy: &Proxy, path: Option<&PathBuf>, overrides: &Overrides) {
    let Some(path) = path else {
        tracing::warn!("SIGHUP: no config file to reload (started without --config)");
        return;
    };
    match Config::load(path) {
        Ok(mut config) => {
            overrides.apply(&mut config);
            proxy.reload(config);
            tracing::info!(path = %path.display(), "config reloaded; new streams use it");
        }
        Err(error) => {
            proxy.metrics().config_reload(Reload::Rejected);
            // One line: a multi-line entry breaks log pipelines that take a line per entry.
            let error = error.one_line();
            tracing::error!(%error, "config reload rejected; the running config stays");
        }
    }
}
