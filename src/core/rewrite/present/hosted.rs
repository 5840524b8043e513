//! Presentation `hosted`: a call the gateway runs is shown as a hosted item at its
//! `function_call`'s index, and the upstream's items of it (the `function_call`, its
//! `function_call_output`, the gateway's own hosted item for it) are dropped.
//!
//! Whether a call id is hosted is decided once per response, at its first sighting: every
//! later item of a hosted call id (a call item seen again, its output) is hidden too, and a call
//! id first seen as the client's is never hosted. An upstream item folded into a hosted item
//! gives up its index, so that later items move down; one that cannot (a later index was
//! already used) is shown as it is. The gateway's items of a hosted call are kept, and handed
//! to the next-turn store as a pair when its output arrives ([`Observation::HostedPair`]).

use std::borrow::Cow;
use std::sync::Arc;

use super::hosted_items::HostedItems;
use super::parts::{Parts, Step};
use super::shown::Shown;
use crate::core::lifecycle::track::MAX_ID_BYTES;
use crate::core::lifecycle::{Call, NativeItem, Phase, Signal};
use crate::core::profiles::hosted::hosts;
use crate::core::rewrite::decision::{Inject, Verdict};
use crate::core::rewrite::report::Observation;
use crate::core::rewrite::splice::Edit;
use crate::core::rules::Rule;

/// The hosted items of the current response.
#[derive(Debug, Default)]
pub struct Hosted {
    pub items: HostedItems,
    /// Each hosted item in its latest state, for the events that list the response's output.
    pub shown: Shown,
}

/// What became of a hosted item of the gateway's own.
enum Fold {
    /// No call shown as a hosted item is its: it passes as it is.
    NotOurs,
    /// Folded into a call's item; `output`: it is done, its state the output of that call;
    /// `hidden`: its events are dropped (else it keeps an index it could not give up).
    Folded {
        output: Option<String>,
        hidden: bool,
    },
}

impl Hosted {
    /// What becomes of an upstream event that was read: its calls are tracked, calls that start
    /// are shown as hosted items, and the events of hidden items are dropped.
    pub fn decide(&mut self, step: Step<'_>, parts: &mut Parts<'_>) -> Verdict {
        let Step {
            signal,
            item,
            index,
            item_id,
        } = step;
        // An event naming a hidden item by id alone (no `output_index`: a broken upstream).
        let hidden_by_id = index.is_none()
            && item_id
                .as_deref()
                .is_some_and(|id| self.items.hides_item(id));
        let hidden = |items: &HostedItems| hidden_by_id || index.is_some_and(|i| items.hides(i));
        let Some(signal) = signal else {
            return match hidden(&self.items) {
                true => Verdict::Drop,
                false => Verdict::Forward(Inject::After),
            };
        };
        let signal = match signal {
            Signal::Native(native) => match self.fold_native(&native, item, index, parts) {
                Fold::NotOurs => Signal::Native(native),
                Fold::Folded { output, hidden } => {
                    if let Some(call_id) = output {
                        let call_id = Cow::Owned(call_id);
                        parts.track(Signal::Output {
                            call_id,
                            facts: native.facts,
                        });
                    }
                    return match hidden {
                        true => Verdict::Drop,
                        false => Verdict::Forward(Inject::Before),
                    };
                }
            },
            other => other,
        };
        let before = signal.injects_before();
        let sighted = match &signal {
            Signal::CallAdded(item) | Signal::CallDone(item) => Some(item.call_id.clone()),
            Signal::Output { call_id, .. } => Some(call_id.clone()),
            _ => None,
        };
        let hidden_item = self.before_signal(&signal, item, index, parts);
        parts.track(signal);
        self.open(parts);
        if let Some(call_id) = sighted {
            self.items.see(&call_id);
        }
        if hidden_item || hidden(&self.items) {
            return Verdict::Drop;
        }
        Verdict::Forward(match before {
            true => Inject::Before,
            false => Inject::After,
        })
    }

    /// Before a signal is tracked: the gateway's items of a hosted call are kept for the store,
    /// and its output gives up its index. Returns whether the event is dropped whatever its
    /// index says.
    fn before_signal(
        &mut self,
        signal: &Signal<'_>,
        item_json: Option<&str>,
        index: Option<u64>,
        parts: &mut Parts<'_>,
    ) -> bool {
        match signal {
            Signal::CallAdded(item) | Signal::CallDone(item)
                if self.items.contains(&item.call_id) =>
            {
                if matches!(signal, Signal::CallDone(_))
                    && let Some(json) = item_json
                {
                    self.items.keep_call_item(&item.call_id, json);
                }
                if let Some(i) = index {
                    self.items.hide(i);
                }
                true
            }
            Signal::Output { call_id, .. } if self.items.contains(call_id) => {
                if let Some(call) = parts.tracker.call(call_id)
                    && let (Some(id), Some(output_item)) = (call.hosted_id.clone(), item_json)
                {
                    // The first sight of the output: the pair goes to the store (the call item as
                    // the gateway sent it done, its arguments put back from the call's; as the
                    // call shows it when that was missed). Arguments not held (over a limit)
                    // cannot be given back: no pair, rather than a call with other arguments.
                    let shell = self.items.take_call_item(call_id);
                    let call_item = match shell {
                        _ if call.arguments_truncated => None,
                        Some(shell) => Some(shell.with_arguments(&call.arguments)),
                        None => Some(
                            serde_json::json!({
                                "type": "function_call", "call_id": call.call_id,
                                "name": call.name, "arguments": call.arguments,
                                "status": "completed",
                            })
                            .to_string(),
                        ),
                    };
                    match call_item {
                        Some(call_item) => parts.report.observe(Observation::HostedPair {
                            id: id.to_string(),
                            call_item,
                            output_item: output_item.to_string(),
                        }),
                        None => parts.report.stats.pairs_unkept += 1,
                    }
                }
                self.give_up_index(index, parts)
            }
            // A delta without an index names its item only by id.
            Signal::ArgumentsDelta { item_id, .. } if index.is_none() => {
                let open = parts.tracker.open_calls();
                let call = open.iter().find(|c| c.item_id == *item_id);
                call.is_some_and(|c| self.items.contains(&c.call_id))
            }
            _ => false,
        }
    }

