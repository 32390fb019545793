//! lib.rs: the `malloc_prof` crate: libmalloc_prof, a jemalloc-compatible
//! allocator with a built-in heap profiler, as Rust's global allocator,
//! with the profiler's controls (what `tikv-jemallocator` and
//! `jemalloc_pprof` give together, and the pprof writer, dumps to a
//! descriptor and the scrape endpoint of the library).
//!
//! # Set-up
//!
//! ```toml
//! [dependencies]
//! malloc-prof = { path = "path/to/malloc_prof/bindings/rust" }
//! ```
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: malloc_prof::MallocProf = malloc_prof::MallocProf;
//! # fn main() {}
//! ```
//!
//! The build script compiles the C library of the repository the crate
//! lives in (autoconf, automake, libtool and a C compiler are needed) with
//! `--with-prefix=mp_`, and links it statically: Rust's allocations go to
//! it, C code in the same process keeps the C library's `malloc`.  With
//! the `unprefixed` feature the library replaces `malloc` for the whole
//! process.  `MALLOC_PROF_PREFIX_DIR=/usr/local` links an installed copy
//! instead of building one (configured with `--with-prefix=mp_`, or
//! without a prefix for `unprefixed`).
//!
//! # Options
//!
//! The library reads its options once, at the first allocation, from the
//! program's `mp_malloc_conf` static, then the `MP_MALLOC_CONF`
//! environment variable (later sources win; with `unprefixed`:
//! `malloc_conf` and `MALLOC_CONF`):
//!
//! ```text
//! MP_MALLOC_CONF=prof:true,lg_prof_sample:19 ./server
//! ```
//!
//! In the program, define the static with [`ConfStr`] (a C string pointer
//! that may be shared between threads), and `#[no_mangle]` so that the
//! library finds it by name:
//!
//! ```no_run
//! #[no_mangle]
//! pub static mp_malloc_conf: malloc_prof::ConfStr =
//!     malloc_prof::ConfStr::new(c"prof:true,prof_active:false,lg_prof_sample:19");
//! # fn main() {}
//! ```
//!
//! (With `unprefixed`: `#[export_name = "malloc_conf"]`.)  The
//! `&[u8]`-typed static of jemalloc_pprof's README also happens to work,
//! but only because a slice's pointer is laid out first; `ConfStr` is a
//! plain `const char *`.  `prof:true` must be there from the start: the
//! profiler cannot be turned on later, only activated and deactivated.
//!
//! # Workflows
//!
//! ## Profile from start-up, dump at exit or on demand
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: malloc_prof::MallocProf = malloc_prof::MallocProf;
//! #[no_mangle]
//! pub static mp_malloc_conf: malloc_prof::ConfStr =
//!     malloc_prof::ConfStr::new(c"prof:true,prof_prefix:/tmp/app,prof_final:true");
//!
//! fn main() {
//!     let v: Vec<Vec<u8>> = (0..100).map(|_| vec![0u8; 1 << 20]).collect();
//!     // /tmp/app.<pid>.0.m0.heap, jeprof's heap_v2 text format
//!     malloc_prof::prof::dump().unwrap();
//!     malloc_prof::prof::dump_to("/tmp/now.heap").unwrap();
//!     drop(v);
//! }   // prof_final: /tmp/app.<pid>.1.f.heap at exit
//! ```
//!
//! ## Activate at run time (the gateway seed: profile only steady state)
//!
//! Start with `prof:true,prof_active:false`; nothing is sampled until
//! `activate()`, which fails with `ENOENT` and a message saying so when
//! the process was not started with `prof:true`:
//!
//! ```no_run
//! use malloc_prof::prof;
//! # fn serve_for_a_while() {}
//! match prof::activate() {
//!     Ok(()) => {}
//!     Err(e) => eprintln!("{e}"), // errno and the library's line
//! }
//! serve_for_a_while();
//! prof::deactivate().unwrap();
//! let pb_gz = prof::dump_pprof().unwrap();
//! std::fs::write("/tmp/steady.pb.gz", pb_gz).unwrap();
//! ```
//!
//! ## Dump on a signal
//!
//! A signal handler may not allocate or take locks: it sets a flag, and a
//! thread dumps.
//!
//! ```no_run
//! use std::sync::atomic::{AtomicBool, Ordering};
//! static DUMP: AtomicBool = AtomicBool::new(false);
//! extern "C" fn on_usr1(_: i32) {
//!     DUMP.store(true, Ordering::Relaxed);
//! }
//! extern "C" {
//!     fn signal(sig: i32, handler: extern "C" fn(i32)) -> usize;
//! }
//! const SIGUSR1: i32 = 10;
//! unsafe { signal(SIGUSR1, on_usr1) };
//! std::thread::spawn(|| loop {
//!     std::thread::sleep(std::time::Duration::from_millis(200));
//!     if DUMP.swap(false, Ordering::Relaxed) {
//!         // `kill -USR1 <pid>`: <prof_prefix>.<pid>.<seq>.m<n>.heap
//!         if let Err(e) = malloc_prof::prof::dump() {
//!             eprintln!("heap dump: {e}");
//!         }
//!     }
//! });
//! ```
//!
//! ## Serve pprof from your own HTTP handler
//!
//! What jemalloc_pprof's axum example does, with std's `TcpListener` (any
//! framework works the same way: the body is `dump_pprof()`'s bytes, 403
//! while profiling is not active):
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use std::net::TcpListener;
//! let listener = TcpListener::bind("127.0.0.1:3000").unwrap();
//! for stream in listener.incoming() {
//!     let mut s = stream.unwrap();
//!     let mut req = [0u8; 1024];
//!     let n = s.read(&mut req).unwrap_or(0);
//!     if !req[..n].starts_with(b"GET /debug/pprof/heap ") {
//!         let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
//!         continue;
//!     }
//!     if !malloc_prof::prof::is_active() {
//!         let _ = s.write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
//!         continue;
//!     }
//!     match malloc_prof::prof::dump_pprof() {
//!         Ok(body) => {
//!             let head = format!(
//!                 "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
//!                  content-length: {}\r\n\r\n", body.len());
//!             let _ = s.write_all(head.as_bytes());
//!             let _ = s.write_all(&body);
//!         }
//!         Err(e) => {
//!             let msg = e.to_string();
//!             let head = format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n", msg.len());
//!             let _ = s.write_all(head.as_bytes());
//!             let _ = s.write_all(msg.as_bytes());
//!         }
//!     }
//! }
//! ```
//!
//! Then `go tool pprof -http=: http://127.0.0.1:3000/debug/pprof/heap`.
//!
//! ## Or let the library serve it (`prof_http`)
//!
//! With `prof_http:127.0.0.1:6060` in the options, a thread of the
//! library's own serves `/debug/pprof/heap`, `/debug/pprof/allocs` and
//! `/debug/malloc/stats` with no code in the program (port 0: any free
//! port, see [`prof::http_port`]):
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: malloc_prof::MallocProf = malloc_prof::MallocProf;
//! #[no_mangle]
//! pub static mp_malloc_conf: malloc_prof::ConfStr =
//!     malloc_prof::ConfStr::new(c"prof:true,prof_symbolize:true,prof_http:127.0.0.1:0");
//! fn main() {
//!     let _warm = vec![0u8; 1 << 20];
//!     let port = malloc_prof::prof::http_port().unwrap();
//!     println!("go tool pprof -top http://127.0.0.1:{port}/debug/pprof/heap");
//! }
//! ```
//!
//! ## Leak check at exit
//!
//! `prof_leak:true` (with `prof_leak_error:true` the process exits 1 on a
//! leak) prints a summary at exit and writes a final dump to read with
//! `malloc-prof top PROGRAM DUMP` or `jeprof`.
//!
//! # Stacks
//!
//! Release builds need no frame pointers: the library walks Rust code
//! through its `.eh_frame` (`prof_unwind:auto`).  With
//! `prof_symbolize:true` pprof dumps carry the (mangled) function names,
//! which `go tool pprof` demangles; without it, pass the binary to the
//! reader.

