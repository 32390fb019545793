//! tests/go_pprof.rs: examples/pprof_top built in release mode (no frame
//! pointers: the library walks Rust's .eh_frame) writes `dump_pprof()`;
//! `go tool pprof -top` must read it and give hold_eight_mib 8 MiB and
//! hold_four_mib 4 MiB (cumulative, within 1%).  Skipped, saying so, when
//! `go` is not installed.  The example is built by a nested cargo into its
//! own target directory, so that it does not wait on this run's lock.

use std::path::PathBuf;
use std::process::Command;

fn have_go() -> bool {
    Command::new("go").arg("version").output().map(|o| o.status.success()).unwrap_or(false)
}

/// `cum` in bytes of the -top row whose name ends with `func`.
fn cum_bytes(top: &str, func: &str) -> Option<u64> {
    top.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() >= 6 && cols[5..].join(" ").ends_with(func) {
            cols[3].trim_end_matches('B').parse().ok()
        } else {
            None
        }
    })
}

#[test]
fn go_tool_pprof_reads_release_example() {
    if !have_go() {
        eprintln!("go_tool_pprof_reads_release_example: skipped: go is not installed (Debian: golang-go)");
        return;
    }
    // target/<profile>/deps/go_pprof-HASH -> target/
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let sub = target.join("go-pprof-example");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut build = Command::new(&cargo);
    build.args(["build", "--offline", "--release", "--example", "pprof_top"]);
    if cfg!(feature = "unprefixed") {
        build.args(["--features", "unprefixed"]);
    }
    let st = build
        .current_dir(&manifest)
        .env("CARGO_TARGET_DIR", &sub)
        // Frame pointers off, whatever the environment asks for.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo build --release --example pprof_top");
    assert!(st.success(), "cargo build --release --example pprof_top failed");
    let bin = sub.join("release/examples/pprof_top");
    let out = sub.join("heap.pb.gz");
    let _ = std::fs::remove_file(&out);
    let run = Command::new(&bin).arg(&out).env_remove("MP_MALLOC_CONF").env_remove("MALLOC_CONF").output().unwrap();
    assert!(run.status.success(), "pprof_top: {}", String::from_utf8_lossy(&run.stderr));
    let top = Command::new("go")
        .args(["tool", "pprof", "-top", "-unit=B", "-sample_index=inuse_space"])
        .arg(&out)
        .env("PPROF_TMPDIR", &sub)
        .env("HOME", &sub)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(top.status.success(), "go tool pprof: {}", String::from_utf8_lossy(&top.stderr));
    for (func, want) in [("hold_eight_mib", 8u64 << 20), ("hold_four_mib", 4u64 << 20)] {
        let got = cum_bytes(&text, func).unwrap_or_else(|| panic!("no {func} in go tool pprof -top:\n{text}"));
        assert!(got.abs_diff(want) <= want / 100, "{func}: {got} B, expected {want}\n{text}");
    }
}
