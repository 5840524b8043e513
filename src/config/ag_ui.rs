//! The `[ag_ui]` section: the AG-UI endpoint on the proxy listener (docs/ag-ui.md). Without the
//! section the endpoint does not exist and its path is proxied like any other.
//!
//! ```toml
//! [ag_ui]
//! path = "/ag-ui"     # where the proxy listener answers AG-UI runs (POST)
//! model = "gpt-4.1"   # the model when the input's forwardedProps name none
//! ```

use serde::Deserialize;
use toml::Spanned;

use super::error::{ConfigError, Invalid};

pub const DEFAULT_PATH: &str = "/ag-ui";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgUiConfig {
    /// The request path of the endpoint (exact; no query).
    pub path: String,
    /// The model of a run whose `forwardedProps.model` is absent; without one such a run is
    /// refused with a 400.
    pub model: Option<String>,
}

impl Default for AgUiConfig {
    fn default() -> Self {
        AgUiConfig {
            path: DEFAULT_PATH.into(),
            model: None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawAgUi {
    path: Spanned<String>,
    model: Option<Spanned<String>>,
}

impl Default for RawAgUi {
    fn default() -> Self {
        RawAgUi {
            path: Spanned::new(0..0, DEFAULT_PATH.into()),
            model: None,
        }
    }
}

pub(super) fn ag_ui(
    raw: Option<&RawAgUi>,
    invalid: Invalid,
) -> Result<Option<AgUiConfig>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let path = raw.path.get_ref();
    let bad_byte = |b: u8| !b.is_ascii_graphic() || b == b'?' || b == b'#';
    if !path.starts_with('/') || path.bytes().any(bad_byte) {
        let message = "must be an absolute path (\"/ag-ui\"), without query or spaces".into();
        return Err(invalid("ag_ui.path".into(), raw.path.span(), message));
    }
    if let Some(model) = &raw.model
        && model.get_ref().trim().is_empty()
    {
        let message = "must not be empty (leave it out to require forwardedProps.model)".into();
        return Err(invalid("ag_ui.model".into(), model.span(), message));
    }
    Ok(Some(AgUiConfig {
        path: path.clone(),
        model: raw.model.as_ref().map(|m| m.get_ref().clone()),
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn the_section_turns_the_endpoint_on_with_its_defaults() {
        assert_eq!(Config::from_toml_str("").expect("valid").ag_ui, None);
        let config = Config::from_toml_str("[ag_ui]\n").expect("valid");
        let ag_ui = config.ag_ui.expect("valid");
        assert_eq!((ag_ui.path.as_str(), ag_ui.model), ("/ag-ui", None));
        let text = "[ag_ui]\npath = \"/agent\"\nmodel = \"gpt-4.1\"\n";
        let ag_ui = Config::from_toml_str(text)
            .expect("valid")
            .ag_ui
            .expect("valid");
        assert_eq!(
            (ag_ui.path.as_str(), ag_ui.model.as_deref()),
            ("/agent", Some("gpt-4.1"))
        );
    }

    #[test]
    fn a_bad_path_or_an_empty_model_is_refused_by_key_and_line() {
        for (text, key) in [
            ("[ag_ui]\npath = \"ag-ui\"\n", "ag_ui.path"),
            ("[ag_ui]\npath = \"/a?b=1\"\n", "ag_ui.path"),
            ("[ag_ui]\nmodel = \" \"\n", "ag_ui.model"),
        ] {
            let error = Config::from_toml_str(text)
                .expect_err("an error")
                .to_string();
            assert!(error.contains(key) && error.contains("line 2"), "{error}");
        }
        let error = Config::from_toml_str("[ag_ui]\nmodle = \"x\"\n").expect_err("an error");
        assert!(error.to_string().contains("modle"), "{error}");
    }
}
