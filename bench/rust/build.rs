//! Exposes the locked versions of the measured crates to the binary.

fn locked(lock: &str, name: &str) -> String {
    let marker = format!("name = \"{name}\"\nversion = \"");
    lock.find(&marker).map_or_else(
        || "?".to_string(),
        |at| {
            let rest = &lock[at + marker.len()..];
            rest[..rest.find('"').unwrap_or(0)].to_string()
        },
    )
}

fn main() {
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    println!("cargo:rustc-env=JSONWEBTOKEN_VERSION={}", locked(&lock, "jsonwebtoken"));
    println!("cargo:rustc-env=AWS_LC_RS_VERSION={}", locked(&lock, "aws-lc-rs"));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=RUSTC_VERSION={version}");
    println!("cargo:rerun-if-changed=Cargo.lock");
}
