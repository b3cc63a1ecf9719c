//! The source layout stays layered: within every crate of the repository, no module imports a
//! module that (directly or through others) imports it back. A cycle of `use` statements means
//! two files cannot be understood, or changed, one without the other. And the engine's file
//! systems sit below the manifest.

#![allow(clippy::unwrap_used)] // Tests fail loudly on unexpected errors.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate (`["db", "flush"]`); the crate root is empty.
type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("lib" | "main" | "mod")
    ) {
        parts.pop();
    }
    parts
}

/// The `use crate::…`, `use super::…` and `use self::…` paths of a file, outside its tests.
fn use_paths(text: &str) -> Vec<Vec<String>> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut paths = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        let rest = line
            .strip_prefix("pub use ")
            .or_else(|| line.strip_prefix("pub(crate) use "))
            .or_else(|| line.strip_prefix("use "));
        let Some(rest) = rest else { continue };
        let path: Vec<String> = rest
            .split(['{', ';', ' '])
            .next()
            .unwrap_or_default()
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        if matches!(
            path.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) {
            paths.push(path);
        }
    }
    paths
}

/// Resolves a `use` path written in `from` to the module file it names (the longest prefix of
/// the path that is a module).
fn resolve(from: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let (base, names): (Module, &[String]) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("super") | Some("self") => {
            // `self` is the module itself, `super` its parent (the same for `foo.rs` and
            // `foo/mod.rs`).
            let mut base = from.clone();
            let mut rest = path;
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
            (base, rest)
        }
        _ => return None,
    };
    (0..=names.len()).rev().find_map(|k| {
        let mut candidate = base.clone();
        candidate.extend(names[..k].iter().cloned());
        modules.contains(&candidate).then_some(candidate)
    })
}

fn crate_source_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("src")];
    for parent in ["crates", "examples"] {
        let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
            continue;
        };
        for entry in entries {
            let src = entry.unwrap().path().join("src");
            if src.is_dir() {
                dirs.push(src);
            }
        }
    }
    dirs.sort();
    dirs
}

/// Each module of the crate under `src` and the modules its `use` statements name.
fn import_graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files
        .iter()
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let names: BTreeSet<Module> = modules.keys().cloned().collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in &modules {
        for path in use_paths(&std::fs::read_to_string(file).unwrap()) {
            if let Some(target) = resolve(module, &path, &names) {
                if &target != module {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    edges
}

/// Whether `from` imports `to`, directly or through other modules.
fn reaches(edges: &BTreeMap<Module, BTreeSet<Module>>, from: &Module, to: &Module) -> bool {
    let mut stack: Vec<&Module> = edges.get(from).into_iter().flatten().collect();
    let mut seen = BTreeSet::new();
    while let Some(m) = stack.pop() {
        if m == to {
            return true;
        }
        if seen.insert(m) {
            stack.extend(edges.get(m).into_iter().flatten());
        }
    }
    false
}

#[test]
fn no_module_imports_a_module_that_imports_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cycles = Vec::new();
    let mut edges_seen = 0;
    for src in crate_source_dirs(root) {
        let edges = import_graph(&src);
        edges_seen += edges.values().map(BTreeSet::len).sum::<usize>();
        // A cycle exists when some module reaches itself.
        for start in edges.keys() {
            if reaches(&edges, start, start) {
                cycles.push(format!(
                    "{}: {} is part of an import cycle",
                    src.strip_prefix(root).unwrap().display(),
                    if start.is_empty() {
                        "the crate root".to_string()
                    } else {
                        start.join("::")
                    }
                ));
            }
        }
    }
    assert!(edges_seen > 100, "the scan found only {edges_seen} imports");
    assert!(cycles.is_empty(), "{}", cycles.join("\n"));
}

#[test]
fn the_file_systems_do_not_import_the_manifest() {
    // A file system stores bytes; what the files mean (the manifest's records, recovery) sits
    // above it. File names and kinds live in `filename`, which both use.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/strata-engine/src");
    let edges = import_graph(&src);
    let manifest = vec!["manifest".to_string()];
    let file_systems: Vec<&Module> = edges
        .keys()
        .filter(|m| m.first().is_some_and(|f| f == "fs"))
        .collect();
    assert!(file_systems.len() >= 5, "found {file_systems:?}");
    let offenders: Vec<String> = file_systems
        .into_iter()
        .filter(|m| reaches(&edges, m, &manifest))
        .map(|m| m.join("::"))
        .collect();
    assert!(
        offenders.is_empty(),
        "these modules import the manifest, directly or through others: {offenders:?}"
    );
}

#[test]
fn the_scan_finds_a_planted_cycle() {
    // The same logic on a two-module crate whose modules import each other.
    let modules: BTreeSet<Module> = [vec![], vec!["a".to_string()], vec!["b".to_string()]]
        .into_iter()
        .collect();
    let a_uses = use_paths("use crate::b::Thing;\nuse std::fmt;\n");
    let b_uses = use_paths("pub use super::a::{One, Two};\n#[cfg(test)]\nuse crate::a::Hidden;\n");
    assert_eq!(a_uses.len(), 1);
    assert_eq!(b_uses.len(), 1);
    let a = vec!["a".to_string()];
    let b = vec!["b".to_string()];
    assert_eq!(resolve(&a, &a_uses[0], &modules), Some(b.clone()));
    assert_eq!(resolve(&b, &b_uses[0], &modules), Some(a));
}
