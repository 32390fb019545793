//! tests/prof_on.rs: the profiler's controls in a program started with
//! `prof:true` through its `mp_malloc_conf` static (the way the seeds
//! configure it): pprof and heap_v2 dumps into memory, decoded; sampling
//! switched off and on; the sampling rate; automatic and named dumps; the
//! built-in endpoint; errors with the library's message.

mod common;

use malloc_prof::{ctl, prof, MallocProf};
use std::hint::black_box;
use std::io::{Read, Write};
use std::sync::Mutex;

#[global_allocator]
static ALLOC: MallocProf = MallocProf;

// prof_accum: the four sample types; prof_symbolize: function names in
// the pprof dump; port 0: any free port.
#[cfg(not(feature = "unprefixed"))]
#[no_mangle]
pub static mp_malloc_conf: malloc_prof::ConfStr = malloc_prof::ConfStr::new(
    c"prof:true,prof_accum:true,lg_prof_sample:12,prof_symbolize:true,prof_http:127.0.0.1:0",
);
#[cfg(feature = "unprefixed")]
#[export_name = "malloc_conf"]
pub static MALLOC_CONF: malloc_prof::ConfStr = malloc_prof::ConfStr::new(
    c"prof:true,prof_accum:true,lg_prof_sample:12,prof_symbolize:true,prof_http:127.0.0.1:0",
);

/// The tests change process-wide profiler state: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const MIB: usize = 1 << 20;

#[inline(never)]
fn rust_marker_four_mib() -> Vec<Vec<u8>> {
    (0..4).map(|i| black_box(vec![i as u8 + 1; MIB])).collect()
}

#[inline(never)]
fn rust_marker_while_inactive() -> Vec<Vec<u8>> {
    (0..2).map(|i| black_box(vec![i as u8 + 1; MIB])).collect()
}

#[inline(never)]
fn rust_marker_after_activate() -> Vec<Vec<u8>> {
    (0..2).map(|i| black_box(vec![i as u8 + 1; MIB])).collect()
}

fn pprof_now() -> common::Profile {
    let gz = prof::dump_pprof().expect("dump_pprof");
    assert!(gz.len() > 20 && gz[0] == 0x1f && gz[1] == 0x8b, "dump_pprof is not gzip");
    common::parse_profile(&common::gunzip(&gz))
}

/// inuse_space of the samples whose stack holds a function named with
/// `marker`.
fn inuse_bytes_of(p: &common::Profile, marker: &str) -> i64 {
    let i = p.value_index("inuse_space");
    p.samples
        .iter()
        .filter(|s| p.stack_names(s).iter().any(|n| n.contains(marker)))
        .map(|s| s.values[i])
        .sum()
}

#[test]
fn conf_static_is_read() {
    let _g = serial();
    assert!(prof::enabled(), "opt.prof is false: mp_malloc_conf was not read");
    assert!(ctl::read::<bool>("opt.prof_accum").unwrap());
}

#[test]
fn dump_pprof_decodes_with_four_types_and_stacks() {
    let _g = serial();
    prof::activate().unwrap();
    let held = rust_marker_four_mib();
    let p = pprof_now();
    let types: Vec<&str> = p.sample_types.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(types, ["inuse_objects", "inuse_space", "alloc_objects", "alloc_space"]);
    assert_eq!(p.sample_types[1].1, "bytes");
    assert_eq!(p.sample_types[0].1, "count");
    assert_eq!(p.period, 1 << 12);
    assert!(!p.samples.is_empty(), "no samples");
    for s in &p.samples {
        assert!(!s.location_ids.is_empty(), "a sample with an empty stack");
        assert_eq!(s.values.len(), 4);
        for id in &s.location_ids {
            assert!(p.location(*id).is_some(), "sample names location {id}, which is missing");
        }
    }
    // 4 MiB in 1 MiB blocks, each sampled (size >> 2^12): the estimate
    // is within 1% of what is held.
    let got = inuse_bytes_of(&p, "rust_marker_four_mib");
    let want = 4 * MIB as i64;
    assert!((got - want).abs() < want / 100, "rust_marker_four_mib holds {got} B in the profile, expected about {want}");
    drop(held);
}

