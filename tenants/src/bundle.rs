//! The upload of a version: a JSON bundle of the manifest and the
//! components it names (documented in `tenants/openapi.yaml`).
//!
//! ```json
//! {"manifest": {"values": ["TOKEN"], "front": "web", "env": {"LOG_LEVEL": "debug"},
//!               "classes": {"room": {"access": "open", "component": "room"}}},
//!  "components": {"web": "<base64>", "room": "<base64>"}}
//! ```
//!
//! Everything is checked here before anything is stored: the manifest's
//! fields, that every component it names is in the bundle and every one
//! in the bundle is named. Whether each is a component of the right world
//! whose imports the host provides is the node's check, made next.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use wasmkeep_actors::{ClassSpec, VersionSpec};
use wasmkeep_core::{Access, ClassName};

/// A bundle as sent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bundle<'a> {
    pub manifest: BundleManifest,
    /// Component name to its bytes, base64 (standard alphabet, padded):
    /// read in place from the body (base64 has nothing to unescape), so
    /// that parsing holds no second copy of an upload.
    #[serde(borrow)]
    pub components: BTreeMap<String, Cow<'a, str>>,
}

/// The manifest of a bundle: `wasmkeep.toml`'s fields, with components
/// named by their key in the bundle.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleManifest {
    /// Values the app requires before its actors run.
    #[serde(default)]
    pub values: Vec<String>,
    /// The front's component, if the app has one.
    #[serde(default)]
    pub front: Option<String>,
    #[serde(default)]
    pub classes: BTreeMap<String, BundleClass>,
    /// Environment variables of every front and actor (plain settings).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleClass {
    pub access: String,
    pub component: String,
}

/// The longest value name.
pub const VALUE_NAME_MAX: usize = 128;

/// Checks a value's name: 1–128 of ASCII letters, digits, `_` and `-`.
pub fn check_value_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= VALUE_NAME_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok { Ok(()) } else { Err(format!("value name must be 1-{VALUE_NAME_MAX} of letters, digits, `_` and `-`")) }
}

/// The version a bundle describes, or the first thing wrong with it (one
/// line, for the uploader). Each component is decoded once, however many
/// classes name it, and the decoded bytes together are at most
/// `upload_bytes`.
pub fn parse(body: &[u8], upload_bytes: u64) -> Result<VersionSpec, String> {
    let bundle: Bundle = serde_json::from_slice(body).map_err(|e| format!("bundle: {e}"))?;
    let m = &bundle.manifest;
    if m.front.is_none() && m.classes.is_empty() {
        return Err("manifest: the app has neither a front nor a class".into());
    }
    for name in &m.values {
        check_value_name(name).map_err(|e| format!("manifest: values: {e}"))?;
    }
    wasmkeep_core::environment::check(&m.env).map_err(|e| format!("manifest: env: {e}"))?;
    let mut decoded: BTreeMap<&str, Arc<[u8]>> = BTreeMap::new();
    let mut decoded_bytes = 0u64;
    let mut component = |role: &str, key: &str| -> Result<Arc<[u8]>, String> {
        if let Some(wasm) = decoded.get(key) {
            return Ok(wasm.clone());
        }
        let (key, encoded) = bundle
            .components
            .get_key_value(key)
            .ok_or_else(|| format!("manifest: {role} names component `{key}`, which the bundle does not hold"))?;
        let not_base64 = || format!("components: `{key}` is not base64");
        // Counted before it is decoded: nothing past the bound is allocated.
        decoded_bytes += decoded_len(encoded.as_bytes()).ok_or_else(not_base64)? as u64;
        if decoded_bytes > upload_bytes {
            return Err(format!("components: over {upload_bytes} bytes decoded (the plan's upload_bytes)"));
        }
        let wasm = decode(encoded.as_bytes()).ok_or_else(not_base64)?;
        decoded.insert(key, wasm.clone());
        Ok(wasm)
    };
    let front = m.front.as_deref().map(|key| component("the front", key)).transpose()?;
    let mut classes = Vec::with_capacity(m.classes.len());
    for (name, class) in &m.classes {
        let class_name = ClassName::parse(name).map_err(|e| format!("manifest: class `{name}`: {e}"))?;
        let access = Access::parse(&class.access).ok_or_else(|| {
            format!("manifest: class `{name}`: access must be open, existing or internal, not `{}`", class.access)
        })?;
        let wasm = component(&format!("class `{name}`"), &class.component)?;
        classes.push(ClassSpec { name: class_name, access, wasm });
    }
    if let Some(unused) = bundle.components.keys().find(|k| !decoded.contains_key(k.as_str())) {
        return Err(format!("components: `{unused}` is not named by the manifest"));
    }
    Ok(VersionSpec { front: front.map(|f| f.to_vec()), classes, required_values: m.values.clone(), env: m.env.clone() })
}

