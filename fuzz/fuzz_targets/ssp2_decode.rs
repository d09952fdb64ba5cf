//! cargo-fuzz target `ssp2_decode`: the body is shared with the stable driver of
//! the test suite (`tests/src/fuzz_bodies.rs`).
#![no_main]

#[allow(dead_code)]
#[path = "../../tests/src/fuzz_bodies.rs"]
mod bodies;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bodies::ssp2_decode(data);
});
