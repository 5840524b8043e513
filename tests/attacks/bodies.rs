//! Request bodies: what a client can hold of the shared body budget.
