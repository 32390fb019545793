//! bench/rust/src/bin/ours.rs: the workloads under the malloc-prof crate
//! (options from MP_MALLOC_CONF).
#[global_allocator]
static ALLOC: malloc_prof::MallocProf = malloc_prof::MallocProf;

fn main() {
    malloc_prof_bench::main();
}
