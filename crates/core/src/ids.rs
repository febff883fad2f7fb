//! ids (being written).