/// The length `encoded` (padded base64) decodes to; `None` when no
/// padded base64 is that long.
fn decoded_len(encoded: &[u8]) -> Option<usize> {
    if !encoded.len().is_multiple_of(4) {
        return None;
    }
    let padding = encoded.iter().rev().take(2).take_while(|&&b| b == b'=').count();
    (encoded.len() / 4 * 3).checked_sub(padding)
}

/// `encoded` (standard alphabet, padded) decoded into one allocation of
/// its length: no second copy of a component is made on the way.
fn decode(encoded: &[u8]) -> Option<Arc<[u8]>> {
    let len = decoded_len(encoded)?;
    // An exact-size iterator collects into the `Arc`'s own allocation.
    let mut wasm: Arc<[u8]> = std::iter::repeat_n(0u8, len).collect();
    let out = Arc::get_mut(&mut wasm).expect("just made");
    let written = base64::engine::general_purpose::STANDARD.decode_slice(encoded, out).ok()?;
    (written == len).then_some(wasm)
}

/// The bundle of a version: each distinct component once, named by the
/// first role that uses it (`_front`, or a class's name: no clash).
pub fn encode(spec: &VersionSpec) -> Vec<u8> {
    let mut components: BTreeMap<String, Cow<'static, str>> = BTreeMap::new();
    let mut by_bytes: BTreeMap<&[u8], String> = BTreeMap::new();
    let front = spec.front.as_deref().map(|wasm| component_key(&mut by_bytes, &mut components, "_front", wasm));
    let classes = spec
        .classes
        .iter()
        .map(|c| {
            let component = component_key(&mut by_bytes, &mut components, c.name.as_str(), &c.wasm);
            (c.name.to_string(), BundleClass { access: c.access.as_str().to_owned(), component })
        })
        .collect();
    let manifest = BundleManifest { values: spec.required_values.clone(), front, classes, env: spec.env.clone() };
    serde_json::to_vec(&Bundle { manifest, components }).expect("a bundle serializes")
}

