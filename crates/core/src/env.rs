//! env (being written).
