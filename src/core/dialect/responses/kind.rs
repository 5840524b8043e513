//! What an event's type says before its data is read: whether it can carry a
//! [`Signal`](crate::core::lifecycle::track::Signal), whether its `response` lists the output,
//! and whether the event may go unread at all ([`may_skip`]: the type on its `event:` line,
//! checked against the opening of its data).

/// Event types that end a response: open calls are closed just before them.
pub const TERMINAL_TYPES: &[&str] = &[COMPLETED, FAILED, INCOMPLETE, ERROR];
/// Event types whose `response` object lists the output so far.
pub const LISTS_OUTPUT: &[&str] = &[COMPLETED, FAILED, INCOMPLETE, IN_PROGRESS, QUEUED];
pub(super) const COMPLETED: &str = "response.completed";
pub(super) const FAILED: &str = "response.failed";
pub(super) const INCOMPLETE: &str = "response.incomplete";
pub(super) const ERROR: &str = "error";
pub(super) const IN_PROGRESS: &str = "response.in_progress";
pub(super) const QUEUED: &str = "response.queued";
pub(super) const CREATED: &str = "response.created";
pub(super) const ITEM_ADDED: &str = "response.output_item.added";
pub(super) const ITEM_DONE: &str = "response.output_item.done";
pub(super) const ARGUMENTS_DELTA: &str = "response.function_call_arguments.delta";
/// The type of most events of a stream.
pub(super) const TEXT_DELTA: &str = "response.output_text.delta";

/// Whether an event of this type (from its `event:` line) can carry a `Signal`; others need
/// not be parsed unless their `sequence_number` must change.
pub fn may_signal(event_type: &[u8]) -> bool {
    event_type == ITEM_ADDED.as_bytes()
        || event_type == CREATED.as_bytes()
        || event_type == ITEM_DONE.as_bytes()
        || event_type == ARGUMENTS_DELTA.as_bytes()
        || TERMINAL_TYPES.iter().any(|t| t.as_bytes() == event_type)
}

/// Whether an event of this type is read whatever its data says: it may carry a `Signal`
/// ([`may_signal`]) or lists the output ([`lists_output`]). Told apart by length first: a type
/// is compared with the one or two types of its length, not with each of the ten.
#[inline(always)]
pub(super) fn always_read(kind: &[u8]) -> bool {
    let is = |t: &str| kind == t.as_bytes();
    match kind.len() {
        5 => is(ERROR),
        15 => is(FAILED) || is(QUEUED),
        16 => is(CREATED),
        18 => is(COMPLETED),
        19 => is(INCOMPLETE),
        20 => is(IN_PROGRESS),
        25 => is(ITEM_DONE),
        26 => is(ITEM_ADDED),
        38 => is(ARGUMENTS_DELTA),
        _ => false,
    }
}

/// What [`may_skip`] knows of an event that may go unread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    /// The data has a `"sequence_number"` in it (found, not read): the event is kept, should an
    /// injection need the number after it.
    pub numbered: bool,
}

/// Whether an event may go unread: its `event:` line names a type that can carry no
/// `Signal` and lists no output, and its data says the same type. Clients read the data's
/// `type` (the line is only a hint to them): the line is trusted where the data opens with the
/// same `type` and names no other `"type"` (a later member would override it; a nested one, as
/// in a `content_part`, only costs a read). Every gateway seen writes its events so.
pub fn may_skip(line: &[u8], data: &[u8]) -> Option<Skip> {
    if always_read(line) {
        return None;
    }
    let end = leading_type_end_if(data, line)?;
    if has_quoted(&data[end..], TYPE_KEY) {
        return None;
    }
    // Most gateways write the number right after the type: no search for it then.
    let numbered =
        data[end..].starts_with(b",\"sequence_number\"") || has_quoted(data, SEQUENCE_NUMBER_KEY);
    Some(Skip { numbered })
}

/// A key as it is looked for, quoted, and the index of its rarest byte in an event's keys.
struct Key(&'static [u8], usize);

const TYPE_KEY: Key = Key(b"\"type\"", 2);
const SEQUENCE_NUMBER_KEY: Key = Key(b"\"sequence_number\"", 3);

/// Whether `data` has `key` (quoted) in it anywhere. Found by its rare byte (`y`, `q`): a
/// general substring search costs twice as much or more on a text delta (measured in
/// `benches/rewrite.rs`, and in callgrind: ~260 instructions for a `memmem::Finder` kept in a
/// static, ~70 for this).
fn has_quoted(data: &[u8], Key(key, rare): Key) -> bool {
    memchr::memchr_iter(key[rare], data).any(|i| i >= rare && data[i - rare..].starts_with(key))
}

/// The value of a `type` member that opens the object, when it is a plain string (as every
/// gateway seen writes its events). A later `type` member would override it: only a hint.
#[cfg(test)]
pub(super) fn leading_type(data: &[u8]) -> Option<&[u8]> {
    leading_type_end(data).map(|(kind, _)| kind)
}

/// [`leading_type`], and where its closing quote ends in `data`.
pub(super) fn leading_type_end(data: &[u8]) -> Option<(&[u8], usize)> {
    let rest = after_type_quote(data)?;
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    let start = data.len() - rest.len();
    (rest[end] == b'"').then(|| (&rest[..end], start + end + 1))
}

/// Where [`leading_type`] ends in `data` (as [`leading_type_end`]) when it is `kind`. The usual
/// type, which holds no quote or backslash, is compared where it lies: no search for its end.
pub(super) fn leading_type_end_if(data: &[u8], kind: &[u8]) -> Option<usize> {
    if kind != TEXT_DELTA.as_bytes() {
        let (leading, end) = leading_type_end(data)?;
        return (leading == kind).then_some(end);
    }
    let after = after_type_quote(data)?.strip_prefix(kind)?;
    (after.first() == Some(&b'"')).then(|| data.len() - after.len() + 1)
}

/// The bytes after the opening quote of a `type` string that opens `data`.
fn after_type_quote(data: &[u8]) -> Option<&[u8]> {
    let rest = data.strip_prefix(b"{\"type\":")?;
    rest.strip_prefix(b" ").unwrap_or(rest).strip_prefix(b"\"")
}

/// Whether an event of this type carries a `response` whose `output` lists the items so far.
pub fn lists_output(kind: &[u8]) -> bool {
    LISTS_OUTPUT.iter().any(|t| t.as_bytes() == kind)
}
