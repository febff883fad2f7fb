//! requirements (being written).
