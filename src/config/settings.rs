//! The config builds the settings the core takes: what its rewriters read, as one shared value.

use std::sync::Arc;

use super::Config;
use crate::core::settings::Settings;

impl Config {
    /// The settings of the core, for streams that start from this config.
    pub fn settings(&self) -> Arc<Settings> {
        Arc::new(Settings {
            limits: self.limits,
            heartbeat: self.heartbeat,
            profiles: self.events.profiles.clone(),
            classifier: self.classifier.clone(),
            failure: self.failure.clone(),
            sanitizer: self.sanitizer.clone(),
            templates: self.tool_templates.clone(),
            key: self.hosted.key.clone(),
        })
    }
}
