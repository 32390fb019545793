//! bench/rust/src/bin/jemalloc.rs: the workloads under Debian's jemalloc
//! 5.3 (libjemalloc.so.2, options from MALLOC_CONF) through a GlobalAlloc
//! over mallocx/rallocx/sdallocx with the alignment flag when needed:
//! what tikv-jemallocator does, written here because crates.io is not
//! reachable.  Debian's build is unprefixed: it also serves C code's
//! malloc in this process (tikv-jemallocator's default is prefixed).
use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::{c_int, c_void};

#[link(name = "jemalloc")]
extern "C" {
    fn mallocx(size: usize, flags: c_int) -> *mut c_void;
    fn rallocx(ptr: *mut c_void, size: usize, flags: c_int) -> *mut c_void;
    fn sdallocx(ptr: *mut c_void, size: usize, flags: c_int);
}

const MALLOCX_ZERO: c_int = 0x40;

fn flags(align: usize, size: usize) -> c_int {
    if align <= 16 && align <= size {
        0
    } else {
        align.trailing_zeros() as c_int
    }
}

struct Jemalloc;

unsafe impl GlobalAlloc for Jemalloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        mallocx(l.size(), flags(l.align(), l.size())).cast()
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        mallocx(l.size(), flags(l.align(), l.size()) | MALLOCX_ZERO).cast()
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        sdallocx(p.cast(), l.size(), flags(l.align(), l.size()))
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        rallocx(p.cast(), n, flags(l.align(), n)).cast()
    }
}

#[global_allocator]
static ALLOC: Jemalloc = Jemalloc;

fn main() {
    malloc_prof_bench::main();
}
