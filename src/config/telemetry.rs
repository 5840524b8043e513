//! The `[telemetry]` section: where OpenTelemetry spans go (OTLP over HTTP/protobuf), with which
//! headers, under which service name, how many traces are sampled, and whether payloads are
//! recorded. Off unless an endpoint is given, in the file or by the standard `OTEL_*`
//! environment variables. Values from the file win over the environment, as everywhere else in
//! the config (`TOOLPULSE_PROGRESS_TOKEN` works the same way).
//!
//! Header values may name environment variables as `${NAME}`, so a collector's credentials
//! stay out of the file; the resolved values are secrets and never printed (`Debug` redacts).

use std::collections::BTreeMap;
use std::fmt;

use http::{HeaderName, HeaderValue, Uri};
use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Invalid};

pub const DEFAULT_SERVICE_NAME: &str = "toolpulse";
/// The OTLP/HTTP path of the traces signal, appended to a base endpoint (OTLP spec, "Endpoint
/// URLs for OTLP/HTTP").
pub const TRACES_PATH: &str = "/v1/traces";
/// The base endpoint; `/v1/traces` is appended.
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces URL itself, used as it is (the OTLP spec's per-signal variable).
pub const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `key=value,key2=value2`; read by the exporter itself and added to `[telemetry] headers`.
pub const HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";
pub const SERVICE_NAME_ENV: &str = "OTEL_SERVICE_NAME";

/// The validated `[telemetry]` section.
#[derive(Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The full OTLP/HTTP traces URL; `None`: telemetry is off.
    pub traces_endpoint: Option<Uri>,
    /// Extra request headers for the collector (name, value), `${NAME}` already resolved and
    /// both checked as HTTP header parts; the values are secrets.
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    /// The share of new traces recorded (0.0–1.0); a continued trace follows its parent's
    /// sampled flag.
    pub sample_ratio: f64,
    /// Record tool arguments and results (sanitized by `[sanitize]`) as span attributes.
    pub record_payloads: bool,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            traces_endpoint: None,
            headers: Vec::new(),
            service_name: DEFAULT_SERVICE_NAME.into(),
            sample_ratio: 1.0,
            record_payloads: false,
        }
    }
}

impl fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("TelemetryConfig")
            .field("traces_endpoint", &self.traces_endpoint)
            .field("headers", &header_names)
            .field("service_name", &self.service_name)
            .field("sample_ratio", &self.sample_ratio)
            .field("record_payloads", &self.record_payloads)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawTelemetry {
    pub(super) otlp_endpoint: Option<Spanned<String>>,
    pub(super) headers: Spanned<BTreeMap<String, String>>,
    pub(super) service_name: Option<Spanned<String>>,
    pub(super) sample_ratio: Spanned<f64>,
    pub(super) record_payloads: bool,
}

impl Default for RawTelemetry {
    fn default() -> Self {
        RawTelemetry {
            otlp_endpoint: None,
            headers: Spanned::new(0..0, BTreeMap::new()),
            service_name: None,
            sample_ratio: Spanned::new(0..0, 1.0),
            record_payloads: false,
        }
    }
}

/// Reads an environment variable; an empty value counts as unset.
pub(super) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Validates `[telemetry]`, falling back to the `OTEL_*` variables `env` gives.
pub(super) fn telemetry(
    raw: &RawTelemetry,
    env: Env<'_>,
    invalid: Invalid,
) -> Result<TelemetryConfig, ConfigError> {
    let traces_endpoint = match (
        &raw.otlp_endpoint,
        env(TRACES_ENDPOINT_ENV),
        env(ENDPOINT_ENV),
    ) {
        (Some(base), _, _) => Some(
            traces_url(base.get_ref(), true)
                .map_err(|m| invalid("telemetry.otlp_endpoint".into(), base.span(), m))?,
        ),
        (None, Some(url), _) => Some(
            traces_url(&url, false).map_err(|m| invalid(TRACES_ENDPOINT_ENV.into(), 0..0, m))?,
        ),
        (None, None, Some(base)) => {
            Some(traces_url(&base, true).map_err(|m| invalid(ENDPOINT_ENV.into(), 0..0, m))?)
        }
        (None, None, None) => None,
    };
    let mut headers = Vec::new();
    for (name, value) in raw.headers.get_ref() {
        let key = || format!("telemetry.headers.{name}");
        let span = raw.headers.span();
        if HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(invalid(key(), span, "not an HTTP header name".into()));
        }
        let value = substitute(value, env).map_err(|m| invalid(key(), span.clone(), m))?;
        // Visible ASCII and spaces only: what every client sends unchanged.
        if HeaderValue::from_str(&value).map_or(true, |v| v.to_str().is_err()) {
            let message = "not a valid header value (visible ASCII only)".to_string();
            return Err(invalid(key(), span, message));
        }
        headers.push((name.to_ascii_lowercase(), value));
    }
    let service_name = match &raw.service_name {
        Some(name) if name.get_ref().trim().is_empty() => {
            let message = "must not be empty".to_string();
            return Err(invalid(
                "telemetry.service_name".into(),
                name.span(),
                message,
            ));
        }
        Some(name) => name.get_ref().clone(),
        None => env(SERVICE_NAME_ENV).unwrap_or_else(|| DEFAULT_SERVICE_NAME.into()),
    };
    let sample_ratio = *raw.sample_ratio.get_ref();
    if !(0.0..=1.0).contains(&sample_ratio) {
        let message = "must be between 0.0 and 1.0".to_string();
        let span = raw.sample_ratio.span();
        return Err(invalid("telemetry.sample_ratio".into(), span, message));
    }
    Ok(TelemetryConfig {
        traces_endpoint,
        headers,
        service_name,
        sample_ratio,
        record_payloads: raw.record_payloads,
    })
}

