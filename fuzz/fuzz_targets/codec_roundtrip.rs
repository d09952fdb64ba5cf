//! cargo-fuzz target `codec_roundtrip`: the body is shared with the stable driver of
//! the test suite (`tests/src/fuzz_bodies.rs`).
#![no_main]

#[allow(dead_code)]
#[path = "../../tests/src/fuzz_bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bodies::codec_roundtrip(data);
});
