//! tests/prof_off.rs: a program started without `prof:true` (no
//! mp_malloc_conf here, and scripts/test.sh runs cargo without
//! MP_MALLOC_CONF): jemalloc's semantics for the profiler's controls,
//! errors of the ctl interface, and the statistics.

use malloc_prof::{ctl, prof, MallocProf};
use std::hint::black_box;
use std::sync::Mutex;

#[global_allocator]
static ALLOC: MallocProf = MallocProf;

static SERIAL: Mutex<()> = Mutex::new(());
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const ENOENT: i32 = 2;
const EINVAL: i32 = 22;

#[test]
fn profiler_off_semantics() {
    let _g = serial();
    assert!(!prof::enabled(), "opt.prof is true: is {} set?", malloc_prof::CONF_ENV);
    assert!(!prof::is_active());
    // Turning it off is already true; on is ENOENT, saying why.
    prof::deactivate().unwrap();
    let e = prof::activate().unwrap_err();
    assert_eq!(e.errno(), ENOENT, "{e}");
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    let m = e.message().expect("a message saying profiling is off");
    assert!(m.contains("profiling is off") && m.contains(malloc_prof::CONF_ENV), "{m}");
    assert!(!prof::is_active());
    // Actions are ENOENT.
    assert_eq!(prof::dump().unwrap_err().errno(), ENOENT);
    assert_eq!(prof::dump_to("/tmp/never-written.heap").unwrap_err().errno(), ENOENT);
    assert!(!std::path::Path::new("/tmp/never-written.heap").exists());
    assert_eq!(prof::reset().unwrap_err().errno(), ENOENT);
    assert_eq!(prof::set_lg_sample(10).unwrap_err().errno(), ENOENT);
    assert_eq!(prof::http_port().unwrap_err().errno(), ENOENT);
    // The dumps into memory: io::Error of kind NotFound keeping the Error.
    let io = prof::dump_pprof().unwrap_err();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    let inner = io.get_ref().and_then(|e| e.downcast_ref::<malloc_prof::Error>()).expect("malloc_prof::Error inside");
    assert_eq!(inner.errno(), ENOENT);
    assert!(inner.message().is_some_and(|m| m.contains("profiling is off")), "{inner:?}");
    assert_eq!(prof::dump_heap_v2().unwrap_err().kind(), std::io::ErrorKind::NotFound);
    // Readable ones still read.
    assert_eq!(prof::lg_sample().unwrap(), 19);
}

#[test]
fn unknown_names_and_wrong_types() {
    let _g = serial();
    for name in ["no.such.name", "stats.allocatedx", "stats", "", "prof.active\0x", "opt.nope"] {
        let e = ctl::read::<usize>(name).unwrap_err();
        assert_eq!(e.errno(), ENOENT, "{name:?}: {e}");
        assert_eq!(e.name(), name);
    }
    assert_eq!(ctl::write("no.such.name", 1u64).unwrap_err().errno(), ENOENT);
    // stats.allocated is a size_t: reading it as u32 or bool is EINVAL.
    assert_eq!(ctl::read::<u32>("stats.allocated").unwrap_err().errno(), EINVAL);
    assert_eq!(ctl::read::<bool>("stats.allocated").unwrap_err().errno(), EINVAL);
    assert!(ctl::read::<usize>("stats.allocated").is_ok());
    assert!(!ctl::read::<String>("version").unwrap().is_empty());
    assert_eq!(ctl::read::<usize>("arenas.page").unwrap(), 4096);
}

#[test]
fn stats_track_a_10mb_allocation() {
    let _g = serial();
    const N: usize = 10_000_000;
    let before = ctl::stats().unwrap();
    let v = black_box(vec![7u8; N]);
    let during = ctl::stats().unwrap();
    let grown = during.allocated as i64 - before.allocated as i64;
    // Other test threads allocate a little meanwhile: allow 1 MB.
    assert!(grown >= N as i64 && grown < N as i64 + 1_000_000, "stats.allocated grew by {grown} for a 10 MB Vec");
    assert!(during.active >= during.allocated);
    assert!(during.resident >= during.active, "{during:?}");
    assert!(during.mapped >= N);
    assert!(during.metadata > 0);
    drop(v);
    let after = ctl::stats().unwrap();
    let shrunk = during.allocated as i64 - after.allocated as i64;
    assert!(shrunk >= N as i64 - 1_000_000, "stats.allocated fell by {shrunk} after the drop");
    let e1 = ctl::epoch().unwrap();
    let e2 = ctl::epoch().unwrap();
    assert!(e2 > e1);
    let json = ctl::stats_print("J");
    assert!(json.contains("\"allocated\""), "{}", &json[..json.len().min(200)]);
}
