//! A length or count that claims more than the input holds is refused
//! before anything is allocated: memory is bounded by the input, never by
//! what it claims. Alone in its binary so the counting allocator sees only
//! this test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::SeqCst);
        // SAFETY: forwards the caller's layout unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

fn largest_allocation_while(f: impl FnOnce()) -> usize {
    LARGEST.store(0, Ordering::SeqCst);
    f();
    LARGEST.load(Ordering::SeqCst)
}

#[test]
fn claims_of_two_to_the_32_items_allocate_nothing_large() {
    // 12 bytes: an SSG2 header whose table name claims u32::MAX bytes.
    let mut segment = b"SSG2".to_vec();
    segment.extend_from_slice(&[1, 0, 0, 0]);
    segment.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(segment.len(), 12);

    // A request whose PUSH_COMMIT claims u32::MAX operations in 9 bytes.
    let mut request = b"SSP2\x01\x00\x01\x00".to_vec();
    let header = [1, 0, 0, 0, b'c', 1, 0, 0, 0];
    request.push(0x01);
    request.extend_from_slice(&(header.len() as u32).to_le_bytes());
    request.extend_from_slice(&header);
    let mut commit = vec![1, 0, 0, 0, b'x'];
    commit.extend_from_slice(&u32::MAX.to_le_bytes());
    request.push(0x02);
    request.extend_from_slice(&(commit.len() as u32).to_le_bytes());
    request.extend_from_slice(&commit);
    request.extend_from_slice(&[0, 0, 0, 0, 0]);

    // A response whose COMMIT claims u32::MAX tables.
    let mut response = b"SSP2\x01\x00\x02\x00".to_vec();
    response.extend_from_slice(&[0x10, 2, 0, 0, 0, 0, 0]);
    let mut start = vec![1, 0, 0, 0, b's', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    start.truncate(15);
    response.push(0x12);
    response.extend_from_slice(&(start.len() as u32).to_le_bytes());
    response.extend_from_slice(&start);
    let mut payload = Vec::new();
    payload.extend_from_slice(&1i64.to_le_bytes());
    payload.extend_from_slice(&0i64.to_le_bytes());
    payload.extend_from_slice(&0u32.to_le_bytes());
    payload.extend_from_slice(&u32::MAX.to_le_bytes());
    response.push(0x13);
    response.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    response.extend_from_slice(&payload);
    response.extend_from_slice(&[0, 0, 0, 0, 0]);

    let mut outcomes = Vec::new();
    let largest = largest_allocation_while(|| {
        outcomes.push(sync_ssp2::decode_segment(&segment).map(|_| ()));
        outcomes.push(sync_ssp2::decode_request(&request).map(|_| ()));
        outcomes.push(sync_ssp2::decode_response(&response).map(|_| ()));
    });
    for outcome in &outcomes {
        assert!(
            matches!(
                outcome,
                Err(sync_ssp2::DecodeError::ClaimExceedsInput { .. })
            ),
            "{outcome:?}"
        );
    }
    assert!(
        largest < 4096,
        "decoding a tiny input allocated {largest} bytes at once"
    );
}
