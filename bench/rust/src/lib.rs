//! bench/rust/src/lib.rs: the workloads, shared by the three binaries
//! (one per global allocator: src/bin/{ours,jemalloc,system}.rs).
//!
//! `btree`: build a BTreeMap<String, Vec<u8>> of 1M entries (values of
//! 16-271 bytes), look every key up, drop it.
//! `pipeline`: 4 producer threads box messages with a payload, 2 workers
//! turn each into a new boxed message (a String and a smaller Vec), one
//! sink checks and drops them: 2M messages through bounded channels, so
//! most frees are on another thread than the allocation.
//! Prints one line: `workload seconds peak_rss_kib checksum cpu_seconds`
//! (CPU time of the whole process, start-up included).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;

fn btree() -> u64 {
    let mut sum = 0u64;
    for round in 0..1u64 {
        let mut m = BTreeMap::new();
        for i in 0..1_000_000u64 {
            let k = format!("key-{:08}-{}", (i * 7919) % 1_000_003, round);
            let n = 16 + (i % 256) as usize;
            m.insert(k, vec![(i & 0xff) as u8; n]);
        }
        for i in 0..1_000_000u64 {
            let k = format!("key-{:08}-{}", (i * 7919) % 1_000_003, round);
            sum += m.get(&k).map_or(0, |v| v.len() as u64);
        }
        black_box(&m);
    }
    sum
}

struct Msg {
    id: u64,
    payload: Vec<u8>,
}

struct Out {
    id: u64,
    text: String,
    digest: Vec<u32>,
}

fn pipeline() -> u64 {
    const PRODUCERS: u64 = 4;
    const PER: u64 = 500_000;
    let (tx, rx) = mpsc::sync_channel::<Box<Msg>>(1024);
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let (otx, orx) = mpsc::sync_channel::<Box<Out>>(1024);
    let mut hs = Vec::new();
    for p in 0..PRODUCERS {
        let tx = tx.clone();
        hs.push(thread::spawn(move || {
            for i in 0..PER {
                let id = p * PER + i;
                let n = 32 + (id % 480) as usize;
                tx.send(Box::new(Msg { id, payload: vec![id as u8; n] })).unwrap();
            }
        }));
    }
    drop(tx);
    for _ in 0..2 {
        let rx = rx.clone();
        let otx = otx.clone();
        hs.push(thread::spawn(move || loop {
            let m = match rx.lock().unwrap().recv() {
                Ok(m) => m,
                Err(_) => break,
            };
            let digest: Vec<u32> = m.payload.chunks(64).map(|c| c.iter().map(|&b| b as u32).sum()).collect();
            otx.send(Box::new(Out { id: m.id, text: format!("msg {} len {}", m.id, m.payload.len()), digest })).unwrap();
        }));
    }
    drop(otx);
    let mut sum = 0u64;
    for o in orx {
        sum = sum.wrapping_add(o.id + o.text.len() as u64 + o.digest.len() as u64);
    }
    for h in hs {
        h.join().unwrap();
    }
    sum
}

/// Peak resident set (VmHWM) in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// CPU time of the process so far (user + system), in seconds: less
/// disturbed than wall time when other programs share the machine.
fn cpu_secs() -> f64 {
    // /proc/self/stat: fields 14 and 15 (utime, stime) in clock ticks,
    // 100 per second on Linux; the command name (field 2) may hold
    // spaces, so count from its closing parenthesis.
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// Run the workload named by the first argument and print its line.
pub fn main() {
    let w = std::env::args().nth(1).unwrap_or_default();
    let t = Instant::now();
    let sum = match w.as_str() {
        "btree" => btree(),
        "pipeline" => pipeline(),
        _ => {
            eprintln!("usage: {} btree|pipeline", std::env::args().next().unwrap_or_default());
            std::process::exit(2);
        }
    };
    let secs = t.elapsed().as_secs_f64();
    println!("{w} {secs:.3} {} {sum} {:.2}", peak_rss_kib(), cpu_secs());
}
