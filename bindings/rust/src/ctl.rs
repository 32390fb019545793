//! ctl.rs: typed access to any mallctl name (`ctl::read`, `ctl::write`),
//! `epoch()` and the main statistics (`stats()`).
//!
//! The type is the C type of the name (doc/malloc_prof.3.md lists each):
//! `bool`, `u32` for `unsigned`, `usize` for `size_t`, `isize` for
//! `ssize_t`, `u64` for `uint64_t`, `String` for `const char *`.  The
//! library checks the length, so a wrong type is an `EINVAL` error rather
//! than a bad value.
//!
//! ```no_run
//! use malloc_prof::ctl;
//! let s = ctl::stats().unwrap();
//! println!("allocated {} resident {}", s.allocated, s.resident);
//! let lg: usize = ctl::read("prof.lg_sample").unwrap();
//! let prof: bool = ctl::read("opt.prof").unwrap();
//! let version: String = ctl::read("version").unwrap();
//! ctl::write("prof.gdump", true).ok();
//! # let _ = (lg, prof, version);
//! ```

use crate::error::{capture, Error, Result};
use crate::ffi;
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_void};
use std::ptr;

/// The C name as a NUL-terminated string; an interior NUL cannot name
/// anything (ENOENT, as the library says of an unknown name).
fn c_name(name: &str) -> Result<CString> {
    CString::new(name).map_err(|_| Error::new(name, libc_errno::ENOENT, None))
}

pub(crate) mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EINVAL: i32 = 22;
}

/// One raw mallctl call with the message capture on.
pub(crate) unsafe fn raw(
    name: &str,
    oldp: *mut c_void,
    oldlenp: *mut usize,
    newp: *mut c_void,
    newlen: usize,
) -> Result<()> {
    let c = c_name(name)?;
    let (rc, msg) = capture(|| ffi::mallctl(c.as_ptr(), oldp, oldlenp, newp, newlen));
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::new(name, rc, msg))
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type a mallctl value can be read as or written from.
pub trait Value: sealed::Sealed + Sized {
    #[doc(hidden)]
    fn read(name: &str) -> Result<Self>;
    #[doc(hidden)]
    fn write(name: &str, v: Self) -> Result<()>;
    #[doc(hidden)]
    fn exchange(name: &str, v: Self) -> Result<Self>;
}

macro_rules! pod_value {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Value for $t {
            fn read(name: &str) -> Result<Self> {
                let mut v: $t = Default::default();
                let mut len = std::mem::size_of::<$t>();
                unsafe { raw(name, (&mut v as *mut $t).cast(), &mut len, ptr::null_mut(), 0)? };
                Ok(v)
            }
            fn write(name: &str, mut v: Self) -> Result<()> {
                unsafe {
                    raw(name, ptr::null_mut(), ptr::null_mut(), (&mut v as *mut $t).cast(),
                        std::mem::size_of::<$t>())
                }
            }
            fn exchange(name: &str, mut v: Self) -> Result<Self> {
                let mut old: $t = Default::default();
                let mut len = std::mem::size_of::<$t>();
                unsafe {
                    raw(name, (&mut old as *mut $t).cast(), &mut len, (&mut v as *mut $t).cast(),
                        std::mem::size_of::<$t>())?
                };
                Ok(old)
            }
        }
    )*};
}
pod_value!(bool, u32, i32, u64, i64, usize, isize);

