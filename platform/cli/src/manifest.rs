//! The app manifest, `wasmkeep.toml`.
//!
//! ```toml
//! name = "counter"
//! values = ["GREETING"]        # values the app requires (optional)
//! front = "front"              # the front: a cargo or npm project, or a .wasm (optional)
//!
//! [env]                        # plain settings for every guest (optional)
//! LOG_LEVEL = "debug"
//!
//! [classes.counter]
//! access = "open"              # open | existing | internal
//! component = "."              # a cargo or npm project, or a .wasm file
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use wasmkeep_core::{Access, ClassName};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    #[serde(default)]
    values: Vec<String>,
    front: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    classes: BTreeMap<String, RawClass>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    access: String,
    component: String,
}

/// A checked manifest, paths resolved against the app's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub required_values: Vec<String>,
    /// Environment variables of every front and actor.
    pub env: BTreeMap<String, String>,
    /// The front, serving every path outside `/actor/`.
    pub front: Option<Component>,
    pub classes: Vec<ClassEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassEntry {
    pub name: ClassName,
    pub access: Access,
    pub component: Component,
}

/// Where a class's component comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    /// A cargo project to build for `wasm32-wasip2`.
    Cargo(PathBuf),
    /// An npm project (TypeScript or JavaScript) to build with the SDK.
    Npm(PathBuf),
    /// A component already built.
    Wasm(PathBuf),
}

/// Reads and checks `APP_DIR/wasmkeep.toml`. Errors are one line naming
/// the file and the field.
pub fn load(app_dir: &Path) -> Result<Manifest, String> {
    let file = app_dir.join("wasmkeep.toml");
    let shown = file.display();
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    parse(&text, app_dir).map_err(|e| format!("{shown}: {e}"))
}

fn parse(text: &str, app_dir: &Path) -> Result<Manifest, String> {
    let raw: RawManifest = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        let msg = e.message().lines().next().unwrap_or_default().to_owned();
        match line {
            Some(l) => format!("line {l}: {msg}"),
            None => msg,
        }
    })?;
    if raw.name.trim().is_empty() {
        return Err("name: must not be empty".into());
    }
    if raw.name.len() > 63 || !raw.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        return Err(format!("name: `{}` must be 1-63 of a-z, 0-9 and '-'", raw.name));
    }
    if raw.classes.is_empty() && raw.front.is_none() {
        return Err("classes: the app has neither a front nor a class; add a [classes.<name>] table".into());
    }
    for (i, v) in raw.values.iter().enumerate() {
        if v.is_empty() || v.chars().any(|c| c.is_control() || c == '=') {
            return Err(format!("values[{i}]: `{v}` is not a value name"));
        }
    }
    wasmkeep_core::environment::check(&raw.env).map_err(|e| format!("env: {e}"))?;
    let mut classes = Vec::new();
    for (name, c) in raw.classes {
        let field = format!("classes.{name}");
        let class = ClassName::parse(&name).map_err(|e| format!("{field}: {e}"))?;
        let access = Access::parse(&c.access)
            .ok_or_else(|| format!("{field}.access: `{}` is not one of open, existing, internal", c.access))?;
        let component = component(&format!("{field}.component"), app_dir, &c.component)?;
        classes.push(ClassEntry { name: class, access, component });
    }
    let front = raw.front.map(|f| component("front", app_dir, &f)).transpose()?;
    Ok(Manifest { name: raw.name, required_values: raw.values, env: raw.env, front, classes })
}

