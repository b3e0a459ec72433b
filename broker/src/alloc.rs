//! The broker's global allocator: the system allocator, except that very large allocations are
//! reserved with `mmap(MAP_NORESERVE)` and only backed by memory as they are touched.
//!
//! Why: the generated Kafka decoders (`kafka-protocol`) size a `Vec` from an array length read
//! off the wire before reading the elements. A 20-byte request claiming 2^31 elements would ask
//! for hundreds of GiB; the system allocator refuses and the process aborts. Reserved lazily,
//! the same request costs address space only, the decoder then runs out of input and fails,
//! and the connection is closed with a log line. Legitimately large buffers (a 100 MiB request
//! frame) behave as before: pages are committed as they are written.
//! Invariant: allocations at or above `LARGE_ALLOCATION_BYTES_MIN` with alignment up to a page
//! are mmap-backed and freed with munmap; everything else goes to `System`.

use std::alloc::{GlobalAlloc, Layout, System};

/// Below this, glibc serves allocations from its heap instead of a fresh mmap each time.
pub const MMAP_THRESHOLD_BYTES: i32 = 32 << 20;
/// Free heap memory glibc keeps instead of returning it to the kernel.
pub const TRIM_THRESHOLD_BYTES: i32 = 256 << 20;

/// Tunes glibc's malloc for the broker's pattern of request-sized buffers (about 1 MiB, allocated
/// and freed per request and per cached batch): served from the heap and kept when freed, so
/// the data path does not pay a page fault per 4 KiB and a TLB shootdown per buffer. Call once,
/// before any thread starts. No effect where the C library is not glibc.
pub fn tune_system_allocator() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only changes allocator parameters; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
    }
}

/// Allocations this large (and page-aligned or less) are reserved lazily.
pub const LARGE_ALLOCATION_BYTES_MIN: usize = 64 << 20;
const PAGE_BYTES: usize = 4096;

pub struct LazyLargeAllocator;

fn is_large(layout: &Layout) -> bool {
    layout.size() >= LARGE_ALLOCATION_BYTES_MIN && layout.align() <= PAGE_BYTES
}

// SAFETY: every pointer handed out is either from `System` (and returned to it) or from an
// anonymous private mapping of exactly `layout.size()` bytes (returned with munmap of the same
// size); `is_large` depends only on the layout, so alloc and dealloc always agree.
unsafe impl GlobalAlloc for LazyLargeAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            // SAFETY: a fresh anonymous mapping; no existing memory is affected.
            let pointer = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    layout.size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if pointer == libc::MAP_FAILED {
                std::ptr::null_mut()
            } else {
                pointer.cast()
            }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(&layout) {
            // SAFETY: anonymous mappings are zero-filled.
            unsafe { self.alloc(layout) }
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        if is_large(&layout) {
            // SAFETY: `pointer` came from our mmap of `layout.size()` bytes.
            unsafe {
                libc::munmap(pointer.cast(), layout.size());
            }
        } else {
            // SAFETY: `pointer` came from `System` with this layout.
            unsafe { System.dealloc(pointer, layout) }
        }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` is valid for `layout.align()`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !is_large(&layout) && !is_large(&new_layout) {
            // SAFETY: both sides small: System owns the block.
            return unsafe { System.realloc(pointer, layout, new_size) };
        }
        // SAFETY: allocate, copy the overlapping prefix, free the old block.
        unsafe {
            let fresh = self.alloc(new_layout);
            if !fresh.is_null() {
                std::ptr::copy_nonoverlapping(pointer, fresh, layout.size().min(new_size));
                self.dealloc(pointer, layout);
            }
            fresh
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_reservation_succeeds_and_small_ones_round_trip() {
        let allocator = LazyLargeAllocator;
        // 256 GiB: far beyond this machine's memory, fine as a lazy reservation.
        let huge = Layout::from_size_align(256 << 30, 8).unwrap();
        // SAFETY: paired alloc/dealloc with the same layout.
        unsafe {
            let pointer = allocator.alloc(huge);
            assert!(!pointer.is_null());
            *pointer = 7;
            assert_eq!(*pointer, 7);
            allocator.dealloc(pointer, huge);
            let small = Layout::from_size_align(100, 8).unwrap();
            let pointer = allocator.alloc(small);
            assert!(!pointer.is_null());
            let grown = allocator.realloc(pointer, small, 128 << 20);
            assert!(!grown.is_null());
            allocator.dealloc(grown, Layout::from_size_align(128 << 20, 8).unwrap());
        }
    }
}