/// The traces URL of an endpoint: `http(s)://host[:port][/path]`, no query; a base endpoint
/// gets `/v1/traces` after its path (a trailing `/` is not doubled).
fn traces_url(text: &str, base: bool) -> Result<Uri, String> {
    let uri: Uri = text.trim().parse().map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err("must start with http:// or https://".into());
    }
    let Some(authority) = uri.authority() else {
        return Err("must name a host".into());
    };
    if authority.as_str().contains('@') {
        // Not echoed: the user part may carry a password.
        return Err(
            "must not carry a user or password (give credentials as a header in \
             [telemetry.headers], e.g. Authorization = \"Basic ${OTLP_AUTH}\")"
                .into(),
        );
    }
    if uri.query().is_some() {
        return Err("must not have a query".into());
    }
    if !base {
        return Ok(uri);
    }
    let path = format!("{}{TRACES_PATH}", uri.path().trim_end_matches('/'));
    let mut parts = uri.into_parts();
    parts.path_and_query = Some(path.parse().map_err(|e| format!("bad path: {e}"))?);
    Uri::from_parts(parts).map_err(|e| format!("not a URL: {e}"))
}

/// Replaces each `${NAME}` in `value` by that environment variable; an unset one is an error
/// (a missing secret would otherwise be sent as an empty credential).
fn substitute(value: &str, env: Env<'_>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| "an unclosed ${ (write ${NAME})".to_string())?;
        let name = &after[..end];
        let valid =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!("${{{name}}} is not an environment variable name"));
        }
        let value = env(name).ok_or_else(|| format!("environment variable {name} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "LANGFUSE_AUTH" => Some("cGs6c2s=".into()),
            "TEAM" => Some("agents".into()),
            _ => None,
        }
    }

    #[test]
    fn base_endpoints_get_the_traces_path() {
        let url = |t| traces_url(t, true).map(|u| u.to_string());
        assert_eq!(
            url("http://collector:4318").as_deref(),
            Ok("http://collector:4318/v1/traces")
        );
        assert_eq!(
            url("https://cloud.langfuse.com/api/public/otel/").as_deref(),
            Ok("https://cloud.langfuse.com/api/public/otel/v1/traces")
        );
        assert_eq!(
            traces_url("http://c:4318/custom", false).map(|u| u.to_string()),
            Ok("http://c:4318/custom".into())
        );
        assert!(url("collector:4318").is_err());
        assert!(url("http://c:4318/?x=1").is_err());
    }

    #[test]
    fn header_values_name_environment_variables() {
        assert_eq!(
            substitute("Basic ${LANGFUSE_AUTH}", &env).as_deref(),
            Ok("Basic cGs6c2s=")
        );
        assert_eq!(
            substitute("${TEAM}-${TEAM}!", &env).as_deref(),
            Ok("agents-agents!")
        );
        assert_eq!(substitute("plain", &env).as_deref(), Ok("plain"));
        let unset = substitute("Bearer ${NOPE}", &env).expect_err("unset");
        assert!(unset.contains("NOPE is not set"), "{unset}");
        assert!(substitute("${A-B}", &env).is_err());
        assert!(substitute("${OPEN", &env).is_err());
    }

    #[test]
    fn debug_never_shows_header_values() {
        let config = TelemetryConfig {
            headers: vec![("authorization".into(), "Basic c2VjcmV0".into())],
            ..TelemetryConfig::default()
        };
        let text = format!("{config:?}");
        assert!(
            text.contains("authorization") && !text.contains("c2VjcmV0"),
            "{text}"
        );
    }
}
