//! Records a hash of the crate's sources so the Python tests can prove the
//! imported module was built from this tree (and not taken from an index),
//! and whether the build is profile-guided (`scripts/corewheel.py --pgo`).

use std::fs;
use std::path::Path;

fn fnv1a(hash: &mut u64, bytes: &[u8]) {
    for byte in bytes {
        *hash ^= u64::from(*byte);
        *hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
}

/// Every `.rs` file under `dir`, as paths relative to `src` with `/`
/// separators, so the hash is the same on every platform.
fn sources(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).expect("source directory").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            sources(&path, &format!("{prefix}{name}/"), out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(format!("{prefix}{name}"));
        }
    }
}

fn main() {
    let mut names = Vec::new();
    sources(Path::new("src"), "", &mut names);
    names.sort();
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for name in &names {
        fnv1a(&mut hash, name.as_bytes());
        fnv1a(&mut hash, &[0]);
        fnv1a(
            &mut hash,
            &fs::read(Path::new("src").join(name)).expect("source file"),
        );
        fnv1a(&mut hash, &[0]);
    }
    println!("cargo:rustc-env=GRELMICRO_CORE_SOURCE_HASH={hash:016x}");
    println!("cargo:rerun-if-changed=src");
    // The flags cargo compiles the crate with (separated by 0x1f).
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let pgo = if flags.contains("profile-use=") {
        "trained"
    } else if flags.contains("profile-generate") {
        "instrumented"
    } else {
        "off"
    };
    println!("cargo:rustc-env=GRELMICRO_CORE_PGO={pgo}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
}
