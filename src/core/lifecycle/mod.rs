//! Tool calls, neutral of any wire format: the model ([`call`]: what a call is, how it ended,
//! the transitions reported), classification by name and the failure rules ([`classify`]), and
//! the per-stream tracker that guarantees exactly-once closing ([`track`]).

pub mod call;
pub mod classify;
pub mod track;

pub use call::{
    Call, Failure, Kind, MAX_ARGUMENTS_BYTES, Outcome, Phase, Progress, ToolOutput, Transition,
};
pub use classify::{Classifier, FailureRules, OutputFacts};
pub use track::{Deltas, NativeItem, Signal, Tracker, Untracked};
