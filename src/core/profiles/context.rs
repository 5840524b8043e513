//! What a profile may look at besides the transition it renders.

use std::time::SystemTime;

use crate::core::lifecycle::Call;
use crate::core::settings::{Settings, ToolTemplates};

pub struct Context<'a> {
    pub settings: &'a Settings,
    /// Wall-clock time of the transition, when the rewriter was given a clock.
    pub wall: Option<SystemTime>,
    /// Whether calls are shown as hosted items (so progress names those).
    pub hosted: bool,
    /// The stream's nonce in hosted item ids.
    pub nonce: u64,
}

impl Context<'_> {
    /// The `[[tools]]` templates of the rule that classified `call`.
    pub fn templates(&self, call: &Call) -> Option<&ToolTemplates> {
        call.rule.and_then(|r| self.settings.templates.get(r))
    }
}