/// The key of `wasm` in the bundle: the one it has, or `role` as a new one.
fn component_key<'a>(
    by_bytes: &mut BTreeMap<&'a [u8], String>,
    components: &mut BTreeMap<String, Cow<'static, str>>,
    role: &str,
    wasm: &'a [u8],
) -> String {
    by_bytes
        .entry(wasm)
        .or_insert_with(|| {
            components.insert(role.to_owned(), base64::engine::general_purpose::STANDARD.encode(wasm).into());
            role.to_owned()
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    fn bundle(manifest: serde_json::Value, components: &[(&str, &[u8])]) -> Vec<u8> {
        let components: BTreeMap<_, _> = components.iter().map(|(k, v)| (k.to_string(), b64(v))).collect();
        serde_json::to_vec(&serde_json::json!({"manifest": manifest, "components": components})).unwrap()
    }

    #[test]
    fn a_good_bundle() {
        let body = bundle(
            serde_json::json!({"values": ["TOKEN_SECRET"], "front": "web",
                "classes": {"room": {"access": "open", "component": "shared"},
                            "lobby": {"access": "internal", "component": "shared"}}}),
            &[("web", b"front-bytes"), ("shared", b"room-bytes")],
        );
        let spec = parse(&body, 1 << 20).unwrap();
        assert_eq!(spec.front.as_deref(), Some(&b"front-bytes"[..]));
        assert_eq!(spec.classes.len(), 2);
        assert!(spec.classes.iter().all(|c| &*c.wasm == b"room-bytes"));
        assert!(Arc::ptr_eq(&spec.classes[0].wasm, &spec.classes[1].wasm), "decoded once, shared");
        assert_eq!(spec.required_values, ["TOKEN_SECRET"]);
    }

    #[test]
    fn every_mistake_is_named() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "bundle: expected"),
            (bundle(serde_json::json!({}), &[]), "neither a front nor a class"),
            (
                bundle(serde_json::json!({"classes": {"cart": {"access": "open", "component": "cart"}}}), &[]),
                "class `cart` names component `cart`, which the bundle does not hold",
            ),
            (bundle(serde_json::json!({"front": "web"}), &[("web", b"x"), ("extra", b"y")]), "`extra` is not named"),
            (
                bundle(serde_json::json!({"classes": {"Cart": {"access": "open", "component": "c"}}}), &[("c", b"x")]),
                "class `Cart`",
            ),
            (
                bundle(serde_json::json!({"classes": {"c": {"access": "public", "component": "c"}}}), &[("c", b"x")]),
                "not `public`",
            ),
            (bundle(serde_json::json!({"front": "web", "values": ["A B"]}), &[("web", b"x")]), "values: value name"),
            (
                bundle(serde_json::json!({"front": "web", "env": {"PATH=x": "y"}}), &[("web", b"x")]),
                "manifest: env: `PATH=x` is not a variable name",
            ),
            (
                bundle(serde_json::json!({"front": "web", "env": {"A": 1}}), &[("web", b"x")]),
                "invalid type: integer `1`, expected a string",
            ),
            (
                serde_json::to_vec(&serde_json::json!({"manifest": {"front": "web"}, "components": {"web": "%%"}}))
                    .unwrap(),
                "`web` is not base64",
            ),
            (
                serde_json::to_vec(&serde_json::json!({"manifest": {"front": "w"}, "components": {}, "x": 1})).unwrap(),
                "unknown field `x`",
            ),
        ];
        for (body, expected) in cases {
            let e = parse(&body, 1 << 20).unwrap_err();
            assert!(e.contains(expected), "{e} (expected {expected})");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn encoding_round_trips_and_shares_components() {
        let class = |name: &str, access, wasm: &[u8]| ClassSpec {
            name: ClassName::parse(name).unwrap(),
            access,
            wasm: wasm.into(),
        };
        let spec = VersionSpec {
            front: Some(b"f".to_vec()),
            classes: vec![class("a", Access::Open, b"shared"), class("b", Access::Internal, b"shared")],
            required_values: vec!["K".into()],
            env: [("LOG_LEVEL".to_owned(), "debug".to_owned())].into(),
        };
        let body = encode(&spec);
        let bundle: Bundle = serde_json::from_slice(&body).unwrap();
        assert_eq!(bundle.components.len(), 2, "the shared component is sent once");
        let back = parse(&body, 1 << 20).unwrap();
        assert_eq!(back.front, spec.front);
        assert_eq!(back.required_values, spec.required_values);
        assert_eq!(back.env, spec.env);
        let classes: Vec<_> = back.classes.iter().map(|c| (c.name.as_str(), c.access, &*c.wasm)).collect();
        assert_eq!(classes, [("a", Access::Open, &b"shared"[..]), ("b", Access::Internal, &b"shared"[..])]);
    }

    #[test]
    fn decoded_bytes_count_against_the_upload_bound_once_per_component() {
        let wasm = vec![7u8; 3000];
        let classes: serde_json::Map<_, _> =
            (0..50).map(|i| (format!("c{i}"), serde_json::json!({"access": "open", "component": "one"}))).collect();
        let body = bundle(serde_json::json!({"classes": classes}), &[("one", &wasm)]);
        let spec = parse(&body, 3000).expect("one component of 3,000 bytes, named 50 times");
        assert_eq!(spec.classes.len(), 50);
        assert!(spec.classes.iter().all(|c| Arc::ptr_eq(&c.wasm, &spec.classes[0].wasm)));
        let two = bundle(
            serde_json::json!({"front": "a", "classes": {"c": {"access": "open", "component": "b"}}}),
            &[("a", &wasm), ("b", &wasm[..1])],
        );
        let e = parse(&two, 3000).unwrap_err();
        assert_eq!(e, "components: over 3000 bytes decoded (the plan's upload_bytes)");
    }

    #[test]
    fn components_decode_as_base64_does() {
        let engine = base64::engine::general_purpose::STANDARD;
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let encoded = engine.encode(&bytes);
            assert_eq!(decode(encoded.as_bytes()).as_deref(), Some(&bytes[..]), "{len} bytes");
        }
        for bad in ["a", "abc", "ab=c", "a===", "%%%%", "YQ==YQ=="] {
            assert_eq!(decode(bad.as_bytes()), engine.decode(bad).ok().map(Arc::from), "{bad}");
        }
    }

    #[test]
    fn value_names() {
        for good in ["A", "TOKEN_SECRET", "api-key", &"x".repeat(128)] {
            check_value_name(good).unwrap();
        }
        for bad in ["", "a b", "a/b", "é", &"x".repeat(129)] {
            assert!(check_value_name(bad).is_err(), "{bad}");
        }
    }
}
