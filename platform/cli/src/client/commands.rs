//! One function per command of the CLI over the API.

use std::io::{IsTerminal, Read};
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
pub struct LoginArgs {
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `wasmkeep login --api URL`: checks a token (`--token`, `WASMKEEP_TOKEN`
/// or standard input) with the API, saves it for the API and makes the
/// API the current one, as `signup` does.
pub async fn login(args: LoginArgs) -> Result<(), String> {
    let mut given = args.api.clone();
    if given.token.is_none() {
        given.token = std::env::var("WASMKEEP_TOKEN").ok().filter(|s| !s.is_empty());
    }
    if given.token.is_none() {
        if std::io::stdin().is_terminal() {
            eprint!("token: ");
        }
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map_err(|e| format!("reading the token: {e}"))?;
        given.token = Some(line.trim().to_owned()).filter(|t| !t.is_empty());
    }
    let token = given.token.clone().ok_or("no token: pass --token, set WASMKEEP_TOKEN, or type it")?;
    let api = Api::new(&given)?;
    let me = api.call("GET", "/v1/whoami", None).await?;
    let tenant = me["tenant"].as_str().unwrap_or_default().to_owned();
    let saved = credentials::load()?.save(api.base(), Login { tenant: tenant.clone(), token })?;
    let who = if tenant.is_empty() { "the operator".to_owned() } else { format!("tenant {tenant}") };
    eprintln!(
        "wasmkeep: logged in to {} as {who} (scope {}); saved to {}",
        api.base(),
        text(&me["scope"]),
        saved.display()
    );
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct WhoamiArgs {
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `wasmkeep whoami`: the API, and the tenant and scope of the token.
pub async fn whoami(args: WhoamiArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let me = api.call("GET", "/v1/whoami", None).await?;
    if args.api.json {
        return print_json(&me);
    }
    let who = me["tenant"].as_str().map_or("the operator".to_owned(), |t| format!("tenant {t}"));
    let plan = me["plan"].as_str().map_or(String::new(), |p| format!(", plan {p}"));
    let suspended = if me["suspended"].as_bool() == Some(true) { ", suspended" } else { "" };
    println!("{who} at {} (scope {}{plan}{suspended}; token {})", api.base(), text(&me["scope"]), text(&me["token"]));
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
    let version = match api.call("POST", &format!("/v1/apps/{app}/versions"), Some(bundle)).await {
        Ok(version) => version,
        Err(e) => {
            // A refused first deploy takes its app back (the API deletes
            // only an app with no version and no value): it holds no slot
            // of the plan's apps.
            let _ = api.call("DELETE", &format!("/v1/apps/{app}?unused=true"), None).await;
            return Err(e);
        }
    };
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
    /// Removes an app: its sockets close; its actors and their storage, its
    /// versions and values go. Asks first on a terminal; else needs --yes.
    Rm {
        app: String,
        /// Remove without asking.
        #[arg(long)]
        yes: bool,
    },
}

pub async fn apps(args: AppsArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    match args.command {
        AppsCommand::Ls => {
            let answer = api.call("GET", "/v1/apps", None).await?;
            if args.api.json {
                return print_json(&answer);
            }
            for app in answer["apps"].as_array().into_iter().flatten() {
                let version = app["active_version"].as_i64().map_or("-".to_owned(), |v| v.to_string());
                println!("{}\tversion {version}\t{}", text(&app["app"]), text(&app["url"]));
            }
        }
        AppsCommand::Rm { app, yes } => {
            if !yes {
                confirm(&format!("remove {app} with its actors' storage, versions and values? [y/N] "))?;
            }
            api.call("DELETE", &format!("/v1/apps/{}", enc(&app)), None).await?;
            eprintln!("wasmkeep: removed {app}");
        }
    }
    Ok(())
}

/// Goes on when the user answers `y` on a terminal; off a terminal, says
/// to pass `--yes`.
fn confirm(question: &str) -> Result<(), String> {
    if !std::io::stdin().is_terminal() {
        return Err("not a terminal: pass --yes to remove without asking".into());
    }
    eprint!("{question}");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).map_err(|e| format!("reading the answer: {e}"))?;
    match line.trim() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err("not removed".into()),
    }
}

#[derive(Debug, clap::Args)]
pub struct VersionsArgs {
    #[command(subcommand)]
    pub command: VersionsCommand,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum VersionsCommand {
    /// Lists an app's versions, oldest first: the active one marked, the
    /// classes and front of each.
    Ls { app: String },
}

pub async fn versions(args: VersionsArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let VersionsCommand::Ls { app } = args.command;
    let answer = api.call("GET", &format!("/v1/apps/{}/versions", enc(&app)), None).await?;
    if args.api.json {
        return print_json(&answer);
    }
    for v in answer["versions"].as_array().into_iter().flatten() {
        let active = if v["active"].as_bool() == Some(true) { "active" } else { "-" };
        let classes: Vec<&str> =
            v["classes"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().or(c.as_str())).collect();
        let front = if v["front"].as_bool() == Some(true) { "front, " } else { "" };
        println!("{}\t{active}\t{front}classes {}", v["version"], classes.join(" "));
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    pub app: String,
    /// The version to make active again [default: the newest one older than
    /// the active one].
    pub version: Option<i64>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `wasmkeep rollback APP [VERSION]`: activates an earlier version.
pub async fn rollback(args: RollbackArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let app = enc(&args.app);
    let answer = api.call("GET", &format!("/v1/apps/{app}/versions"), None).await?;
    let versions: Vec<(i64, bool)> = answer["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| Some((v["version"].as_i64()?, v["active"].as_bool() == Some(true))))
        .collect();
    let active = versions.iter().find(|(_, a)| *a).map(|(n, _)| *n);
    let target = match (args.version, active) {
        (Some(n), _) => n,
        (None, Some(active)) => versions.iter().map(|(n, _)| *n).filter(|n| *n < active).max().ok_or_else(|| {
            format!("{}: version {active} is the oldest kept; there is none to roll back to", args.app)
        })?,
        (None, None) => return Err(format!("{}: no version is active; name one (wasmkeep versions ls)", args.app)),
    };
    let done = api.call("POST", &format!("/v1/apps/{app}/versions/{target}/activate"), None).await?;
    if args.api.json {
        return print_json(&done);
    }
    let was = active.map_or(String::new(), |a| format!(" (was {a})"));
    eprintln!("wasmkeep: version {target} of {} is active{was}", args.app);
    println!("{}", text(&done["url"]));
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct TelemetryArgs {
    #[command(subcommand)]
    pub command: TelemetryCommand,
    #[command(flatten)]
    pub api: ApiArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum TelemetryCommand {
    /// Sends the tenant's apps' spans to its own OTLP/HTTP endpoint.
    Set {
        /// The endpoint (`https://…`); spans go to ENDPOINT/v1/traces.
        endpoint: String,
        /// A header sent with each post (repeatable); stored sealed, never
        /// shown again.
        #[arg(long = "header", value_name = "NAME=VALUE", value_parser = crate::dev::parse_value)]
        headers: Vec<(String, String)>,
    },
    /// The endpoint, the headers' names, and the spans sent, dropped, failed.
    Show,
    /// Stops sending the tenant's spans.
    Rm,
}

pub async fn telemetry(args: TelemetryArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let shown = match args.command {
        TelemetryCommand::Set { endpoint, headers } => {
            let headers: serde_json::Map<String, Value> = headers.into_iter().map(|(k, v)| (k, json!(v))).collect();
            let body = json!({"endpoint": endpoint, "headers": headers}).to_string().into_bytes();
            api.call("PUT", "/v1/telemetry", Some(body)).await?
        }
        TelemetryCommand::Show => api.call("GET", "/v1/telemetry", None).await?,
        TelemetryCommand::Rm => {
            api.call("DELETE", "/v1/telemetry", None).await?;
            eprintln!("wasmkeep: the tenant's spans are no longer sent");
            return Ok(());
        }
    };
    if args.api.json {
        return print_json(&shown);
    }
    let names: Vec<&str> = shown["headers"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let spans = &shown["spans"];
    println!(
        "{}\theaders {}\tspans exported {}, dropped {}, failed {}",
        text(&shown["endpoint"]),
        if names.is_empty() { "-".to_owned() } else { names.join(",") },
        spans["exported"],
        spans["dropped"],
        spans["failed"]
    );
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// The month, as YYYY-MM (UTC) [default: the current one].
    #[arg(long)]
    pub period: Option<String>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `wasmkeep usage`: what each app used in a month, and the actors kept.
pub async fn usage(args: UsageArgs) -> Result<(), String> {
    let api = Api::new(&args.api)?;
    let query = url_query(&args.period.iter().map(|p| ("period", p.clone())).collect::<Vec<_>>());
    let answer = api.call("GET", &format!("/v1/usage?{query}"), None).await?;
    if args.api.json {
        return print_json(&answer);
    }
    let actors = &answer["actors"];
    println!("period {}\tactors {} of {}", text(&answer["period"]), actors["stored"], actors["limit"]);
    for app in answer["apps"].as_array().into_iter().flatten() {
        let fields: Vec<String> = app
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.as_str() != "app")
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("{}\t{}", text(&app["app"]), fields.join("\t"));
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
            if args.api.json {
                return print_json(&answer);
            }
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
            if args.api.json {
                return print_json(&answer);
            }
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
    // `--json`: every page's actors, as one answer.
    let mut all = Vec::new();
    loop {
        let mut query = vec![("limit", "1000".to_owned())];
        query.extend(class.clone().map(|c| ("class", c)));
        query.extend(prefix.clone().map(|p| ("prefix", p)));
        query.extend(cursor.clone().map(|c| ("cursor", c)));
        let query = url_query(&query);
        let page = api.call("GET", &format!("/v1/apps/{app}/actors?{query}"), None).await?;
        for a in page["actors"].as_array().into_iter().flatten() {
            if args.api.json {
                all.push(a.clone());
                continue;
            }
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
            None if args.api.json => return print_json(&json!({ "actors": all })),
            None => return Ok(()),
        }
    }
}

/// `name=value&...`, each percent-encoded.
pub(crate) fn url_query(pairs: &[(&str, String)]) -> String {
    let enc = |s: &str| wasmkeep_core::names::encode(s);
    pairs.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect::<Vec<_>>().join("&")
}

/// `app` as a path segment.
fn enc(app: &str) -> String {
    wasmkeep_core::names::encode(app)
}

/// The API's answer, as `--json` prints it.
fn print_json(answer: &Value) -> Result<(), String> {
    println!("{}", serde_json::to_string_pretty(answer).expect("JSON"));
    Ok(())
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}
