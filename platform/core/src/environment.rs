//! An app's environment variables: the `[env]` table of `wasmkeep.toml`,
//! given to its fronts and actors through `wasi:cli/environment`. Plain
//! settings, shown to whoever reads the app's versions; secrets belong in
//! values. The rules are checked once here, for the manifest and for an
//! uploaded bundle alike.

use std::collections::BTreeMap;

/// The most variables an app may set.
pub const ENV_VARS_MAX: usize = 64;
/// The longest variable name.
pub const ENV_NAME_MAX: usize = 128;
/// The longest value.
pub const ENV_VALUE_MAX: usize = 4096;
/// All names and values together.
pub const ENV_TOTAL_MAX: usize = 32 * 1024;

/// Checks an app's variables; the first thing wrong, as one line.
pub fn check(env: &BTreeMap<String, String>) -> Result<(), String> {
    if env.len() > ENV_VARS_MAX {
        return Err(format!("{} variables, over the limit of {ENV_VARS_MAX}", env.len()));
    }
    let mut total = 0;
    for (name, value) in env {
        check_name(name)?;
        if value.len() > ENV_VALUE_MAX {
            return Err(format!("`{name}`: the value is {} bytes, over the limit of {ENV_VALUE_MAX}", value.len()));
        }
        if value.contains('\0') {
            return Err(format!("`{name}`: the value holds a NUL character"));
        }
        total += name.len() + value.len();
    }
    if total > ENV_TOTAL_MAX {
        return Err(format!("names and values are {total} bytes in all, over the limit of {ENV_TOTAL_MAX}"));
    }
    Ok(())
}

/// A name is 1–128 of ASCII letters, digits and `_`, not starting with a
/// digit: what every shell and language's environment accepts.
fn check_name(name: &str) -> Result<(), String> {
    let shown = || name.escape_debug().to_string();
    let ok = !name.is_empty()
        && name.len() <= ENV_NAME_MAX
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a variable name (1-{ENV_NAME_MAX} of letters, digits and `_`, not starting with a digit)",
            shown()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn plain_settings_pass() {
        assert_eq!(check(&env(&[])), Ok(()));
        assert_eq!(check(&env(&[("LOG_LEVEL", "debug"), ("_X1", ""), ("a", "=b=c é")])), Ok(()));
        let longest = "N".repeat(ENV_NAME_MAX);
        assert_eq!(check(&env(&[(&longest, &"v".repeat(ENV_VALUE_MAX))])), Ok(()));
    }

    #[test]
    fn bad_names_are_named() {
        for bad in ["", "1ST", "A-B", "A=B", "A B", "É", "A\0"] {
            let e = check(&env(&[(bad, "v")])).unwrap_err();
            assert!(e.contains("is not a variable name"), "{bad:?}: {e}");
            assert!(!e.contains('\0') && !e.contains('\n'), "{e}");
        }
        assert!(check(&env(&[(&"N".repeat(ENV_NAME_MAX + 1), "v")])).is_err());
    }

    #[test]
    fn values_are_bounded_and_have_no_nul() {
        let e = check(&env(&[("A", &"v".repeat(ENV_VALUE_MAX + 1))])).unwrap_err();
        assert_eq!(e, "`A`: the value is 4097 bytes, over the limit of 4096");
        assert_eq!(check(&env(&[("A", "x\0y")])).unwrap_err(), "`A`: the value holds a NUL character");
    }

    #[test]
    fn count_and_total_are_bounded() {
        let many: BTreeMap<String, String> = (0..=ENV_VARS_MAX).map(|i| (format!("V{i}"), String::new())).collect();
        assert_eq!(check(&many).unwrap_err(), "65 variables, over the limit of 64");
        let big: BTreeMap<String, String> = (0..9).map(|i| (format!("V{i}"), "v".repeat(ENV_VALUE_MAX))).collect();
        assert!(check(&big).unwrap_err().contains("over the limit of 32768"));
    }
}
