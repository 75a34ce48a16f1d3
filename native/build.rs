//! Compiles `csrc/bip340_batch.c` (BIP-340 batch verification) against the libsecp256k1
//! source that the `secp256k1-sys` crate vendors and builds: the batch check needs the
//! library's internal field and group arithmetic (and its G tables), which its public API
//! does not offer.
//! The C file includes only `static` internals, so its object defines only its own public
//! symbols (`snap_bip340_key_table_size`, `snap_bip340_key_table`,
//! `snap_bip340_batch_verify`) and links to the tables secp256k1-sys already compiled.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate whose source is compiled against, and the prefix its build renames
/// libsecp256k1's symbols with (`links` in its Cargo.toml).
const SYS_CRATE: &str = "secp256k1-sys";
const SYS_PREFIX: &str = "rustsecp256k1_v0_14_";
const SYS_VERSION_PREFIX: &str = "0.14.";

fn main() {
    println!("cargo:rerun-if-changed=csrc/bip340_batch.c");
    println!("cargo:rerun-if-env-changed=SNAP_SECP256K1_SRC");
    let source = find_sys_source().unwrap_or_else(|| {
        panic!("cannot find the {SYS_CRATE} {SYS_VERSION_PREFIX}x source (set SNAP_SECP256K1_SRC \
                to its depend/secp256k1 folder)")
    });
    cc::Build::new()
        .file("csrc/bip340_batch.c")
        .include(&source)
        .include(source.join("include"))
        .include(source.join("src"))
        // the settings secp256k1-sys builds the library with: the tables must agree
        .define("ECMULT_WINDOW_SIZE", Some("15"))
        .define("COMB_BLOCKS", Some("43"))
        .define("COMB_TEETH", Some("6"))
        .define("USE_EXTERNAL_DEFAULT_CALLBACKS", Some("1"))
        .define("SNAP_SECP", Some(SYS_PREFIX))
        .define("printf(...)", Some(""))
        .flag_if_supported("-Wno-unused-function")
        .flag_if_supported("-Wno-unused-parameter")
        .opt_level(3)
        .compile("snap_bip340_batch");
}

/// `depend/secp256k1` of the secp256k1-sys package cargo resolved: asked of
/// `cargo metadata`, else looked for in cargo's registry folders.
fn find_sys_source() -> Option<PathBuf> {
    if let Ok(path) = env::var("SNAP_SECP256K1_SRC") {
        return Some(PathBuf::from(path));
    }
    let from_metadata = sys_manifest_from_metadata()
        .and_then(|manifest| manifest.parent().map(|p| p.join("depend").join("secp256k1")));
    if let Some(found) = from_metadata.filter(|p| p.join("src").join("ecmult_impl.h").exists()) {
        return Some(found);
    }
    let home = env::var_os("CARGO_HOME").map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(home.join("registry").join("src")).ok()?
        .flatten()
        .flat_map(|index| std::fs::read_dir(index.path()).into_iter().flatten().flatten())
        .map(|entry| entry.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&format!("{SYS_CRATE}-{SYS_VERSION_PREFIX}"))))
        .map(|p| p.join("depend").join("secp256k1"))
        .filter(|p| p.join("src").join("ecmult_impl.h").exists())
        .collect();
    found.sort();
    found.pop()
}

fn sys_manifest_from_metadata() -> Option<PathBuf> {
    let cargo = env::var("CARGO").ok()?;
    let manifest = Path::new(&env::var("CARGO_MANIFEST_DIR").ok()?).join("Cargo.toml");
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--manifest-path"])
        .arg(&manifest)
        .output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    // the one "manifest_path" that ends in secp256k1-sys-0.14.x/Cargo.toml
    let needle = format!("/{SYS_CRATE}-{SYS_VERSION_PREFIX}");
    text.split("\"manifest_path\":\"").skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap_or(0)])
        .find(|path| path.contains(&needle) && path.ends_with("/Cargo.toml"))
        .map(PathBuf::from)
}