impl sealed::Sealed for String {}
/// `const char *` names (`version`, `opt.prof_prefix`, `prof.format`,
/// `thread.prof.name`...): read as a copy, written as a NUL-terminated
/// copy that lives for the call (the library copies what it keeps).
impl Value for String {
    fn read(name: &str) -> Result<Self> {
        let mut p: *const c_char = ptr::null();
        let mut len = std::mem::size_of::<*const c_char>();
        unsafe { raw(name, (&mut p as *mut *const c_char).cast(), &mut len, ptr::null_mut(), 0)? };
        Ok(if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() })
    }
    fn write(name: &str, v: Self) -> Result<()> {
        let c = CString::new(v).map_err(|_| Error::new(name, libc_errno::EINVAL, None))?;
        let mut p = c.as_ptr();
        unsafe {
            raw(name, ptr::null_mut(), ptr::null_mut(), (&mut p as *mut *const c_char).cast(),
                std::mem::size_of::<*const c_char>())
        }
    }
    fn exchange(name: &str, v: Self) -> Result<Self> {
        let c = CString::new(v).map_err(|_| Error::new(name, libc_errno::EINVAL, None))?;
        let mut p = c.as_ptr();
        let mut old: *const c_char = ptr::null();
        let mut len = std::mem::size_of::<*const c_char>();
        unsafe {
            raw(name, (&mut old as *mut *const c_char).cast(), &mut len,
                (&mut p as *mut *const c_char).cast(), std::mem::size_of::<*const c_char>())?
        };
        // The old value is one of the library's static names or strings.
        Ok(if old.is_null() { String::new() } else { unsafe { CStr::from_ptr(old) }.to_string_lossy().into_owned() })
    }
}

/// Read the value of `name` as `T` (the name's C type).
pub fn read<T: Value>(name: &str) -> Result<T> {
    T::read(name)
}

/// Write `value` to `name`.
pub fn write<T: Value>(name: &str, value: T) -> Result<()> {
    T::write(name, value)
}

/// Write `value` to `name` and return the value it replaced.
pub fn exchange<T: Value>(name: &str, value: T) -> Result<T> {
    T::exchange(name, value)
}

/// Call a name that takes no value (`"prof.dump"` to an automatic name,
/// `"prof.reset"`, `"arena.4096.purge"`...).
pub fn call(name: &str) -> Result<()> {
    unsafe { raw(name, ptr::null_mut(), ptr::null_mut(), ptr::null_mut(), 0) }
}

/// Refresh the statistics snapshot (`stats.*` values are read from it)
/// and return the new epoch.
pub fn epoch() -> Result<u64> {
    exchange("epoch", 1u64).and_then(|_| read("epoch"))
}

/// The main statistics, in bytes, of one fresh snapshot (see README,
/// "Reading statistics", for what each counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Bytes in blocks the program holds (usable sizes).
    pub allocated: usize,
    /// Bytes in active pages (slabs and large blocks, thread caches too).
    pub active: usize,
    /// The allocator's own records.
    pub metadata: usize,
    /// active + dirty pages + metadata (an upper estimate).
    pub resident: usize,
    /// Mapped memory, less retained, plus metadata.
    pub mapped: usize,
    /// Purged or never-used pages kept mapped.
    pub retained: usize,
}

/// Write `epoch`, then read `stats.allocated`, `active`, `metadata`,
/// `resident`, `mapped` and `retained` from that snapshot.
pub fn stats() -> Result<Stats> {
    epoch()?;
    Ok(Stats {
        allocated: read("stats.allocated")?,
        active: read("stats.active")?,
        metadata: read("stats.metadata")?,
        resident: read("stats.resident")?,
        mapped: read("stats.mapped")?,
        retained: read("stats.retained")?,
    })
}

/// `malloc_stats_print`'s report as a string; `opts` takes its letters
/// (`"J"`: JSON).
pub fn stats_print(opts: &str) -> String {
    unsafe extern "C" fn cb(opaque: *mut c_void, s: *const c_char) {
        let out = &mut *(opaque as *mut Vec<u8>);
        out.extend_from_slice(CStr::from_ptr(s).to_bytes());
    }
    let mut out: Vec<u8> = Vec::new();
    let o = CString::new(opts.replace('\0', "")).unwrap_or_default();
    unsafe { ffi::malloc_stats_print(Some(cb), (&mut out as *mut Vec<u8>).cast(), o.as_ptr()) };
    String::from_utf8_lossy(&out).into_owned()
}
