//! The node's configuration: the default limits, then `--limits FILE`,
//! then `WASMKEEP_LIMITS__<NAME>` environment variables.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use wasmkeep_core::Limits;

/// The limits in force, checked.
pub fn limits(file: Option<&Path>) -> Result<Limits, String> {
    let mut figment = Figment::from(Serialized::defaults(Limits::default()));
    if let Some(file) = file {
        if !file.is_file() {
            return Err(format!("{}: no such limits file", file.display()));
        }
        figment = figment.merge(Toml::file(file));
    }
    let limits: Limits = figment
        .merge(Env::prefixed("WASMKEEP_LIMITS__"))
        .extract()
        .map_err(|e| format!("limits: {}", one_line(&e.to_string())))?;
    limits.validate().map_err(|e| e.to_string())?;
    Ok(limits)
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_file_states_the_defaults() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/limits.toml");
        let parsed: Limits = toml::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert_eq!(parsed, Limits::default());
    }

    #[test]
    fn the_ops_example_loads() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/limits.example.toml");
        let l = limits(Some(&file)).unwrap();
        assert_eq!((l.idle_secs, l.pool_instances), (2.0, 4000));
        assert_eq!(l.queue_per_actor, Limits::default().queue_per_actor);
    }
}
