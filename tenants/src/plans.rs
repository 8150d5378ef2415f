//! The plans an operator offers: the TOML files of a directory
//! (`policies/plans/` by default), each named by its file.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use wasmkeep_core::TenantId;
use wasmkeep_core::plan::Plan;

/// Every plan, by name.
#[derive(Debug, Clone)]
pub struct Plans {
    plans: BTreeMap<String, Arc<Plan>>,
}

impl Plans {
    /// Reads every `*.toml` of `dir`; `default` must be one of them. Errors
    /// are one line naming the file.
    pub fn load(dir: &Path, default: &str) -> Result<Self, String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: cannot read the plans: {e}", dir.display()))?;
        let mut plans = BTreeMap::new();
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            // A plan's name follows the class-name rule, like a tenant's.
            TenantId::parse(&name).map_err(|e| format!("{}: plan name: {e}", path.display()))?;
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let plan: Plan = toml::from_str(&text)
                .map_err(|e| format!("{}: {}", path.display(), e.message().lines().next().unwrap_or_default()))?;
            plan.validate().map_err(|e| format!("{}: {e}", path.display()))?;
            plans.insert(name, Arc::new(plan));
        }
        if !plans.contains_key(default) {
            return Err(format!("{}: no plan {default}.toml (the default plan)", dir.display()));
        }
        Ok(Self { plans })
    }

    /// The plans shipped in `policies/plans/`, built in: what a node run
    /// outside the repository starts with when no plans directory is given.
    pub fn builtin(default: &str) -> Result<Self, String> {
        const SHIPPED: &[(&str, &str)] = &[
            ("free", include_str!("../../policies/plans/free.toml")),
            ("pro", include_str!("../../policies/plans/pro.toml")),
        ];
        let mut plans = BTreeMap::new();
        for (name, text) in SHIPPED {
            let plan: Plan = toml::from_str(text).map_err(|e| format!("built-in plan {name}: {}", e.message()))?;
            plans.insert((*name).to_owned(), Arc::new(plan));
        }
        if !plans.contains_key(default) {
            return Err(format!("no built-in plan {default} (the default plan); give --plans DIR"));
        }
        Ok(Self { plans })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Plan>> {
        self.plans.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.plans.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/plans")
    }

    #[test]
    fn the_shipped_plans_load() {
        let plans = Plans::load(&shipped(), "free").unwrap();
        assert_eq!(plans.names().collect::<Vec<_>>(), ["free", "pro"]);
        assert!(plans.get("pro").unwrap().weight > plans.get("free").unwrap().weight);
    }

    #[test]
    fn the_built_in_plans_are_the_shipped_files() {
        let shipped = Plans::load(&shipped(), "free").unwrap();
        let builtin = Plans::builtin("free").unwrap();
        for name in ["free", "pro"] {
            assert_eq!(shipped.get(name), builtin.get(name));
        }
        assert!(Plans::builtin("gold").is_err());
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Plans::load(dir.path(), "free").unwrap_err().contains("no plan free.toml"));
        std::fs::write(dir.path().join("free.toml"), "weight = 1\n").unwrap();
        let e = Plans::load(dir.path(), "free").unwrap_err();
        assert!(e.contains("free.toml") && e.contains("missing field"), "{e}");
        std::fs::copy(shipped().join("free.toml"), dir.path().join("free.toml")).unwrap();
        std::fs::write(dir.path().join("Bad.toml"), "").unwrap();
        assert!(Plans::load(dir.path(), "free").unwrap_err().contains("Bad.toml: plan name"));
        std::fs::remove_file(dir.path().join("Bad.toml")).unwrap();
        std::fs::write(dir.path().join("README.md"), "not a plan").unwrap();
        Plans::load(dir.path(), "free").unwrap();
    }
}
