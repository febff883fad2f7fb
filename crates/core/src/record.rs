//! record (being written).
