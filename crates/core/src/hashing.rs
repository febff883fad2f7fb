//! hashing (being written).
