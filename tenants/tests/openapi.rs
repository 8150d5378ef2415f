//! `tenants/openapi.yaml` against the API it documents: the same
//! operations as the routes the server has (`api::ROUTES`), each with a
//! summary and its responses, every `$ref` resolving, and the served text
//! the file's.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;
use wasmkeep_tenants::api::{OPENAPI, ROUTES};
use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlLoader};

/// The methods of an OpenAPI path item.
const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch", "trace"];

/// The other fields a path item may have.
const PATH_ITEM_FIELDS: &[&str] = &["$ref", "summary", "description", "servers", "parameters"];

fn file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openapi.yaml")
}

fn text() -> String {
    std::fs::read_to_string(file()).unwrap_or_else(|e| panic!("{}: {e}", file().display()))
}

/// The document, parsed (a duplicated key is a parse error).
fn document() -> Yaml {
    let mut docs = YamlLoader::load_from_str(&text()).unwrap_or_else(|e| panic!("{}: {e}", file().display()));
    assert_eq!(docs.len(), 1, "{}: expected one YAML document", file().display());
    docs.remove(0)
}

fn hash<'a>(y: &'a Yaml, what: &str) -> &'a Hash {
    y.as_hash().unwrap_or_else(|| panic!("{what} is not a mapping: {y:?}"))
}

fn key<'a>(k: &'a Yaml, what: &str) -> &'a str {
    k.as_str().unwrap_or_else(|| panic!("a key of {what} is not a string: {k:?}"))
}

/// Every operation of the document: (METHOD, path) and the operation.
fn operations(doc: &Yaml) -> Vec<(String, String, &Yaml)> {
    let mut found = Vec::new();
    for (path, item) in hash(&doc["paths"], "paths") {
        let path = key(path, "paths");
        for (field, operation) in hash(item, path) {
            let field = key(field, path);
            if METHODS.contains(&field) {
                found.push((field.to_uppercase(), path.to_owned(), operation));
            } else {
                assert!(
                    PATH_ITEM_FIELDS.contains(&field),
                    "{path}: `{field}` is neither a method nor a path item field"
                );
            }
        }
    }
    found
}

fn list(set: &BTreeSet<(String, String)>) -> String {
    set.iter().map(|(m, p)| format!("\n  {m} {p}")).collect()
}

#[test]
fn the_operations_are_the_routes() {
    let doc = document();
    let documented: BTreeSet<(String, String)> = operations(&doc).into_iter().map(|(m, p, _)| (m, p)).collect();
    let routes: BTreeSet<(String, String)> = ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    assert_eq!(routes.len(), ROUTES.len(), "ROUTES names a route twice");
    let undocumented = &routes - &documented;
    let unserved = &documented - &routes;
    assert!(
        undocumented.is_empty() && unserved.is_empty(),
        "tenants/openapi.yaml and api::ROUTES differ.\nIn ROUTES, missing from openapi.yaml:{}\nIn openapi.yaml, \
         missing from ROUTES:{}",
        if undocumented.is_empty() { " none".into() } else { list(&undocumented) },
        if unserved.is_empty() { " none".into() } else { list(&unserved) },
    );
}

/// The names of the path parameters an operation declares, its path
/// item's included (a `$ref` resolved).
fn path_parameters(doc: &Yaml, item: &Yaml, operation: &Yaml) -> BTreeSet<String> {
    let declared = [&item["parameters"], &operation["parameters"]];
    declared
        .into_iter()
        .filter_map(Yaml::as_vec)
        .flatten()
        .map(|p| match p["$ref"].as_str() {
            Some(r) => resolve(doc, r).unwrap_or_else(|e| panic!("{e}")),
            None => p,
        })
        .filter(|p| p["in"].as_str() == Some("path"))
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_operation_has_a_summary_responses_and_its_path_parameters() {
    let doc = document();
    let mut wrong = Vec::new();
    for (method, path, operation) in operations(&doc) {
        let at = format!("{method} {path}");
        if operation["summary"].as_str().is_none_or(|s| s.trim().is_empty()) {
            wrong.push(format!("{at}: no summary"));
        }
        match operation["responses"].as_hash() {
            Some(responses) if !responses.is_empty() => {
                for status in responses.keys() {
                    // A status is a string: YAML reads an unquoted 200 as a
                    // number, which JSON (and so OpenAPI) keys cannot be.
                    let ok = status.as_str().is_some_and(|s| {
                        s == "default" || (s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit() || b == b'X'))
                    });
                    if !ok {
                        wrong.push(format!("{at}: response key {status:?} is not a quoted status"));
                    }
                }
            }
            _ => wrong.push(format!("{at}: no responses map")),
        }
        let templated: BTreeSet<String> =
            path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).map(str::to_owned).collect();
        let declared = path_parameters(&doc, &doc["paths"][path.as_str()], operation);
        if templated != declared {
            wrong.push(format!("{at}: path parameters {templated:?}, declared {declared:?}"));
        }
    }
    assert!(wrong.is_empty(), "tenants/openapi.yaml:\n  {}", wrong.join("\n  "));
}

