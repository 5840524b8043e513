//! The next turn: bounded mapped bodies, pairs bound to their caller, ids that cannot be mapped.
