//! bench/rust/src/bin/system.rs: the workloads under Rust's default
//! allocator (glibc's malloc).
fn main() {
    malloc_prof_bench::main();
}
