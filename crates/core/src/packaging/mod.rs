//! packaging (being written).
