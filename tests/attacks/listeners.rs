//! Listeners: the send timeout, the sniff of the first byte, the admin cap, traceparent, request edges.
