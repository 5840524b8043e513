//! The profiles by name: which a stream renders (`[events] profiles`, `x-toolpulse-profiles`),
//! and which may go together.

use serde::Deserialize;

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
    /// The same events on the `function_call` item itself, no companion (the shape of antwort's own in-place events).
    #[serde(rename = "openai-inline")]
    OpenAiInline,
    /// ToolBlock stages `start` → `streaming` → `running` → `end` (the ToolBlock stage contract).
    #[serde(rename = "stages")]
    Stages,
    /// `tool_call_start` / `tool_call_end` / `tool_call_error` (the "tool invocation events" contract).
    #[serde(rename = "tool_call")]
    ToolCall,
    /// `tool_start` / `tool_end` / `tool_error` with display strings and timings (the "tool lifecycle events" contract).
    #[serde(rename = "tool")]
    Tool,
    /// With `hosted` or `openai`: `response.<kind>_call.progress` events for out-of-band
    /// progress.
    #[serde(rename = "progress")]
    Progress,
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
