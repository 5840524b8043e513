//! The run's text and reasoning messages: at most one of each open at a time, each opened,
//! given its deltas and closed as the gateway's items say, all closed before the run ends.

use super::event::AgUiEvent;
use super::ids::Ids;
use super::read::Meaning;

/// The open reasoning item (its id as shown), and its open part (a summary or the reasoning
/// text): the part's index and its id as shown.
#[derive(Debug)]
struct Reasoning {
    item: String,
    part: Option<(u64, String)>,
}

/// The open messages.
#[derive(Debug, Default)]
pub struct Messages {
    text: Option<String>,
    /// The open text message got a delta (else its done item's text is its content).
    text_streamed: bool,
    reasoning: Option<Reasoning>,
}

type Emit<'e> = &'e mut dyn FnMut(&AgUiEvent<'_>);

impl Messages {
    /// What `meaning` makes of the messages (text, reasoning; the response's end closes them).
    pub fn on(&mut self, meaning: &Meaning<'_>, ids: &mut Ids, emit: Emit<'_>) {
        match meaning {
            Meaning::ItemAdded { kind, id } => match &**kind {
                "message" => {
                    self.close_text(emit);
                    self.open_text(ids.unique(id.as_deref(), "msg"), emit);
                }
                "reasoning" => {
                    self.close_reasoning(emit);
                    self.open_reasoning(ids.unique(id.as_deref(), "reasoning"), emit);
                }
                _ => {}
            },
            Meaning::TextDelta { item_id, delta } => {
                if self.text.is_none() {
                    self.open_text(ids.unique(item_id.as_deref(), "msg"), emit);
                }
                if let Some(id) = &self.text
                    && !delta.is_empty()
                {
                    emit(&AgUiEvent::TextMessageContent {
                        message_id: id,
                        delta,
                    });
                    self.text_streamed = true;
                }
            }
            Meaning::ItemDone { kind, text, .. } => match &**kind {
                "message" => {
                    // A gateway that streamed no delta has the text in the done item only.
                    if let Some(id) = &self.text
                        && !self.text_streamed
                        && !text.is_empty()
                    {
                        emit(&AgUiEvent::TextMessageContent {
                            message_id: id,
                            delta: text,
                        });
                    }
                    self.close_text(emit);
                }
                "reasoning" => self.close_reasoning(emit),
                _ => {}
            },
            Meaning::ReasoningDelta {
                item_id,
                part,
                delta,
            } => {
                if self.reasoning.is_none() {
                    self.open_reasoning(ids.unique(item_id.as_deref(), "reasoning"), emit);
                }
                let Some(reasoning) = &mut self.reasoning else {
                    return;
                };
                let open = match reasoning.part.take() {
                    Some((index, open)) if index == *part => (index, open),
                    other => {
                        if let Some((_, open)) = other {
                            emit(&AgUiEvent::ReasoningMessageEnd { message_id: &open });
                        }
                        let wanted = format!("{}-{part}", reasoning.item);
                        let id = ids.unique(Some(&wanted), "reasoning");
                        emit(&AgUiEvent::ReasoningMessageStart {
                            message_id: &id,
                            role: "reasoning",
                        });
                        (*part, id)
                    }
                };
                if !delta.is_empty() {
                    emit(&AgUiEvent::ReasoningMessageContent {
                        message_id: &open.1,
                        delta,
                    });
                }
                reasoning.part = Some(open);
            }
            Meaning::ReasoningPartDone { .. } => {
                if let Some(reasoning) = &mut self.reasoning
                    && let Some((_, part)) = reasoning.part.take()
                {
                    emit(&AgUiEvent::ReasoningMessageEnd { message_id: &part });
                }
            }
            Meaning::Completed | Meaning::Failed { .. } => self.close(emit),
            Meaning::Other => {}
        }
    }

    /// Closes the open messages.
    pub fn close(&mut self, emit: Emit<'_>) {
        self.close_text(emit);
        self.close_reasoning(emit);
    }

    fn open_text(&mut self, id: String, emit: Emit<'_>) {
        emit(&AgUiEvent::TextMessageStart {
            message_id: &id,
            role: "assistant",
        });
        self.text = Some(id);
        self.text_streamed = false;
    }

    fn close_text(&mut self, emit: Emit<'_>) {
        if let Some(id) = self.text.take() {
            emit(&AgUiEvent::TextMessageEnd { message_id: &id });
        }
    }

    fn open_reasoning(&mut self, id: String, emit: Emit<'_>) {
        emit(&AgUiEvent::ReasoningStart { message_id: &id });
        self.reasoning = Some(Reasoning {
            item: id,
            part: None,
        });
    }

    fn close_reasoning(&mut self, emit: Emit<'_>) {
        if let Some(reasoning) = self.reasoning.take() {
            if let Some((_, part)) = &reasoning.part {
                emit(&AgUiEvent::ReasoningMessageEnd { message_id: part });
            }
            emit(&AgUiEvent::ReasoningEnd {
                message_id: &reasoning.item,
            });
        }
    }
}
