//! Test data that deflate cannot shrink, shared by the packaging tests.

/// `len` reproducible pseudo-random bytes (xorshift64).
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