    /// A hosted item the gateway streams itself for a call already shown as one (LiteLLM's
    /// `mcp_call` after the model's `function_call`: same type, same name, same arguments once
    /// both have them) is folded into toolpulse's: its events are dropped, its index given up,
    /// and its final state is the call's output (the `[failure]` rules apply). Matched at its
    /// first sighting to the oldest such call without one.
    fn fold_native(
        &mut self,
        native: &NativeItem<'_>,
        item_json: Option<&str>,
        index: Option<u64>,
        parts: &mut Parts<'_>,
    ) -> Fold {
        let (call_id, hidden) = match self.items.native_call(&native.item_id) {
            // Seen before: its index was given up then, or it is shown.
            Some(call_id) => (
                call_id.to_string(),
                index.is_none_or(|i| self.items.hides(i)),
            ),
            None => {
                let items = &self.items;
                // Only into a call shown as a hosted item now (not one the gateway opened
                // again under a call id whose hosted item is done).
                let Some(call) = parts.tracker.open_calls().iter().find(|call| {
                    call.hosted_id.is_some()
                        && items.contains(&call.call_id)
                        && !items.has_native(&call.call_id)
                        && is_native_of(native, call)
                }) else {
                    return Fold::NotOurs;
                };
                let call_id = call.call_id.clone();
                self.items.fold_native(&native.item_id, &call_id);
                let hidden = self.give_up_index(index, parts);
                if hidden {
                    self.items.hide_item(&native.item_id);
                }
                (call_id, hidden)
            }
        };
        if !native.done {
            return Fold::Folded {
                output: None,
                hidden,
            };
        }
        if let Some(call) = parts.tracker.call(&call_id)
            && let (Some(id), Some(item)) = (call.hosted_id.clone(), item_json)
        {
            // The next turn gives the gateway back its own item.
            parts.report.observe(Observation::HostedPair {
                id: id.to_string(),
                call_item: item.to_string(),
                output_item: String::new(),
            });
        }
        Fold::Folded {
            output: Some(call_id),
            hidden,
        }
    }

    /// An upstream item folded into a hosted item (a hosted call's output, the gateway's own
    /// hosted item) gives up its index, so that later items move down; returns whether its
    /// events are dropped. An index a later one was already seen above cannot be given up
    /// without moving indices the client has: the item is then shown as it is.
    fn give_up_index(&mut self, index: Option<u64>, parts: &mut Parts<'_>) -> bool {
        match index {
            Some(i) if self.items.hides(i) => true,
            Some(i) if parts.indices.remove(i) => {
                self.items.hide(i);
                true
            }
            Some(_) => {
                parts.report.stats.violations.count(Rule::HostedOutputIndex);
                false
            }
            None => true,
        }
    }

    /// Every call that just started and is the gateway's to run is shown as a hosted item at
    /// its `function_call`'s index, whose events are dropped from now on.
    fn open(&mut self, parts: &mut Parts<'_>) {
        for i in 0..parts.transitions.len() {
            let transition = &parts.transitions[i];
            let call = &transition.call;
            let eligible = transition.phase == Phase::Started
                && call.companion.is_none()
                && hosts(call.kind)
                && call.call_id.len() <= MAX_ID_BYTES
                && !parts.stream.client_functions.contains(&call.name)
                && !self.items.was_seen(&call.call_id)
                && !self.items.is_full();
            let Some(upstream) = call.output_index.filter(|_| eligible) else {
                continue;
            };
            let index = parts.indices.map(upstream);
            let call_id = call.call_id.clone();
            let id: Arc<str> = parts.settings.key.id_for(&call_id, parts.nonce).into();
            self.items.open(&call_id, &call.item_id, upstream);
            parts.tracker.set_hosted(&call_id, index, &id);
            // The call's later transitions (already queued with it) show the item too.
            for later in &mut parts.transitions[i..] {
                if later.call.call_id == call_id {
                    later.call.companion = Some(index);
                    later.call.hosted_id = Some(id.clone());
                }
            }
        }
    }

    /// The edit of an event's data that lists the response's output: hosted items in their
    /// calls' places.
    pub fn listing(&self, data: &[u8], edits: &mut Vec<Edit>) {
        if self.items.is_active() {
            edits.extend(self.items.listing(data, &self.shown));
        }
    }
}

/// Whether the gateway's hosted item `native` is the one of `call`: the same kind, the same
/// name (when it has one), the same arguments (when both have them; as JSON values).
fn is_native_of(native: &NativeItem<'_>, call: &Call) -> bool {
    let same_arguments = match native.arguments.as_deref() {
        None | Some("") => true,
        Some(args) if call.arguments.is_empty() || args == call.arguments => true,
        Some(args) => {
            let value = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
            value(args).is_some_and(|a| Some(a) == value(&call.arguments))
        }
    };
    native.kind == call.kind
        && native.name.as_deref().is_none_or(|name| name == call.name)
        && same_arguments
}
