//! `toolpulse check`'s account of a config: the resolved rules, limits, listeners and what is on
//! or off, in words.

use http::Uri;

use super::Config;
use crate::core::lifecycle::classify::{FALLBACK, Origin};
use crate::core::profiles::Profile;
use crate::core::settings::Limits;

impl Config {
    /// A human-readable account of the resolved rules, for `toolpulse check`.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("tool classification (first match wins):\n");
        for (i, rule) in self.classifier.rules().iter().enumerate() {
            let origin = match rule.origin {
                Origin::Config => "config",
                Origin::Default => "built-in",
            };
            let patterns = rule.patterns.join(", ");
            let kind = rule.kind.as_str();
            let _ = writeln!(s, "  {:>2}. {patterns} -> {kind} ({origin})", i + 1);
        }
        let _ = writeln!(s, "   *. anything else -> {} (fallback)", FALLBACK.as_str());
        s.push_str("failure output patterns:\n");
        if self.failure.patterns().is_empty() {
            s.push_str("  (none: only item status and `error` mark a failure)\n");
        }
        for pattern in self.failure.patterns() {
            let _ = writeln!(s, "  {pattern:?}");
        }
        let _ = match self.heartbeat.as_millis() {
            0 => writeln!(s, "heartbeat: off"),
            ms => writeln!(s, "heartbeat: every {ms} ms while a tool runs"),
        };
        let Limits {
            max_event_bytes,
            max_open_calls,
            max_open_call_bytes,
        } = self.limits;
        let _ = writeln!(
            s,
            "limits: max_event_bytes = {max_event_bytes}, max_open_calls = {max_open_calls}, \
             max_open_call_bytes = {max_open_call_bytes}"
        );
        let proxy = &self.proxy;
        let upstream = proxy
            .upstream
            .as_ref()
            .map_or("(none: give --upstream)".into(), Uri::to_string);
        let _ = writeln!(s, "proxy: listen {} -> upstream {upstream}", proxy.listen);
        let _ = writeln!(s, "admin: listen {}", self.admin.listen);
        match &self.mcp {
            None => s.push_str("mcp: off (no [[mcp.servers]], no [mcp] listen)\n"),
            Some(mcp) => {
                let _ = writeln!(s, "mcp: listen {}", mcp.listen);
                for server in &mcp.servers {
                    let (name, upstream) = (&server.name, &server.upstream);
                    let tool = server.function_name("TOOL");
                    let _ = writeln!(s, "  /{name} -> {upstream} (tools named {tool})");
                }
            }
        }
        let token = match self.progress.token {
            Some(_) => "required",
            None => "not required",
        };
        let _ = writeln!(s, "progress: bearer token {token}");
        if let Some(bus) = &self.progress.bus {
            let (url, prefix) = (&bus.url, &bus.prefix);
            let _ = writeln!(s, "progress: bus {url} (keys and channels {prefix}:*)");
        }
        let telemetry = &self.telemetry;
        let _ = match &telemetry.traces_endpoint {
            None => writeln!(s, "telemetry: off (no [telemetry] otlp_endpoint)"),
            Some(url) => writeln!(
                s,
                "telemetry: spans to {url} as {:?}, {} header(s), sample ratio {}, payloads {}",
                telemetry.service_name,
                telemetry.headers.len(),
                telemetry.sample_ratio,
                if telemetry.record_payloads {
                    "recorded"
                } else {
                    "not recorded"
                },
            ),
        };
        let _ = match &self.ag_ui {
            None => writeln!(s, "ag-ui: off (no [ag_ui])"),
            Some(ag_ui) => writeln!(
                s,
                "ag-ui: POST {} on the proxy listener, default model {}",
                ag_ui.path,
                ag_ui
                    .model
                    .as_deref()
                    .unwrap_or("(none: forwardedProps.model required)")
            ),
        };
        let names = |list: &[Profile]| list.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ");
        let (on, allowed) = (
            names(&self.events.profiles),
            names(&self.events.allowed_profiles),
        );
        let _ = writeln!(
            s,
            "events: profiles {on}; a request may pick from {allowed}"
        );
        s
    }
}
