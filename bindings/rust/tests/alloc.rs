//! tests/alloc.rs: MallocProf as the global allocator of this test
//! program: every allocation below, std's included, goes through
//! mallocx/rallocx/sdallocx.  Checks alignment (up to 1 MiB), zeroing,
//! contents across reallocation, and a multi-threaded workload that frees
//! on other threads than it allocates.

use malloc_prof::MallocProf;
use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread;

#[global_allocator]
static ALLOC: MallocProf = MallocProf;

/// Deterministic xorshift, so that a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Pattern bytes: every byte of the first and last 4 KiB, and one per
/// 509 bytes between (a prime stride, so that a page moved or lost shows;
/// debug builds are slow at touching every byte of megabytes).
fn positions(n: usize) -> impl Iterator<Item = usize> {
    let head = n.min(4096);
    let tail = n.saturating_sub(4096).max(head);
    (0..head).chain((head..tail).step_by(509)).chain(tail..n)
}

fn fill(p: *mut u8, n: usize, seed: u8) {
    for i in positions(n) {
        unsafe { *p.add(i) = seed.wrapping_add(i as u8) };
    }
}

fn check(p: *const u8, n: usize, seed: u8) -> bool {
    check_first(p, n, n, seed)
}

/// The bytes fill(p, n, seed) wrote below `upto` are still there.
fn check_first(p: *const u8, n: usize, upto: usize, seed: u8) -> bool {
    positions(n).filter(|&i| i < upto).all(|i| unsafe { *p.add(i) } == seed.wrapping_add(i as u8))
}

#[test]
fn is_the_global_allocator() {
    // A block from Vec must be one of the library's: sallocx knows it.
    let v: Vec<u8> = Vec::with_capacity(1000);
    let usable = unsafe { malloc_prof::usable_size(v.as_ptr()) };
    assert!(usable >= 1000, "usable size {usable} < 1000: not our block?");
    assert_eq!(usable, malloc_prof::size_class(1000));
}

#[test]
fn alignments_up_to_1mib() {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    for lg in 0..=20 {
        let align = 1usize << lg;
        for &size in &[1usize, 7, 8, 15, 16, 100, 4095, 4096, 65536, 3 << 20] {
            let size = size.max(1);
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = ALLOC.alloc(layout);
                assert!(!p.is_null(), "alloc({size}, {align}) failed");
                assert_eq!(p as usize % align, 0, "alloc({size}, {align}) = {p:p}");
                let seed = rng.next() as u8;
                fill(p, size, seed);
                // Grow and shrink, keeping the alignment and the bytes.
                let big = size * 3 + 1;
                let q = ALLOC.realloc(p, layout, big);
                assert!(!q.is_null());
                assert_eq!(q as usize % align, 0, "realloc to {big} lost {align}-alignment");
                assert!(check(q, size, seed), "realloc({size}->{big}, {align}) changed the bytes");
                let l2 = Layout::from_size_align(big, align).unwrap();
                let r = ALLOC.realloc(q, l2, size.div_ceil(2));
                assert_eq!(r as usize % align, 0);
                assert!(check_first(r, size, size.div_ceil(2), seed), "shrinking realloc({size}, {align}) changed the bytes");
                ALLOC.dealloc(r, Layout::from_size_align(size.div_ceil(2), align).unwrap());

                let z = ALLOC.alloc_zeroed(layout);
                assert_eq!(z as usize % align, 0);
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0), "alloc_zeroed({size}, {align}) not zero");
                ALLOC.dealloc(z, layout);
            }
        }
    }
}

#[test]
fn zeroed_after_dirty_reuse() {
    // Dirty a block, free it, and ask for a zeroed one of the same class:
    // the library would hand back the same region from the thread cache.
    for &size in &[24usize, 512, 5000, 100_000] {
        let layout = Layout::from_size_align(size, 8).unwrap();
        unsafe {
            let p = ALLOC.alloc(layout);
            std::ptr::write_bytes(p, 0xa5, size);
            ALLOC.dealloc(p, layout);
            let z = ALLOC.alloc_zeroed(layout);
            assert!((0..size).all(|i| *z.add(i) == 0), "alloc_zeroed({size}) after reuse not zero");
            ALLOC.dealloc(z, layout);
        }
    }
}

#[test]
fn threads_pass_blocks_to_each_other() {
    // Four producers build boxed messages and strings of mixed sizes and
    // alignments; one consumer checks and frees them (remote frees), while
    // each producer also grows and drops a map of its own.
    #[repr(align(4096))]
    struct Page([u8; 4096]);
    #[repr(align(64))]
    struct Line([u64; 8]);
    enum Msg {
        Bytes(Vec<u8>, u8),
        Page(Box<Page>, u8),
        Line(Box<Line>, u64),
        Text(String),
    }
    let (tx, rx) = mpsc::sync_channel::<Msg>(256);
    let mut producers = Vec::new();
    for t in 0..4u64 {
        let tx = tx.clone();
        producers.push(thread::spawn(move || {
            let mut rng = Rng(0x1234_5678 + t);
            let mut map = BTreeMap::new();
            for i in 0..5_000u64 {
                let r = rng.next();
                let seed = r as u8;
                let msg = match r % 4 {
                    0 => {
                        let n = (r >> 8) as usize % 20_000;
                        let mut v = vec![0u8; n];
                        fill(v.as_mut_ptr(), n, seed);
                        Msg::Bytes(v, seed)
                    }
                    1 => Msg::Page(Box::new(Page([seed; 4096])), seed),
                    2 => Msg::Line(Box::new(Line([r; 8])), r),
                    _ => Msg::Text(format!("{t}-{i}-{r}")),
                };
                tx.send(msg).unwrap();
                map.insert(r, vec![seed; (r % 300) as usize]);
                if map.len() > 2000 {
                    let k = *map.keys().next().unwrap();
                    map.remove(&k);
                }
            }
            map.values().map(|v| v.len()).sum::<usize>()
        }));
    }
    drop(tx);
    let mut count = 0;
    for m in rx {
        match m {
            Msg::Bytes(v, seed) => {
                assert!(check(v.as_ptr(), v.len(), seed), "message bytes changed");
            }
            Msg::Page(p, seed) => {
                assert_eq!(&*p as *const Page as usize % 4096, 0);
                assert!(p.0.iter().all(|&b| b == seed));
            }
            Msg::Line(l, r) => {
                assert_eq!(&*l as *const Line as usize % 64, 0);
                assert!(l.0.iter().all(|&x| x == r));
            }
            Msg::Text(s) => assert!(s.split('-').count() == 3),
        }
        count += 1;
    }
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(count, 4 * 5_000);
}

#[test]
fn huge_alignment_from_many_threads() {
    let handles: Vec<_> = (0..4)
        .map(|t| {
            thread::spawn(move || {
                let mut v = Vec::new();
                for i in 0..64usize {
                    let align = 1usize << (12 + (i + t) % 9); // 4 KiB .. 1 MiB
                    let layout = Layout::from_size_align(1 + i * 1000, align).unwrap();
                    let p = unsafe { ALLOC.alloc(layout) };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0);
                    fill(p, layout.size(), i as u8);
                    v.push((p, layout));
                }
                for (i, (p, layout)) in v.into_iter().enumerate() {
                    assert!(check(p, layout.size(), i as u8));
                    unsafe { ALLOC.dealloc(p, layout) };
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