#![deny(missing_docs)]

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::{c_char, c_int};

pub mod ctl;
mod error;
mod ffi;
pub mod prof;

pub use error::{Error, Result};

/// The prefix of the library's symbols in this build (`"mp_"`, or `""`
/// with the `unprefixed` feature).
pub const SYMBOL_PREFIX: &str = ffi::PREFIX;

/// The environment variable the library reads its options from
/// (`"MP_MALLOC_CONF"`, or `"MALLOC_CONF"` with `unprefixed`).
pub const CONF_ENV: &str = ffi::CONF_ENV;

/// The global allocator: `mallocx` with `MALLOCX_LG_ALIGN` when the
/// alignment is more than the size classes give by themselves,
/// `MALLOCX_ZERO` for zeroed memory, `rallocx`, and `sdallocx` (the size
/// is always known).
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: malloc_prof::MallocProf = malloc_prof::MallocProf;
/// # fn main() {}
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MallocProf;

/// Every size class of at least 16 bytes is 16-byte aligned, and smaller
/// classes are aligned to their size's largest power of two (as in
/// jemalloc): no flag is needed then.
const MIN_ALIGN: usize = 16;

#[inline]
fn layout_flags(align: usize, size: usize) -> c_int {
    if align <= MIN_ALIGN && align <= size {
        0
    } else {
        ffi::mallocx_align(align)
    }
}

