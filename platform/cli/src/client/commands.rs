//! One function per command of the CLI over the API.

use std::io::Read;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::credentials::{self, Login};
use super::{Api, ApiArgs};
use crate::{dev, manifest};

#[derive(Debug, clap::Args)]
pub struct SignupArgs {
    /// The tenant's name: 1-63 of a-z, 0-9, `-`, `_`, starting with a letter.
    pub name: String,
    /// The operator's sign-up key, when sign-up needs one.
    #[arg(long, value_name = "KEY")]
    pub signup_key: Option<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `wasmkeep signup NAME`: prints the token once and saves it.
pub async fn signup(args: SignupArgs) -> Result<(), String> {
    let api = Api::for_signup(&args.api)?;
    let mut body = json!({"name": args.name});
    if let Some(key) = &args.signup_key {
        body["signup_key"] = json!(key);
    }
    let answer = api.call("POST", "/v1/tenants", Some(body.to_string().into_bytes())).await?;
    let tenant = answer["tenant"].as_str().unwrap_or_default().to_owned();
    let token = answer["token"].as_str().ok_or("the API answered no token")?.to_owned();
    let saved = credentials::load()?.save(api.base(), Login { tenant: tenant.clone(), token: token.clone() })?;
    println!("signed up tenant {tenant} (plan {})", answer["plan"].as_str().unwrap_or("?"));
    println!("admin token (shown once; saved to {}):", saved.display());
    println!("{token}");
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    /// The app's directory, holding `wasmkeep.toml`.
    #[arg(default_value = ".")]
    pub app_dir: PathBuf,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `wasmkeep deploy [APP_DIR]`: builds as `dev` does, creates the app if
/// missing, uploads the version, activates it, prints the app's URL.
pub async fn deploy(args: DeployArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let manifest = manifest::load(&args.app_dir)?;
    let spec = dev::version_spec(&manifest, &args.app_dir)?;
    let bundle = wasmkeep_tenants::bundle::encode(&spec);
    let app = &manifest.name;
    api.call("PUT", &format!("/v1/apps/{app}"), None).await?;
    eprintln!("wasmkeep: uploading {app} ({} KiB)", bundle.len().div_ceil(1024));
    let started = std::time::Instant::now();
    let version = api.call("POST", &format!("/v1/apps/{app}/versions"), Some(bundle)).await?;
    let number = version["version"].as_i64().ok_or("the API answered no version number")?;
    let active = api.call("POST", &format!("/v1/apps/{app}/versions/{number}/activate"), None).await?;
    eprintln!("wasmkeep: version {number} of {app} is active ({:.1} s)", started.elapsed().as_secs_f64());
    println!("{}", active["url"].as_str().unwrap_or_default());
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct AppsArgs {
    #[command(subcommand)]
    pub command: AppsCommand,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum AppsCommand {
    /// Lists the tenant's apps, their active versions and URLs.
    Ls,
}

pub async fn apps(args: AppsArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    match args.command {
        AppsCommand::Ls => {
            let answer = api.call("GET", "/v1/apps", None).await?;
            for app in answer["apps"].as_array().into_iter().flatten() {
                let version = app["active_version"].as_i64().map_or("-".to_owned(), |v| v.to_string());
                println!("{}\tversion {version}\t{}", text(&app["app"]), text(&app["url"]));
            }
        }
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct DrainArgs {
    #[command(flatten)]
    pub api: ApiArgs,
}

/// Asks the node behind `--api` to drain and stop (the operator's token).
pub async fn drain(args: DrainArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let answer = api.call("POST", "/v1/node/drain", None).await?;
    println!("node {} is draining; it stops once its actors have moved", text(&answer["node"]));
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct ValuesArgs {
    #[command(subcommand)]
    pub command: ValuesCommand,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ValuesCommand {
    /// Sets a value: VALUE, or standard input when it is not given.
    Set { app: String, name: String, value: Option<String> },
    /// Lists the app's value names (values are never shown).
    Ls { app: String },
    /// Removes a value.
    Rm { app: String, name: String },
}

pub async fn values(args: ValuesArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    match args.command {
        ValuesCommand::Set { app, name, value } => {
            let value = match value {
                Some(v) => v,
                None => {
                    let mut v = String::new();
                    std::io::stdin().read_to_string(&mut v).map_err(|e| format!("reading the value: {e}"))?;
                    // A value piped with `echo` carries its newline; the value is the line.
                    v.strip_suffix('\n').map(|s| s.strip_suffix('\r').unwrap_or(s).to_owned()).unwrap_or(v)
                }
            };
            api.call("PUT", &format!("/v1/apps/{app}/values/{name}"), Some(value.into_bytes())).await?;
            eprintln!("wasmkeep: set {name} of {app}");
        }
        ValuesCommand::Ls { app } => {
            let answer = api.call("GET", &format!("/v1/apps/{app}/values"), None).await?;
            for name in answer["values"].as_array().into_iter().flatten() {
                println!("{}", text(name));
            }
        }
        ValuesCommand::Rm { app, name } => {
            api.call("DELETE", &format!("/v1/apps/{app}/values/{name}"), None).await?;
            eprintln!("wasmkeep: removed {name} of {app}");
        }
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct TokensArgs {
    #[command(subcommand)]
    pub command: TokensCommand,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum TokensCommand {
    /// Makes a token (shown once): admin, deploy or read.
    Create {
        #[arg(long, default_value = "deploy")]
        scope: String,
    },
    /// Lists the tenant's tokens (ids and scopes, never secrets).
    Ls,
    /// Revokes a token: refused from its next request on.
    Revoke { id: String },
}

pub async fn tokens(args: TokensArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    match args.command {
        TokensCommand::Create { scope } => {
            let body = json!({"scope": scope}).to_string().into_bytes();
            let answer = api.call("POST", "/v1/tokens", Some(body)).await?;
            eprintln!("wasmkeep: token {} ({}), shown once:", text(&answer["id"]), text(&answer["scope"]));
            println!("{}", text(&answer["token"]));
        }
        TokensCommand::Ls => {
            let answer = api.call("GET", "/v1/tokens", None).await?;
            for token in answer["tokens"].as_array().into_iter().flatten() {
                println!("{}\t{}", text(&token["id"]), text(&token["scope"]));
            }
        }
        TokensCommand::Revoke { id } => {
            api.call("DELETE", &format!("/v1/tokens/{id}"), None).await?;
            eprintln!("wasmkeep: revoked {id}");
        }
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct ActorsArgs {
    #[command(subcommand)]
    pub command: ActorsCommand,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum ActorsCommand {
    /// Lists an app's actors: class, name, resident or not, keys, bytes, sockets.
    Ls {
        app: String,
        /// Only actors of this class.
        #[arg(long)]
        class: Option<String>,
        /// Only actors whose names start with this.
        #[arg(long)]
        prefix: Option<String>,
    },
}

pub async fn actors(args: ActorsArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let ActorsCommand::Ls { app, class, prefix } = args.command;
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("limit", "1000".to_owned())];
        query.extend(class.clone().map(|c| ("class", c)));
        query.extend(prefix.clone().map(|p| ("prefix", p)));
        query.extend(cursor.clone().map(|c| ("cursor", c)));
        let query = url_query(&query);
        let page = api.call("GET", &format!("/v1/apps/{app}/actors?{query}"), None).await?;
        for a in page["actors"].as_array().into_iter().flatten() {
            let state = if a["resident"].as_bool() == Some(true) { "resident" } else { "hibernated" };
            println!(
                "{}\t{}\t{state}\t{} keys\t{} bytes\t{} sockets",
                text(&a["class"]),
                text(&a["name"]),
                a["keys"],
                a["bytes"],
                a["sockets"]
            );
        }
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return Ok(()),
        }
    }
}

/// `name=value&...`, each percent-encoded.
pub(crate) fn url_query(pairs: &[(&str, String)]) -> String {
    let enc = |s: &str| wasmkeep_core::names::encode(s);
    pairs.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect::<Vec<_>>().join("&")
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}