/// The node a local reference (`#/components/...`) names.
fn resolve<'a>(doc: &'a Yaml, reference: &str) -> Result<&'a Yaml, String> {
    let pointer = reference
        .strip_prefix("#/components/")
        .ok_or_else(|| format!("`{reference}` does not point under #/components/"))?;
    let mut node = &doc["components"];
    for segment in pointer.split('/') {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        let next = match node {
            Yaml::Hash(h) => h.get(&Yaml::String(segment.clone())),
            Yaml::Array(a) => segment.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        node = next.ok_or_else(|| format!("`{reference}` does not resolve (no `{segment}`)"))?;
    }
    Ok(node)
}

fn collect_refs<'a>(node: &'a Yaml, refs: &mut Vec<&'a str>) {
    match node {
        Yaml::Hash(h) => {
            for (k, v) in h {
                if k.as_str() == Some("$ref") {
                    refs.push(v.as_str().unwrap_or_else(|| panic!("a $ref is not a string: {v:?}")));
                } else {
                    collect_refs(v, refs);
                }
            }
        }
        Yaml::Array(a) => a.iter().for_each(|v| collect_refs(v, refs)),
        _ => {}
    }
}

#[test]
fn every_ref_resolves_under_components() {
    let doc = document();
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty(), "no $ref at all: is this the document?");
    let broken: Vec<String> = refs.iter().filter_map(|r| resolve(&doc, r).err()).collect();
    assert!(broken.is_empty(), "tenants/openapi.yaml:\n  {}", broken.join("\n  "));
}

#[test]
fn the_served_document_is_the_file() {
    assert!(OPENAPI == text(), "api::OPENAPI is not tenants/openapi.yaml as it is on disk: rebuild");
    assert_eq!(text().lines().next(), Some("openapi: 3.1.0"));
    let doc = document();
    assert_eq!(doc["info"]["title"].as_str(), Some("wasmkeep provisioning API"));
    assert_eq!(doc["info"]["version"].as_str(), Some("1"));
}

/// A YAML node as JSON.
fn json(node: &Yaml) -> Value {
    match node {
        Yaml::Hash(h) => Value::Object(h.iter().map(|(k, v)| (key(k, "an example").to_owned(), json(v))).collect()),
        Yaml::Array(a) => Value::Array(a.iter().map(json).collect()),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => Value::from(r.parse::<f64>().expect("a YAML real")),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Null => Value::Null,
        other => panic!("not JSON: {other:?}"),
    }
}

#[test]
fn the_upload_examples_are_bundles_the_server_accepts() {
    let doc = document();
    let upload = &doc["paths"]["/v1/apps/{app}/versions"]["post"]["requestBody"]["content"]["application/json"];
    let mut examples = vec![&upload["example"]];
    examples.extend(doc["components"]["schemas"]["Bundle"]["examples"].as_vec().into_iter().flatten());
    assert!(examples.iter().all(|e| !e.is_badvalue()) && examples.len() > 1, "the upload has no examples");
    for example in examples {
        let body = serde_json::to_vec(&json(example)).unwrap();
        if let Err(e) = wasmkeep_tenants::bundle::parse(&body, u64::MAX) {
            panic!("an upload example is refused: {e}");
        }
    }
}
