//! A hostile gateway: what one stream may hold across its open calls.
