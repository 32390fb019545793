//! error.rs: the error of a failed control: the mallctl name, its errno
//! and the line the library printed about it, if any.
//!
//! The library reports the causes errno cannot tell (profiling off, a bad
//! format name, ...) as one `<malloc_prof>: ` line through its
//! `malloc_message` hook.  The crate installs a hook of its own at its
//! first control call that still writes every line to standard error (or
//! to the hook that was there before), and, while one of this crate's
//! calls runs on the current thread, keeps a copy of the last line for the
//! error.  The hook neither allocates nor locks: the library may call it
//! from inside the allocator.

use crate::ffi;
use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::fmt;
use std::io;
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

const MSG_MAX: usize = 1024;

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static LAST: RefCell<([u8; MSG_MAX], usize)> = const { RefCell::new(([0; MSG_MAX], 0)) };
}

static INSTALL: Once = Once::new();
/// The hook that was installed before ours (0: none, write to stderr).
static PREV: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn hook(opaque: *mut c_void, s: *const c_char) {
    if s.is_null() {
        return;
    }
    let bytes = CStr::from_ptr(s).to_bytes();
    let _ = CAPTURING.try_with(|c| {
        if c.get() {
            let _ = LAST.try_with(|l| {
                if let Ok(mut l) = l.try_borrow_mut() {
                    let n = bytes.len().min(MSG_MAX);
                    l.0[..n].copy_from_slice(&bytes[..n]);
                    l.1 = n;
                }
            });
        }
    });
    let prev = PREV.load(Ordering::Relaxed);
    if prev != 0 {
        let f: unsafe extern "C" fn(*mut c_void, *const c_char) = std::mem::transmute(prev);
        f(opaque, s);
    } else {
        let mut off = 0;
        while off < bytes.len() {
            let n = ffi::write(2, bytes[off..].as_ptr().cast(), bytes.len() - off);
            if n <= 0 {
                if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            off += n as usize;
        }
    }
}

fn install() {
    INSTALL.call_once(|| unsafe {
        let cur = std::ptr::addr_of_mut!(ffi::malloc_message);
        if let Some(f) = *cur {
            PREV.store(f as usize, Ordering::Relaxed);
        }
        *cur = Some(hook);
    });
}

/// Run `f` (one call into the library) with the current thread's message
/// capture on; returns its result and the last line printed meanwhile.
pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Option<String>) {
    install();
    LAST.with(|l| l.borrow_mut().1 = 0);
    CAPTURING.with(|c| c.set(true));
    let r = f();
    CAPTURING.with(|c| c.set(false));
    let msg = LAST.with(|l| {
        let l = l.borrow();
        if l.1 == 0 {
            None
        } else {
            Some(String::from_utf8_lossy(&l.0[..l.1]).trim_end().to_string())
        }
    });
    (r, msg)
}

/// A failed control: which name, the errno the library returned, and the
/// line it printed about it (`<malloc_prof>: ...`), when it printed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    name: String,
    errno: i32,
    message: Option<String>,
}

impl Error {
    pub(crate) fn new(name: &str, errno: i32, message: Option<String>) -> Error {
        Error { name: name.to_string(), errno, message }
    }

    /// The mallctl name (`"prof.active"`), or the operation that failed.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The errno value: `ENOENT` (2) for an unknown name or a profiler
    /// that is off, `EINVAL` (22) for a value of the wrong type, `EPERM`
    /// (1) for reading a write-only name or writing a read-only one,
    /// `EFAULT` (14) for a dump that could not be written.
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The library's own line about this failure (starting with
    /// `<malloc_prof>: `), if it printed one.
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// `errno` as an `io::ErrorKind`.
    pub fn kind(&self) -> io::ErrorKind {
        io::Error::from_raw_os_error(self.errno).kind()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, io::Error::from_raw_os_error(self.errno))?;
        if let Some(m) = &self.message {
            write!(f, " ({m})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// An `io::Error` of the errno's kind that keeps the whole `Error`
/// (`get_ref()`, `downcast`).
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

/// `Result` with this crate's `Error`.
pub type Result<T> = std::result::Result<T, Error>;
