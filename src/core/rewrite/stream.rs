//! What the glue chose for one stream when it built its rewriter: the profiles it renders
//! (the settings' or a request's), the functions the client runs itself, the nonce of its
//! hosted ids, and its wall clock. Fixed once the stream is fed.

use std::time::{Instant, SystemTime};

use crate::core::lifecycle::{Deltas, Kind};
use crate::core::profiles::Profile;
use crate::core::settings::Settings;

#[derive(Debug, Default)]
pub struct Stream {
    pub profiles: Vec<Profile>,
    /// Tools the request declares as `function` tools: their calls are the client's, never
    /// hidden (profile `hosted`).
    pub client_functions: Vec<String>,
    /// Makes this stream's hosted item ids its own (given by the glue, random per stream).
    pub nonce: u64,
    /// A wall-clock time and the `now` it corresponds to, for profiles that stamp events.
    pub wall_clock: Option<(SystemTime, Instant)>,
    /// Tests only: every event read the whole way, the oracle of the quicker ways.
    #[cfg(test)]
    pub read_whole: bool,
}

impl Stream {
    /// The wall-clock time at `now`, when the stream has a clock.
    pub fn wall(&self, now: Instant) -> Option<SystemTime> {
        let (wall, at) = self.wall_clock?;
        Some(wall + now.saturating_duration_since(at))
    }

    /// Whether every event is read the whole way (a test's oracle); never outside tests.
    pub fn reads_whole(&self) -> bool {
        #[cfg(test)]
        return self.read_whole;
        #[cfg(not(test))]
        false
    }

    pub fn has(&self, profile: Profile) -> bool {
        self.profiles.contains(&profile)
    }

    /// Whether a profile shows calls of `kind` (a running one keeps heartbeats going).
    pub fn shows(&self, kind: Kind) -> bool {
        self.profiles.iter().any(|p| p.shows(kind))
    }

    /// What argument deltas must carry for the profiles to render them: `stages` shows the
    /// arguments so far (up to `max_payload_bytes`), `hosted` the chunk (of MCP calls), the
    /// others nothing.
    pub fn deltas(&self, settings: &Settings) -> Deltas {
        if self.has(Profile::Stages) {
            let max_bytes = settings.sanitizer.max_payload_bytes();
            Deltas::WithArguments { max_bytes }
        } else if self.has(Profile::Hosted) {
            Deltas::Chunks
        } else {
            Deltas::Off
        }
    }
}
