//! status (being written).
