//! build.rs: compile this repository's C library (the README's autotools
//! flow, out of tree in OUT_DIR) and link it statically, or link an
//! installed copy named by MALLOC_PROF_PREFIX_DIR.
//!
//! The default build is `--with-prefix=mp_`: Rust's allocations go to
//! libmalloc_prof while C code in the same process keeps the C library's
//! malloc (what tikv-jemalloc-sys does with `_rjem_`).  The `unprefixed`
//! feature builds without the prefix, so that the library replaces malloc
//! for the whole process.  Every failure is one line starting with
//! `<malloc_prof>: ` that names the cause.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

fn fail(msg: &str) -> ! {
    eprintln!("<malloc_prof>: {msg}");
    // cargo shows the build script's stderr only on failure; exit(1) makes
    // it a failure without a panic's backtrace noise.
    std::process::exit(1);
}

fn prefixed() -> bool {
    env::var_os("CARGO_FEATURE_UNPREFIXED").is_none()
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {cmd} >/dev/null 2>&1"))
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// true when `a` is missing or older than `b`.
fn stale(a: &Path, b: &Path) -> bool {
    match (mtime(a), mtime(b)) {
        (Some(ta), Some(tb)) => ta < tb,
        (None, _) => true,
        _ => false,
    }
}

fn run(cmd: &mut Command, what: &str, log: &Path) {
    let out = fs::File::create(log)
        .unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", log.display())));
    let err = out.try_clone().unwrap_or_else(|e| fail(&format!("{}: {e}", log.display())));
    let status = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .unwrap_or_else(|e| fail(&format!("{what}: cannot start: {e}")));
    if !status.success() {
        // The tail of the log is where autotools and make say why.
        let text = fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(25).collect();
        for l in tail.iter().rev() {
            eprintln!("{l}");
        }
        fail(&format!("{what} failed ({status}); full log: {}", log.display()));
    }
}

/// Link an installed copy: $DIR/lib/libmalloc_prof.a (static) or .so.
fn link_installed(dir: &Path) {
    let lib = dir.join("lib");
    let header = dir.join("include/malloc_prof.h");
    let text = fs::read_to_string(&header).unwrap_or_else(|e| {
        fail(&format!(
            "MALLOC_PROF_PREFIX_DIR={}: cannot read {}: {e}",
            dir.display(),
            header.display()
        ))
    });
    // The Rust side names mp_mallocx or mallocx by the feature: the
    // installed build must have been configured the same way.
    let want = if prefixed() { "\"mp_\"" } else { "\"\"" };
    let line = text
        .lines()
        .find(|l| l.starts_with("#define MALLOC_PROF_PREFIX "))
        .unwrap_or("");
    if !line.ends_with(want) {
        fail(&format!(
            "MALLOC_PROF_PREFIX_DIR={}: {} has `{}` but this crate {} (configure it {})",
            dir.display(),
            header.display(),
            line.trim(),
            if prefixed() {
                "expects the prefix \"mp_\""
            } else {
                "has the `unprefixed` feature"
            },
            if prefixed() {
                "with --with-prefix=mp_, or enable the `unprefixed` feature"
            } else {
                "without --with-prefix"
            }
        ));
    }
    println!("cargo:rustc-link-search=native={}", lib.display());
    if lib.join("libmalloc_prof.a").exists() {
        println!("cargo:rustc-link-lib=static=malloc_prof");
    } else if lib.join("libmalloc_prof.so").exists() {
        println!("cargo:rustc-link-lib=dylib=malloc_prof");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    } else {
        fail(&format!(
            "MALLOC_PROF_PREFIX_DIR={}: neither libmalloc_prof.a nor libmalloc_prof.so in {}",
            dir.display(),
            lib.display()
        ));
    }
    println!("cargo:include={}", dir.join("include").display());
    println!("cargo:rerun-if-changed={}", header.display());
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MALLOC_PROF_PREFIX_DIR");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CFLAGS");

    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "linux" {
        fail(&format!("target OS \"{os}\": libmalloc_prof supports Linux (glibc) only"));
    }
    if env::var("TARGET").ok() != env::var("HOST").ok() {
        fail("cross-compiling is not supported: build the C library for the target yourself and set MALLOC_PROF_PREFIX_DIR to its install prefix");
    }

    if let Some(dir) = env::var_os("MALLOC_PROF_PREFIX_DIR").filter(|d| !d.is_empty()) {
        link_installed(Path::new(&dir));
        println!("cargo:rustc-link-lib=pthread");
        println!("cargo:rustc-link-lib=m");
        return;
    }

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..");
    let root = root.canonicalize().unwrap_or(root);
    if !root.join("configure.ac").exists() || !root.join("src").is_dir() {
        fail(&format!(
            "the C sources are not at {} (this crate builds the repository it lives in; set MALLOC_PROF_PREFIX_DIR to an installed copy instead)",
            root.display()
        ));
    }
    for p in ["src", "include/malloc_prof.h.in", "include/malloc_prof/internal", "configure.ac", "Makefile.am", "autogen.sh"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }

    // Tools, checked first so that a missing one is named rather than
    // reported as a cryptic configure or make failure.
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let cc_cmd = cc.split_whitespace().next().unwrap_or("cc").to_string();
    let mut missing = Vec::new();
    if !have(&cc_cmd) {
        missing.push(format!("a C compiler ({cc_cmd}; Debian: build-essential)"));
    }
    if !have("make") {
        missing.push("make (Debian: build-essential)".to_string());
    }
    let configure = root.join("configure");
    let makefile_in = root.join("Makefile.in");
    let regen = stale(&makefile_in, &root.join("configure.ac"))
        || stale(&makefile_in, &root.join("Makefile.am"))
        || stale(&configure, &root.join("configure.ac"))
        || !root.join("build-aux/tap-driver.sh").exists();
    if regen {
        for (tool, pkg) in [("autoconf", "autoconf"), ("automake", "automake"), ("aclocal", "automake"), ("libtoolize", "libtool"), ("pkg-config", "pkg-config")] {
            if !have(tool) {
                missing.push(format!("{tool} (Debian: {pkg})"));
            }
        }
    }
    if !missing.is_empty() {
        fail(&format!(
            "cannot build the C library, missing: {} (or set MALLOC_PROF_PREFIX_DIR to an installed libmalloc_prof)",
            missing.join(", ")
        ));
    }
    if root.join("config.status").exists() {
        fail(&format!(
            "{} was configured in place, which stops out-of-tree builds: run `make distclean` there",
            root.display()
        ));
    }

    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let build = out.join("build");
    fs::create_dir_all(&build).unwrap_or_else(|e| fail(&format!("{}: {e}", build.display())));
    if regen {
        run(Command::new("sh").arg("autogen.sh").current_dir(&root), "sh autogen.sh", &out.join("autogen.log"));
    }

    // Position-independent objects so that the archive links into PIE
    // executables and cdylibs alike; no shared library to save time.
    let mut args = vec!["--disable-shared".to_string(), "--with-pic".to_string()];
    if prefixed() {
        args.push("--with-prefix=mp_".to_string());
    }
    let stamp = build.join(".cargo-configure-args");
    let want = format!("{}\n{}\n{}", args.join(" "), cc, env::var("CFLAGS").unwrap_or_default());
    let configured = build.join("Makefile").exists()
        && fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str())
        && !stale(&build.join("config.status"), &configure);
    if !configured {
        let _ = fs::remove_file(&stamp);
        run(
            Command::new(&configure).args(&args).env("CC", &cc).current_dir(&build),
            "configure",
            &out.join("configure.log"),
        );
        fs::write(&stamp, &want).unwrap_or_else(|e| fail(&format!("{}: {e}", stamp.display())));
    }
    let jobs = env::var("NUM_JOBS").ok().and_then(|j| j.parse::<u32>().ok()).unwrap_or(2).max(1);
    run(
        Command::new("make").arg(format!("-j{jobs}")).arg("libmalloc_prof.la").current_dir(&build),
        "make libmalloc_prof.la",
        &out.join("make.log"),
    );
    let libs = build.join(".libs");
    if !libs.join("libmalloc_prof.a").exists() {
        fail(&format!("make did not produce {}", libs.join("libmalloc_prof.a").display()));
    }
    println!("cargo:rustc-link-search=native={}", libs.display());
    println!("cargo:rustc-link-lib=static=malloc_prof");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rustc-link-lib=m");
    println!("cargo:include={}", build.join("include").display());
}