#[test]
fn deactivate_stops_sampling_and_activate_resumes() {
    let _g = serial();
    prof::activate().unwrap();
    assert!(prof::is_active());
    prof::deactivate().unwrap();
    assert!(!prof::is_active());
    let a = rust_marker_while_inactive();
    prof::activate().unwrap();
    assert!(prof::is_active());
    let b = rust_marker_after_activate();
    let p = pprof_now();
    assert_eq!(inuse_bytes_of(&p, "rust_marker_while_inactive"), 0, "sampled while inactive");
    let got = inuse_bytes_of(&p, "rust_marker_after_activate");
    assert!(got >= 2 * MIB as i64 * 99 / 100, "after activate: {got} B sampled");
    drop((a, b));
    // ctl::exchange reads the old value as it writes.
    assert!(ctl::exchange("prof.active", false).unwrap());
    assert!(!ctl::exchange("prof.active", true).unwrap());
}

#[test]
fn heap_v2_and_format_restored() {
    let _g = serial();
    let before: String = ctl::read("prof.format").unwrap();
    let text = prof::dump_heap_v2().unwrap();
    assert!(text.starts_with(b"heap_v2/4096"), "heap_v2 dump starts {:?}", String::from_utf8_lossy(&text[..text.len().min(20)]));
    let _ = prof::dump_pprof().unwrap();
    assert_eq!(ctl::read::<String>("prof.format").unwrap(), before, "dump_pprof did not restore prof.format");
}

#[test]
fn named_and_automatic_dumps() {
    let _g = serial();
    let dir = std::env::temp_dir().join(format!("malloc-prof-rust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let named = dir.join("named.heap");
    prof::dump_to(&named).unwrap();
    let text = std::fs::read(&named).unwrap();
    assert!(text.starts_with(b"heap_v2/"), "prof.dump wrote {:?}", &text[..text.len().min(16)]);

    let prefix = dir.join("auto");
    ctl::write("prof.prefix", prefix.to_str().unwrap().to_string()).unwrap();
    prof::dump().unwrap();
    let pid = std::process::id();
    let found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("auto.{pid}.")) && n.ends_with(".heap"))
        .collect();
    assert_eq!(found.len(), 1, "automatic dump names: {found:?}");

    // A directory that does not exist: EFAULT, and the library's line.
    let e = prof::dump_to(dir.join("no/such/dir/x.heap")).unwrap_err();
    assert_eq!(e.errno(), 14, "{e}");
    assert!(e.message().is_some_and(|m| m.starts_with("<malloc_prof>: ")), "no message: {e:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lg_sample_and_reset() {
    let _g = serial();
    assert_eq!(prof::lg_sample().unwrap(), 12);
    prof::set_lg_sample(14).unwrap();
    assert_eq!(prof::lg_sample().unwrap(), 14);
    prof::set_lg_sample(12).unwrap();
    assert_eq!(prof::lg_sample().unwrap(), 12);
    // reset empties the profile: what was held before is gone from it.
    prof::activate().unwrap();
    let held = rust_marker_four_mib();
    prof::reset().unwrap();
    let p = pprof_now();
    assert_eq!(inuse_bytes_of(&p, "rust_marker_four_mib"), 0, "reset kept old samples");
    assert_eq!(prof::lg_sample().unwrap(), 12, "reset changed the rate");
    drop(held);
}

#[test]
fn builtin_endpoint_serves_pprof() {
    let _g = serial();
    let port = prof::http_port().expect("prof.http_port");
    assert!(port > 0);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /debug/pprof/heap HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    assert!(resp.starts_with(b"HTTP/1.") && resp[9..12] == *b"200", "{:?}", String::from_utf8_lossy(&resp[..resp.len().min(80)]));
}

#[test]
fn errors_carry_errno_and_message() {
    let _g = serial();
    let e = ctl::write("prof.format", "jpeg".to_string()).unwrap_err();
    assert_eq!(e.errno(), 22);
    assert_eq!(e.name(), "prof.format");
    let m = e.message().expect("the library's line");
    assert!(m.starts_with("<malloc_prof>: prof.format:") && m.contains("jpeg"), "{m}");
    assert!(e.to_string().contains("jpeg"));
    // The format is unchanged after the refusal.
    assert_eq!(ctl::read::<String>("prof.format").unwrap(), "heap_v2");
    // Read-only name written: EPERM.
    assert_eq!(ctl::write("prof.lg_sample", 3usize).unwrap_err().errno(), 1);
    // Thread names.
    prof::set_thread_name("rust-test").unwrap();
    assert_eq!(ctl::read::<String>("thread.prof.name").unwrap(), "rust-test");
    assert_eq!(prof::dropped_samples().unwrap(), 0);
}
