//! prof.rs: the heap profiler's controls: switch sampling on and off,
//! dump to files or into memory (pprof or heap_v2), change the sampling
//! rate, and find the built-in scrape endpoint.
//!
//! Sampling needs the process to start with `prof:true` (in
//! `MP_MALLOC_CONF`, or `MALLOC_CONF` with the `unprefixed` feature, or
//! the program's `mp_malloc_conf` static: see the crate documentation).
//! Without it, as in jemalloc, `is_active()` is false, `deactivate()`
//! succeeds, and `activate()` and every dump fail with `ENOENT`, the
//! error's message saying that profiling is off.

use crate::ctl::{self, libc_errno};
use crate::error::{Error, Result};
use crate::ffi;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::FromRawFd;
use std::path::Path;
use std::ptr;
use std::sync::Mutex;

/// Serialises the dumps into memory: each sets `prof.format`, dumps, and
/// puts the format back.
static FORMAT_LOCK: Mutex<()> = Mutex::new(());

/// Whether the process was started with `prof:true` (`opt.prof`).
pub fn enabled() -> bool {
    ctl::read::<bool>("opt.prof").unwrap_or(false)
}

/// Whether allocations are being sampled now (`prof.active`; false when
/// the process was not started with `prof:true`).
pub fn is_active() -> bool {
    ctl::read::<bool>("prof.active").unwrap_or(false)
}

/// Start sampling (`prof.active` = true).  `ENOENT` when the process was
/// not started with `prof:true`.
pub fn activate() -> Result<()> {
    ctl::write("prof.active", true)
}

/// Stop sampling (`prof.active` = false); what was sampled stays in the
/// profile until it is freed or `reset()`.  Succeeds when profiling is off.
pub fn deactivate() -> Result<()> {
    ctl::write("prof.active", false)
}

/// Write a heap profile, in the current format (`prof_format`), to the
/// next automatic name, `<prof_prefix>.<pid>.<seq>.m<mseq>.heap`
/// (`.pb.gz` for pprof).
pub fn dump() -> Result<()> {
    ctl::call("prof.dump")
}

/// Write a heap profile, in the current format, to `path` (created or
/// truncated; a symbolic link is refused unless
/// `prof_dump_follow_symlinks:true`).
pub fn dump_to(path: impl AsRef<Path>) -> Result<()> {
    let c = CString::new(path.as_ref().as_os_str().as_bytes())
        .map_err(|_| Error::new("prof.dump", libc_errno::EINVAL, None))?;
    let mut p: *const c_char = c.as_ptr();
    unsafe {
        ctl::raw("prof.dump", ptr::null_mut(), ptr::null_mut(),
            (&mut p as *mut *const c_char).cast(), std::mem::size_of::<*const c_char>())
    }
}

/// The current profile as a gzipped pprof `profile.proto`, written by the
/// library itself into a memfd (no temporary file, no converter): what
/// `go tool pprof`, Parca, Pyroscope and Polar Signals read.  With
/// `prof_symbolize:true` in the options it carries function names;
/// otherwise addresses and the mappings' build IDs.
pub fn dump_pprof() -> io::Result<Vec<u8>> {
    dump_format("pprof")
}

/// The current profile in jemalloc's `heap_v2` text format (what `jeprof`
/// and `malloc-prof` read).
pub fn dump_heap_v2() -> io::Result<Vec<u8>> {
    dump_format("heap_v2")
}

fn memfd() -> io::Result<File> {
    let fd = unsafe { ffi::memfd_create(c"malloc_prof-dump".as_ptr(), 1 /* MFD_CLOEXEC */) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn dump_format(format: &str) -> io::Result<Vec<u8>> {
    let guard = FORMAT_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let old: String = ctl::exchange("prof.format", format.to_string())?;
    let res = memfd().and_then(|mut f| {
        use std::os::unix::io::AsRawFd;
        let mut fd: c_int = f.as_raw_fd();
        unsafe {
            ctl::raw("prof.dump_fd", ptr::null_mut(), ptr::null_mut(),
                (&mut fd as *mut c_int).cast(), std::mem::size_of::<c_int>())?
        };
        f.seek(SeekFrom::Start(0))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf)?;
        Ok(buf)
    });
    if old != format {
        ctl::write("prof.format", old)?;
    }
    drop(guard);
    res
}

/// Sample one allocation per 2^`lg` bytes on average from now on
/// (`prof.reset` with a value, as in jemalloc): this also empties the
/// profile, since samples taken at two rates cannot be mixed.  Values
/// above 63 mean 63.
pub fn set_lg_sample(lg: u8) -> Result<()> {
    ctl::write("prof.reset", lg as usize)
}

/// The sampling rate in effect (`prof.lg_sample`).
pub fn lg_sample() -> Result<u8> {
    ctl::read::<usize>("prof.lg_sample").map(|v| v as u8)
}

/// Empty the profile (`prof.reset`): later dumps show only what is
/// allocated from now on.  The rate stays.
pub fn reset() -> Result<()> {
    ctl::call("prof.reset")
}

/// The TCP port of the built-in scrape endpoint (`prof_http`), useful
/// with `prof_http:127.0.0.1:0`; `ENOENT` when it is not serving.
pub fn http_port() -> Result<u16> {
    ctl::read::<u32>("prof.http_port").map(|p| p as u16)
}

/// Name the calling thread in dumps (`thread.prof.name`, 15 characters
/// kept).
pub fn set_thread_name(name: &str) -> Result<()> {
    ctl::write("thread.prof.name", name.to_string())
}

/// Samples dropped because the profiler's own memory ran out
/// (`prof.dropped_samples`): non-zero means the profile is incomplete.
pub fn dropped_samples() -> Result<u64> {
    ctl::read::<u64>("prof.dropped_samples")
}
