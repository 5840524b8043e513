//! Numbering across the output: consecutive where the input was.

use serde_json::{Map, Value};
use toolpulse::core::sse::Event;

use super::{json_of, number_of};

/// Numbering across the output: consecutive where the input was.
pub struct Numbers {
    input_dense: bool,
    last_in: Option<u64>,
    pub last_out: Option<u64>,
    /// Injected events went back in number: they were injected before an upstream event that
    /// starts a new run (another response on the same connection), which must come next.
    pub awaiting_new_run: bool,
    /// An event over the size limit went by unread: its number is unknown, so numbering is
    /// dense again only from the next upstream event read (injected ones may leave a gap).
    after_unread: bool,
}

impl Numbers {
    pub fn new(inputs: &[Event]) -> Self {
        let numbers: Vec<u64> = inputs
            .iter()
            .filter_map(|e| json_of(e).as_ref().and_then(number_of))
            .collect();
        let starts_numbered = inputs
            .first()
            .and_then(json_of)
            .is_some_and(|j| number_of(&j).is_some());
        let input_dense =
            starts_numbered && numbers.windows(2).all(|w| w[1] == w[0] + 1 || w[1] <= w[0]);
        Numbers {
            input_dense,
            last_in: None,
            last_out: None,
            awaiting_new_run: false,
            after_unread: false,
        }
    }

    pub fn upstream(&mut self, inp: &Event, out: &Event) -> Result<(), String> {
        let (Some(n_in), Some(n_out)) = (
            json_of(inp).as_ref().and_then(number_of),
            json_of(out).as_ref().and_then(number_of),
        ) else {
            return Ok(());
        };
        let new_run = self.last_in.is_some_and(|prev| n_in <= prev);
        self.last_in = Some(n_in);
        if std::mem::take(&mut self.after_unread) {
            self.awaiting_new_run = false;
            self.last_out = Some(n_out);
            return Ok(());
        }
        if std::mem::take(&mut self.awaiting_new_run) {
            if !new_run {
                return Err(format!(
                    "injected numbers went back to {:?}, but upstream {n_in} starts no new run",
                    self.last_out
                ));
            }
            // The events injected before it opened the run: it follows them.
            return self.next(n_out);
        }
        if new_run {
            self.last_out = Some(n_out);
            return Ok(());
        }
        self.next(n_out)
    }

    pub fn restart(&mut self) {
        self.last_out = None;
        self.after_unread = true;
    }

    pub fn injected(&mut self, json: &Map<String, Value>) -> Result<(), String> {
        match number_of(json) {
            Some(_) if self.after_unread => Ok(()),
            Some(n) if self.last_out.is_some_and(|prev| n <= prev) && !self.awaiting_new_run => {
                self.awaiting_new_run = true;
                self.last_out = Some(n);
                Ok(())
            }
            Some(n) => self.next(n),
            // After an event forwarded unread (over the size limit), no number is known until
            // the next one read: injected events may go unnumbered until then.
            None if self.input_dense && !self.after_unread => {
                Err("injected event without a number".into())
            }
            None => Ok(()),
        }
    }

    fn next(&mut self, n: u64) -> Result<(), String> {
        if let Some(prev) = self.last_out {
            if self.input_dense && n != prev + 1 {
                return Err(format!("sequence_number {n} follows {prev}: not dense"));
            }
            if n <= prev {
                return Err(format!(
                    "sequence_number {n} follows {prev}: not increasing"
                ));
            }
        }
        self.last_out = Some(n);
        Ok(())
    }
}
