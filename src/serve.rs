//! Running toolpulse as a service: the proxy and admin listeners, readiness, signals.
//!
//! - SIGTERM/SIGINT: stop accepting, `/readyz` turns 503, in-flight streams get up to
//!   `drain_timeout` to finish; then the rest are ended with their open calls closed. A second
//!   signal exits at once.
//! - SIGHUP: re-read the config file; a valid one applies to new streams, an invalid one is
//!   logged (with the key and line) and the running config stays.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::admin::{self, Admin};
use crate::config::{Config, Overrides};
use crate::metrics::Outcome;
use crate::proxy::{Proxy, server};

/// Exit status after a second stop signal.
const FORCED_EXIT_CODE: i32 = 130;

pub async fn run(
    config: Config,
    config_path: Option<PathBuf>,
    overrides: Overrides,
) -> anyhow::Result<()> {
    let config = Arc::new(config);
    let proxy = Arc::new(Proxy::new(config.clone())?);
    let admin = Arc::new(Admin::new(proxy.metrics().clone()));
    let listener = TcpListener::bind(config.proxy.listen)
        .await
        .with_context(|| format!("cannot listen on {} (proxy.listen)", config.proxy.listen))?;
    let admin_listener = TcpListener::bind(config.admin.listen)
        .await
        .with_context(|| format!("cannot listen on {} (admin.listen)", config.admin.listen))?;
    let admin_addr = admin_listener.local_addr()?;
    tokio::spawn(admin::serve(
        admin_listener,
        admin.clone(),
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
    tracing::info!(
        listen = %listener.local_addr()?,
        admin = %admin_addr,
        upstream = config.proxy.upstream.as_ref().map(ToString::to_string),
        "toolpulse listening"
    );
    let connections = server::serve(listener, proxy.clone(), stop.clone().cancelled_owned()).await;
    admin.set_ready(false);
    let drain_timeout = config.proxy.drain_timeout;
    tracing::info!(
        ?drain_timeout,
        "stopped accepting; draining in-flight streams"
    );
    let clean = connections.drain(drain_timeout, &proxy).await;
    tracing::info!(clean, "stopped");
    Ok(())
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
            let label = Outcome {
                outcome: "rejected",
            };
            proxy.metrics().config_reloads.get_or_create(&label).inc();
            // One line: a multi-line entry breaks log pipelines that take a line per entry.
            let error = error.one_line();
            tracing::error!(%error, "config reload rejected; the running config stays");
        }
    }
}
