//! The `Date` of the responses toolpulse's HTTP/1 server writes (RFC 9110 §6.6.1): read from
//! the clock and formatted once a second per thread, as hyper does, and handed to the codec,
//! which reads no clock.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Calls `f` with the current `Date` value (RFC 9110 §5.6.7).
pub fn with_date<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    thread_local! {
        static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|date| {
        let mut date = date.borrow_mut();
        if date.0 != second {
            *date = (second, httpdate::fmt_http_date(now));
        }
        f(date.1.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::with_date;

    #[test]
    fn an_http_date() {
        let date = with_date(|date| String::from_utf8(date.to_vec()).expect("ASCII"));
        assert!(httpdate::parse_http_date(&date).is_ok(), "{date}");
        assert!(date.ends_with(" GMT"), "{date}");
    }
}
