//! Event profiles: each renders lifecycle [`Transition`]s as the SSE events one kind of client
//! expects. A profile is a small pure function of the transition and a [`Context`]; the rewriter
//! numbers and encodes what it returns. Several profiles may be active on one stream.

pub mod hosted;
pub mod openai;
pub mod stages;
mod text;
pub mod tool;
pub mod tool_call;

use std::time::SystemTime;

use serde::Deserialize;

use crate::config::{Config, ToolTemplates};
use crate::core::lifecycle::{Call, Kind, Transition};
use crate::core::sse::NewEvent;

/// A client contract for tool lifecycle events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum Profile {
    /// Gateway-run calls shown as OpenAI's hosted tools: one native item in place of the
    /// `function_call` and its output (docs/hosted.md). The default.
    #[serde(rename = "hosted")]
    Hosted,
    /// OpenAI's own hosted-tool events (`response.web_search_call.in_progress`, …) on a native
    /// companion item beside each `function_call`.
    #[serde(rename = "openai")]
    OpenAi,
    /// The same events on the `function_call` item itself, no companion (antwort spec 023).
    #[serde(rename = "openai-inline")]
    OpenAiInline,
    /// ToolBlock stages `start` → `streaming` → `running` → `end` (seed 001).
    #[serde(rename = "stages")]
    Stages,
    /// `tool_call_start` / `tool_call_end` / `tool_call_error` (seed 003).
    #[serde(rename = "tool_call")]
    ToolCall,
    /// `tool_start` / `tool_end` / `tool_error` with display strings and timings (seed 004).
    #[serde(rename = "tool")]
    Tool,
    /// With `hosted` or `openai`: `response.<kind>_call.progress` events for out-of-band
    /// progress.
    #[serde(rename = "progress")]
    Progress,
}

/// What a profile may look at besides the transition.
pub struct Context<'a> {
    pub config: &'a Config,
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
        call.rule.and_then(|r| self.config.tool_templates.get(r))
    }
}

impl Profile {
    pub const ALL: [Profile; 7] = [
        Profile::Hosted,
        Profile::OpenAi,
        Profile::OpenAiInline,
        Profile::Stages,
        Profile::ToolCall,
        Profile::Tool,
        Profile::Progress,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Profile::Hosted => "hosted",
            Profile::OpenAi => "openai",
            Profile::OpenAiInline => "openai-inline",
            Profile::Stages => "stages",
            Profile::ToolCall => "tool_call",
            Profile::Tool => "tool",
            Profile::Progress => "progress",
        }
    }

    pub fn from_name(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Appends the events for `transition` to `out`.
    pub fn render(self, transition: &Transition, context: &Context<'_>, out: &mut Vec<NewEvent>) {
        match self {
            Profile::Hosted => hosted::render(transition, context, out),
            Profile::OpenAi => openai::render(transition, context, out),
            Profile::OpenAiInline => openai::render_inline(transition, out),
            Profile::Stages => stages::render(transition, context, out),
            Profile::ToolCall => tool_call::render(transition, context, out),
            Profile::Tool => tool::render(transition, context, out),
            Profile::Progress => openai::render_progress(transition, context, out),
        }
    }

    /// Whether this profile shows calls of `kind` at all (a running call of such a kind keeps
    /// heartbeats going).
    pub fn shows(self, kind: Kind) -> bool {
        match self {
            Profile::Hosted => hosted::hosts(kind),
            Profile::OpenAi | Profile::OpenAiInline => openai::shows(kind),
            Profile::Stages | Profile::ToolCall | Profile::Tool => kind != Kind::Ignore,
            Profile::Progress => false,
        }
    }
}

/// Parses an `x-toolpulse-profiles` value (`a,b`), each name one of `allowed`.
pub fn parse_list(value: &str, allowed: &[Profile]) -> Result<Vec<Profile>, String> {
    let mut profiles = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let profile =
            Profile::from_name(name).ok_or_else(|| format!("unknown profile {name:?}"))?;
        if !allowed.contains(&profile) {
            return Err(format!("profile {name:?} is not allowed here"));
        }
        if !profiles.contains(&profile) {
            profiles.push(profile);
        }
    }
    if profiles.is_empty() {
        return Err("no profile named".into());
    }
    check_combination(&profiles)?;
    Ok(profiles)
}

/// The profiles that decide how a stream presents a call (at most one per stream).
pub const PRESENTATIONS: [Profile; 3] = [Profile::Hosted, Profile::OpenAi, Profile::OpenAiInline];

/// Profiles that cannot go together on one stream: the presentations would show each call
/// twice (a hosted item, a companion, the call item).
pub fn check_combination(profiles: &[Profile]) -> Result<(), String> {
    let shapes: Vec<_> = PRESENTATIONS
        .iter()
        .filter(|p| profiles.contains(p))
        .map(|p| format!("{:?}", p.name()))
        .collect();
    if shapes.len() > 1 {
        return Err(format!(
            "{} are shapes of the same calls: pick one",
            shapes.join(" and ")
        ));
    }
    let items = profiles.contains(&Profile::OpenAi) || profiles.contains(&Profile::Hosted);
    if profiles.contains(&Profile::Progress) && !items {
        return Err(
            "\"progress\" adds events to the items of \"hosted\" or \"openai\": name one".into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lists() {
        let all = Profile::ALL;
        assert_eq!(
            parse_list("tool, stages", &all),
            Ok(vec![Profile::Tool, Profile::Stages])
        );
        assert_eq!(parse_list("openai,openai", &all), Ok(vec![Profile::OpenAi]));
        assert!(parse_list("robot", &all).is_err());
        assert!(parse_list("tool", &[Profile::OpenAi]).is_err());
        assert!(parse_list(" , ", &all).is_err());
        assert!(parse_list("openai,openai-inline", &all).is_err());
        assert!(parse_list("hosted,openai", &all).is_err());
        assert!(parse_list("progress", &all).is_err());
        assert_eq!(
            parse_list("hosted,progress,tool", &all),
            Ok(vec![Profile::Hosted, Profile::Progress, Profile::Tool])
        );
        assert_eq!(
            parse_list("openai-inline", &all),
            Ok(vec![Profile::OpenAiInline])
        );
    }
}