unsafe impl GlobalAlloc for MallocProf {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let flags = layout_flags(layout.align(), layout.size());
        ffi::mallocx(layout.size(), flags).cast()
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let flags = layout_flags(layout.align(), layout.size()) | ffi::MALLOCX_ZERO;
        ffi::mallocx(layout.size(), flags).cast()
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let flags = layout_flags(layout.align(), layout.size());
        ffi::sdallocx(ptr.cast(), layout.size(), flags)
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let flags = layout_flags(layout.align(), new_size);
        ffi::rallocx(ptr.cast(), new_size, flags).cast()
    }
}

/// The usable size of a block this allocator returned (`sallocx`): at
/// least the size asked for.
///
/// # Safety
/// `ptr` must come from [`MallocProf`] and not be freed.
pub unsafe fn usable_size(ptr: *const u8) -> usize {
    ffi::sallocx(ptr.cast(), 0)
}

/// The size `size` bytes would really take (`nallocx`): its size class.
pub fn size_class(size: usize) -> usize {
    unsafe { ffi::nallocx(size, 0) }
}

/// The value of `mp_malloc_conf` (or `malloc_conf`): a pointer to a
/// NUL-terminated string of options, shareable between threads.
///
/// ```no_run
/// #[no_mangle]
/// pub static mp_malloc_conf: malloc_prof::ConfStr =
///     malloc_prof::ConfStr::new(c"prof:true,lg_prof_sample:19");
/// # fn main() {}
/// ```
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct ConfStr(*const c_char);

// The string is 'static and never written.
unsafe impl Sync for ConfStr {}
unsafe impl Send for ConfStr {}

impl ConfStr {
    /// Options from a C string literal (`c"key:value,key:value"`).
    pub const fn new(s: &'static std::ffi::CStr) -> ConfStr {
        ConfStr(s.as_ptr())
    }

    /// Options from a byte string that ends in a NUL (`b"prof:true\0"`).
    /// Panics (at compile time in a `static`) without the NUL.
    pub const fn from_bytes_with_nul(s: &'static [u8]) -> ConfStr {
        assert!(!s.is_empty() && s[s.len() - 1] == 0, "ConfStr: the options must end in \\0");
        ConfStr(s.as_ptr().cast())
    }
}
