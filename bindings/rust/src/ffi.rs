//! ffi.rs: the C library's entry points this crate uses.  In the default
//! (prefixed) build every public name carries `mp_`; with the
//! `unprefixed` feature they are jemalloc's plain names.

use std::os::raw::{c_char, c_int, c_void};

/// The `malloc_message` hook's type: called with a NULL opaque pointer and
/// one whole line.
pub type MessageHook = Option<unsafe extern "C" fn(*mut c_void, *const c_char)>;

extern "C" {
    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_mallocx")]
    #[cfg_attr(feature = "unprefixed", link_name = "mallocx")]
    pub fn mallocx(size: usize, flags: c_int) -> *mut c_void;

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_rallocx")]
    #[cfg_attr(feature = "unprefixed", link_name = "rallocx")]
    pub fn rallocx(ptr: *mut c_void, size: usize, flags: c_int) -> *mut c_void;

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_sdallocx")]
    #[cfg_attr(feature = "unprefixed", link_name = "sdallocx")]
    pub fn sdallocx(ptr: *mut c_void, size: usize, flags: c_int);

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_sallocx")]
    #[cfg_attr(feature = "unprefixed", link_name = "sallocx")]
    pub fn sallocx(ptr: *const c_void, flags: c_int) -> usize;

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_nallocx")]
    #[cfg_attr(feature = "unprefixed", link_name = "nallocx")]
    pub fn nallocx(size: usize, flags: c_int) -> usize;

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_mallctl")]
    #[cfg_attr(feature = "unprefixed", link_name = "mallctl")]
    pub fn mallctl(
        name: *const c_char,
        oldp: *mut c_void,
        oldlenp: *mut usize,
        newp: *mut c_void,
        newlen: usize,
    ) -> c_int;

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_malloc_stats_print")]
    #[cfg_attr(feature = "unprefixed", link_name = "malloc_stats_print")]
    pub fn malloc_stats_print(
        write_cb: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
        cbopaque: *mut c_void,
        opts: *const c_char,
    );

    #[cfg_attr(not(feature = "unprefixed"), link_name = "mp_malloc_message")]
    #[cfg_attr(feature = "unprefixed", link_name = "malloc_message")]
    pub static mut malloc_message: MessageHook;

    // The C library's, for the dump descriptor and forwarding messages.
    pub fn memfd_create(name: *const c_char, flags: u32) -> c_int;
    pub fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
}

/// jemalloc's flag values (include/malloc_prof.h).
pub const MALLOCX_ZERO: c_int = 0x40;

/// MALLOCX_LG_ALIGN(log2 of a power-of-two alignment).
#[inline]
pub const fn mallocx_align(align: usize) -> c_int {
    align.trailing_zeros() as c_int
}

/// The prefix this crate was built for, and the options variable the
/// library reads.
pub const PREFIX: &str = if cfg!(feature = "unprefixed") { "" } else { "mp_" };
pub const CONF_ENV: &str = if cfg!(feature = "unprefixed") { "MALLOC_CONF" } else { "MP_MALLOC_CONF" };
