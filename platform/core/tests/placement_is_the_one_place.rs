//! Routing, ownership, failover and draining are decided in
//! `core::placement` and nowhere else (docs/adr/0029): outside it, the
//! readings a decision is made of (liveness, the successor, a take's
//! horizon, hand-off support, the hints) are only passed in, and the
//! placement's machines are driven from one file each. This test reads
//! the platform's sources and fails when another file starts deciding.

use std::path::{Path, PathBuf};

/// What only placement decides with, and the files that may still name it
/// (each for a reason that is not a routing decision).
const READINGS: &[(&str, &[(&str, &str)])] = &[
    (
        ".is_alive(",
        &[
            ("cluster/src/membership.rs", "the view's own accessor"),
            ("cluster/src/peers.rs", "a hop's address: the view re-read when the node is not known alive"),
        ],
    ),
    (
        ".live(",
        &[
            ("cluster/src/membership.rs", "the view's own accessor"),
            ("cluster/src/peers.rs", "a hop's address, read from the view"),
        ],
    ),
    (
        ".alive(",
        &[
            ("cluster/src/membership.rs", "the view's own accessor"),
            ("cluster/src/peers.rs", "a tail asks every live node"),
        ],
    ),
    (".dead_before_ms(", &[("cluster/src/membership.rs", "the view's own accessor")]),
    (".successor(", &[]),
    (".takes_handoffs(", &[]),
    (".hint(", &[("actors/src/router.rs", "read and handed to the route")]),
    ("Route::new(", &[("actors/src/router.rs", "the one driver of a route")]),
    ("take_by(", &[("actors/src/admission.rs", "the one driver of a take")]),
    ("while_draining(", &[("actors/src/admission.rs", "the one driver of a take")]),
    (
        "holding::",
        &[
            ("actors/src/actor.rs", "a retiring actor's epoch"),
            ("actors/src/admission.rs", "an epoch of an older tenure"),
            ("actors/src/drain.rs", "an event that arrived draining"),
            ("cluster/src/membership.rs", "the tenure, driven by the heartbeat and asked by events"),
        ],
    ),
];

fn platform() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the platform directory").to_path_buf()
}

/// Every Rust source of the platform's crates but placement's own and the
/// tests', with its path under `platform/`, comments dropped.
fn sources() -> Vec<(String, String)> {
    let root = platform();
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
            if path.is_dir() {
                let skipped = name.ends_with("/tests") || name.contains("target") || name == "core/src/placement";
                if !skipped && !name.starts_with("sdk") {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((name, without_tests_and_comments(&text)));
            }
        }
    }
    out
}

/// The text before its `#[cfg(test)]` module, without line comments.
fn without_tests_and_comments(text: &str) -> String {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    code.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

#[test]
fn no_module_outside_placement_decides_where_an_actor_runs() {
    let sources = sources();
    assert!(sources.len() > 100, "the platform's sources were found: {}", sources.len());
    let mut found = Vec::new();
    for (reading, allowed) in READINGS {
        for (file, text) in &sources {
            if text.contains(reading) && !allowed.iter().any(|(f, _)| f == file) {
                found.push(format!("{file} uses `{reading}`"));
            }
        }
        // An allowance that is no longer needed goes too.
        for (file, why) in *allowed {
            let used = sources.iter().any(|(f, text)| f == file && text.contains(reading));
            assert!(used, "{file} no longer uses `{reading}` ({why}): drop its allowance");
        }
    }
    assert!(found.is_empty(), "decided outside core::placement:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_decision_made_elsewhere() {
    let text = without_tests_and_comments("fn f() { if members.is_alive(&owner, now) {} } // .successor(\n");
    assert!(text.contains(".is_alive("));
    assert!(!text.contains(".successor("), "comments are not code");
    let tested = without_tests_and_comments("fn f() {}\n#[cfg(test)]\nmod tests { fn g() { m.successor(&k, 0); } }");
    assert!(!tested.contains(".successor("), "tests are not code");
}

/// The modules of `crate_dir`'s `src` and the others each names with
/// `crate::` (tests and comments aside).
fn module_graph(crate_dir: &str) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let src = platform().join(crate_dir).join("src");
    let modules: std::collections::BTreeSet<String> = std::fs::read_dir(&src)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".rs").map(str::to_owned))
        .collect();
    let mut graph = std::collections::BTreeMap::new();
    for module in &modules {
        let text = without_tests_and_comments(&std::fs::read_to_string(src.join(format!("{module}.rs"))).unwrap());
        let mut named = std::collections::BTreeSet::new();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let mut names = vec![rest];
            if let Some(group) = rest.strip_prefix('{') {
                names = group.split('}').next().unwrap_or_default().split(',').collect();
            }
            for name in names {
                let name: String = name.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if modules.contains(&name) && name != *module {
                    named.insert(name);
                }
            }
        }
        graph.insert(module.clone(), named);
    }
    graph
}

/// The strongly connected groups of more than one module (Tarjan).
fn circles(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    use std::collections::BTreeMap;
    struct Walk<'g> {
        graph: &'g BTreeMap<String, std::collections::BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            for w in &self.graph[v] {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w.as_str()]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w.as_str()) {
                    let low = self.low[v].min(self.index[w.as_str()]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut group = Vec::new();
                while let Some(w) = self.stack.pop() {
                    group.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    self.found.push(group);
                }
            }
        }
    }
    let mut walk = Walk { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), found: Vec::new() };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn the_modules_of_actors_core_and_edge_import_in_one_direction() {
    for crate_dir in ["actors", "core", "edge"] {
        let graph = module_graph(crate_dir);
        assert!(graph.len() > 5, "{crate_dir}'s modules were read");
        assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "import circles in {crate_dir}");
    }
}

#[test]
fn the_circle_check_sees_a_circle() {
    let edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")];
    let mut graph = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for (from, to) in edges {
        graph.entry(from.into()).or_default().insert(to.into());
        graph.entry(to.into()).or_default();
    }
    let mut found = circles(&graph);
    found[0].sort();
    assert_eq!(found, [["a", "b", "c"]]);
}
