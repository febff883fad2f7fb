//! accelerators (being written).
