//! The ids a run gives its messages and tool calls: the gateway's own (an item's id, a call's
//! `call_id`) where they are unique in the run, else one made up. AG-UI clients key messages
//! and tool calls by id for the whole run, so a gateway that repeats one (several responses in
//! one stream, a broken upstream) must not make two things one.
//!
//! Memory: at most [`MAX_IDS`] ids of at most [`MAX_ID_BYTES`] are remembered; past either, an
//! id is made up (`<prefix>-<run id>-<n>`).

use std::collections::HashSet;

/// Ids remembered per run.
pub const MAX_IDS: usize = 1024;
/// A longer id of the gateway's is not used.
pub const MAX_ID_BYTES: usize = 256;

#[derive(Debug)]
pub struct Ids {
    run_id: String,
    used: HashSet<String>,
    made: u64,
}

impl Ids {
    pub fn new(run_id: &str) -> Self {
        Ids {
            run_id: run_id.chars().take(64).collect(),
            used: HashSet::new(),
            made: 0,
        }
    }

    /// `wanted` if it is a usable id not used yet in the run, else a new one.
    pub fn unique(&mut self, wanted: Option<&str>, prefix: &str) -> String {
        if let Some(wanted) = wanted
            && !wanted.is_empty()
            && wanted.len() <= MAX_ID_BYTES
            && self.used.len() < MAX_IDS
            && !self.used.contains(wanted)
        {
            self.used.insert(wanted.to_string());
            return wanted.to_string();
        }
        loop {
            self.made += 1;
            let made = format!("{prefix}-{}-{}", self.run_id, self.made);
            if !self.used.contains(&made) {
                if self.used.len() < MAX_IDS {
                    self.used.insert(made.clone());
                }
                return made;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_the_gateways_once_then_made_up() {
        let mut ids = Ids::new("r1");
        assert_eq!(ids.unique(Some("msg_1"), "msg"), "msg_1");
        assert_eq!(ids.unique(Some("msg_1"), "msg"), "msg-r1-1");
        assert_eq!(ids.unique(None, "msg"), "msg-r1-2");
        assert_eq!(
            ids.unique(Some(&"x".repeat(MAX_ID_BYTES + 1)), "msg"),
            "msg-r1-3"
        );
        assert_eq!(ids.unique(Some("msg-r1-5"), "msg"), "msg-r1-5");
        assert_eq!(ids.unique(None, "msg"), "msg-r1-4");
        assert_eq!(ids.unique(None, "msg"), "msg-r1-6");
        assert_eq!(ids.unique(Some("msg-r1-2"), "msg"), "msg-r1-7");
    }
}
