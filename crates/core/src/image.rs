//! image (being written).
