//! examples/pprof_top.rs: a program whose heap is known: two functions
//! hold 8 MiB and 4 MiB in 1 MiB blocks when it writes `dump_pprof()` to
//! the file named by its argument.  tests/go_pprof.rs builds it in release
//! mode (no frame pointers) and checks what `go tool pprof -top` reads.
//!
//! ```text
//! cargo run --release --example pprof_top -- /tmp/heap.pb.gz
//! go tool pprof -top /tmp/heap.pb.gz
//! ```

use std::hint::black_box;

#[global_allocator]
static ALLOC: malloc_prof::MallocProf = malloc_prof::MallocProf;

// Every block of 1 MiB is sampled at 2^10 (its weight is then its size);
// prof_symbolize: the names are in the profile.
#[cfg(not(feature = "unprefixed"))]
#[no_mangle]
pub static mp_malloc_conf: malloc_prof::ConfStr =
    malloc_prof::ConfStr::new(c"prof:true,lg_prof_sample:10,prof_symbolize:true");
#[cfg(feature = "unprefixed")]
#[export_name = "malloc_conf"]
pub static MALLOC_CONF: malloc_prof::ConfStr =
    malloc_prof::ConfStr::new(c"prof:true,lg_prof_sample:10,prof_symbolize:true");

const MIB: usize = 1 << 20;

#[inline(never)]
fn hold_eight_mib() -> Vec<Vec<u8>> {
    (0..8).map(|i| black_box(vec![i as u8 + 1; MIB])).collect()
}

#[inline(never)]
fn hold_four_mib() -> Vec<Vec<u8>> {
    (0..4).map(|i| black_box(vec![i as u8 + 1; MIB])).collect()
}

fn main() {
    let out = std::env::args().nth(1).unwrap_or_else(|| "heap.pb.gz".to_string());
    let a = hold_eight_mib();
    let b = hold_four_mib();
    let pb = match malloc_prof::prof::dump_pprof() {
        Ok(pb) => pb,
        Err(e) => {
            eprintln!("pprof_top: dump_pprof: {e}");
            std::process::exit(1);
        }
    };
    std::fs::write(&out, pb).unwrap_or_else(|e| {
        eprintln!("pprof_top: {out}: {e}");
        std::process::exit(1);
    });
    black_box((a, b));
}
