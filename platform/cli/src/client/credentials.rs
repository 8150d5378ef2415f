//! The credentials file: the token `signup` or `login` saved for each API,
//! and the current API (the last one signed up or logged in to), under the
//! user's config directory (`$WASMKEEP_CONFIG_DIR`, else
//! `$XDG_CONFIG_HOME/wasmkeep`, else `~/.config/wasmkeep`), mode 0600.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Credentials {
    /// The API commands use when neither `--api` nor `WASMKEEP_API` names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current: Option<String>,
    /// API URL to its login.
    #[serde(default)]
    api: BTreeMap<String, Login>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Login {
    pub tenant: String,
    pub token: String,
}

pub fn path() -> Result<PathBuf, String> {
    let dir = std::env::var_os("WASMKEEP_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CONFIG_HOME").map(|d| PathBuf::from(d).join("wasmkeep")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/wasmkeep")))
        .ok_or("no config directory: set HOME or WASMKEEP_CONFIG_DIR")?;
    Ok(dir.join("credentials.toml"))
}

pub fn load() -> Result<Credentials, String> {
    let path = path()?;
    match std::fs::read_to_string(&path) {
        Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Credentials::default()),
        Err(e) => Err(format!("{}: cannot read: {e}", path.display())),
    }
}

impl Credentials {
    pub fn token_for(&self, api: &str) -> Option<String> {
        self.api.get(api).map(|l| l.token.clone())
    }

    pub fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// Saves `login` for `api` (replacing any earlier one) and makes `api`
    /// the current one; answers the file.
    pub fn save(mut self, api: &str, login: Login) -> Result<PathBuf, String> {
        let path = path()?;
        let dir = path.parent().expect("a file in a directory");
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        self.api.insert(api.to_owned(), login);
        self.current = Some(api.to_owned());
        let text = toml::to_string(&self).expect("credentials serialize");
        // Written beside and renamed: a reader never sees half a file, and
        // the file is the owner's alone from its first byte.
        let tmp = path.with_extension("toml.tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| format!("{}: cannot create: {e}", tmp.display()))?;
        file.write_all(text.as_bytes()).map_err(|e| format!("{}: cannot write: {e}", tmp.display()))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
        Ok(path)
    }
}
