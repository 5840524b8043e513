//! A server's SSE answer on its way to the gateway, sans-IO: each event is forwarded as its
//! exact bytes, except `notifications/progress` for toolpulse's own tokens, which are consumed.
//! Progress for followed calls goes to the hub; a response ends its call. Oversize, incomplete
//! and unreadable events, and events of other types, are forwarded untouched.
//!
//! A batch event (2025-03-26) is forwarded whole unless every message in it is consumed.

use bytes::{Bytes, BytesMut};

use super::calls::{Calls, Seen};
use super::jsonrpc::{self, Message};
use crate::core::sse::{Event, Item, Parser};

/// Events longer than this are forwarded raw without being read (a tool result may be larger;
/// its call is then released when the answer ends).
pub const MAX_EVENT_BYTES: usize = 1 << 20;

/// One answer stream: the SSE parser and the calls it reports on.
pub struct Answer {
    parser: Parser,
}

impl Default for Answer {
    fn default() -> Self {
        Answer {
            parser: Parser::new(MAX_EVENT_BYTES),
        }
    }
}

impl Answer {
    /// Reads a chunk; returns the bytes to forward (possibly none).
    pub fn feed(&mut self, chunk: &[u8], calls: &mut Calls) -> Bytes {
        self.parser.push(chunk);
        self.drain(calls)
    }

    /// The answer ended: whatever is left, untouched.
    pub fn finish(&mut self, calls: &mut Calls) -> Bytes {
        self.parser.finish();
        self.drain(calls)
    }

    fn drain(&mut self, calls: &mut Calls) -> Bytes {
        let mut out = BytesMut::new();
        while let Some(item) = self.parser.next_item() {
            match item {
                Item::Event(event) if consumed(&event, calls) => {}
                Item::Event(event) => out.extend_from_slice(event.raw()),
                Item::Oversize(bytes) | Item::Incomplete(bytes) => out.extend_from_slice(&bytes),
            }
        }
        out.freeze()
    }
}

/// Reports the event's messages; true when it is to be dropped.
fn consumed(event: &Event, calls: &mut Calls) -> bool {
    if !matches!(event.event_type(), None | Some(b"message")) {
        return false;
    }
    let Some(data) = event.data() else {
        return false;
    };
    // Most events are neither progress nor the response to a followed call: skip parsing them.
    let progress = memchr::memmem::find(&data, b"notifications/progress").is_some();
    if !progress && calls.is_empty() {
        return false;
    }
    let messages = jsonrpc::read_messages(&data);
    let mut consumed = !messages.is_empty();
    for message in messages {
        match message {
            Message::Progress { token, progress } => {
                consumed &= calls.progress(&token, progress) == Seen::Consumed;
            }
            Message::Response { id } => {
                calls.answered(&id);
                consumed = false;
            }
            Message::Other => consumed = false,
        }
    }
    consumed
}