/// Where `field`'s component, `given` relative to the app, comes from.
fn component(field: &str, app_dir: &Path, given: &str) -> Result<Component, String> {
    let path = app_dir.join(given);
    if given.ends_with(".wasm") {
        if !path.is_file() {
            return Err(format!("{field}: no file {}", path.display()));
        }
        Ok(Component::Wasm(path))
    } else if path.join("Cargo.toml").is_file() {
        Ok(Component::Cargo(path))
    } else if path.join("package.json").is_file() {
        Ok(Component::Npm(path))
    } else {
        Err(format!("{field}: {} is neither a .wasm file, a cargo project nor an npm project", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("Cargo.toml"), "[package]").unwrap();
        std::fs::write(d.path().join("c.wasm"), b"").unwrap();
        d
    }

    #[test]
    fn reads_a_good_manifest() {
        let d = dir();
        let m = parse(
            "name = \"shop\"\nvalues = [\"K\"]\n[classes.cart]\naccess = \"internal\"\ncomponent = \".\"\n[classes.x]\naccess = \"open\"\ncomponent = \"c.wasm\"\n",
            d.path(),
        )
        .unwrap();
        assert_eq!(m.name, "shop");
        assert_eq!(m.required_values, ["K"]);
        assert_eq!(m.classes[0].access, Access::Internal);
        assert_eq!(m.classes[0].component, Component::Cargo(d.path().join(".")));
        assert_eq!(m.classes[1].component, Component::Wasm(d.path().join("c.wasm")));
        assert_eq!(m.front, None);
        assert!(m.env.is_empty());
    }

    #[test]
    fn reads_env() {
        let d = dir();
        let m = parse("name = \"a\"\nfront = \".\"\n[env]\nLOG_LEVEL = \"debug\"\nEMPTY = \"\"\n", d.path()).unwrap();
        assert_eq!(m.env.get("LOG_LEVEL").map(String::as_str), Some("debug"));
        assert_eq!(m.env.get("EMPTY").map(String::as_str), Some(""));
    }

    #[test]
    fn reads_a_front() {
        let d = dir();
        let m = parse("name = \"shop\"\nfront = \"c.wasm\"\n", d.path()).unwrap();
        assert_eq!(m.front, Some(Component::Wasm(d.path().join("c.wasm"))));
        assert!(m.classes.is_empty(), "a front alone is an app");
        let m = parse("name = \"shop\"\nfront = \".\"\n[classes.c]\naccess = \"open\"\ncomponent = \".\"\n", d.path());
        assert_eq!(m.unwrap().front, Some(Component::Cargo(d.path().join("."))));
    }

    #[test]
    fn errors_name_the_field_in_one_line() {
        let d = dir();
        let cases = [
            (
                "name = \"a\"\n[classes.c]\naccess = \"public\"\ncomponent = \".\"\n",
                "classes.c.access: `public` is not one of open, existing, internal",
            ),
            (
                "name = \"a\"\n[classes.C]\naccess = \"open\"\ncomponent = \".\"\n",
                "classes.C: class name must start with a lowercase letter",
            ),
            ("name = \"a\"\n[classes.c]\naccess = \"open\"\ncomponent = \"nowhere\"\n", "classes.c.component:"),
            ("name = \"a\"\n[classes.c]\naccess = \"open\"\ncomponent = \"x.wasm\"\n", "classes.c.component: no file"),
            ("name = \"a\"\n", "classes: the app has neither a front nor a class"),
            ("name = \"a\"\nfront = \".\"\n[env]\n\"A-B\" = \"x\"\n", "env: `A-B` is not a variable name"),
            ("name = \"a\"\nfront = \".\"\n[env]\nA = 1\n", "line 4: invalid type: integer `1`, expected a string"),
            ("name = \"a\"\nfront = \"f.wasm\"\n", "front: no file"),
            ("name = \"a\"\nfront = \"nowhere\"\n", "front: "),
            ("name = \"A B\"\n[classes.c]\naccess = \"open\"\ncomponent = \".\"\n", "name: `A B` must be"),
            ("name = \"a\"\n[classes.c]\nacess = \"open\"\ncomponent = \".\"\n", "line 3: unknown field `acess`"),
            ("nme = \"a\"\n", "line 1: unknown field `nme`"),
            ("name = \"a\"\nvalues = [\"\"]\n[classes.c]\naccess = \"open\"\ncomponent = \".\"\n", "values[0]:"),
            ("name = ", "line 1:"),
        ];
        for (text, want) in cases {
            let err = parse(text, d.path()).unwrap_err();
            assert!(err.starts_with(want), "{err:?} should start with {want:?}");
            assert!(!err.contains('\n'), "{err:?} is one line");
        }
    }
}
