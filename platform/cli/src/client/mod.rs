//! The CLI over the provisioning API: `signup`, `deploy`, `apps`,
//! `values`, `tokens`, `actors`, `tail`. Each command is one or a few API requests; errors
//! are one line saying what to do.

mod commands;
mod credentials;
mod tail;

use std::time::Duration;

use serde_json::Value;

pub(crate) use commands::url_query;
pub use commands::{
    ActorsArgs, AppsArgs, DeployArgs, DrainArgs, LoginArgs, RollbackArgs, SignupArgs, TelemetryArgs, TokensArgs,
    UsageArgs, ValuesArgs, VersionsArgs, WhoamiArgs, actors, apps, deploy, drain, login, rollback, signup, telemetry,
    tokens, usage, values, versions, whoami,
};
pub use tail::{TailArgs, tail};

/// Where the API is and who calls it: flags, then `WASMKEEP_API` /
/// `WASMKEEP_TOKEN`, then the credentials file (its current API, and the
/// token saved for the API).
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// The provisioning API [env: WASMKEEP_API] [default: the last one
    /// `signup` or `login` saved, else http://127.0.0.1:8081].
    #[arg(long, value_name = "URL", global = true)]
    pub api: Option<String>,
    /// An API token [env: WASMKEEP_TOKEN] [default: the one saved for the API].
    #[arg(long, value_name = "TOKEN", global = true)]
    pub token: Option<String>,
    /// Print the API's JSON answer rather than lines of text.
    #[arg(long, global = true)]
    pub json: bool,
}

const DEFAULT_API: &str = "http://127.0.0.1:8081";

/// A client of one API, with the token it presents.
pub struct Api {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Api {
    /// The API and token `args` name, or the environment, or the saved ones.
    pub fn new(args: &ApiArgs) -> Result<Self, String> {
        Self::build(args, true)
    }

    /// For `signup`: only a token given with `--token` (the operator's, in
    /// `closed` mode), never a tenant's saved or exported one.
    pub fn for_signup(args: &ApiArgs) -> Result<Self, String> {
        Self::build(args, false)
    }

    fn build(args: &ApiArgs, known_tokens: bool) -> Result<Self, String> {
        let saved = credentials::load()?;
        let base = args
            .api
            .clone()
            .or_else(|| std::env::var("WASMKEEP_API").ok().filter(|s| !s.is_empty()))
            .or_else(|| saved.current().map(str::to_owned))
            .unwrap_or_else(|| DEFAULT_API.to_owned())
            .trim_end_matches('/')
            .to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(format!("--api {base}: expected an http:// or https:// URL"));
        }
        let from_env = || std::env::var("WASMKEEP_TOKEN").ok().filter(|s| !s.is_empty());
        let token = match args.token.clone() {
            Some(token) => Some(token),
            None if !known_tokens => None,
            None => match from_env() {
                Some(token) => Some(token),
                None => saved.token_for(&base),
            },
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("starting the HTTP client: {e}"))?;
        Ok(Self { base, token, http })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends a request; answers the JSON of a success (Null for none), or
    /// the server's one-line error with what to do.
    pub async fn call(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Result<Value, String> {
        let method: reqwest::Method = method.parse().expect("a method");
        let mut req = self.http.request(method, format!("{}{path}", self.base)).timeout(Duration::from_secs(600));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.body(body);
        }
        let answer = req.send().await.map_err(|e| unreachable_api(&self.base, &e))?;
        let status = answer.status();
        let text = answer.text().await.map_err(|e| format!("{}: the answer broke off: {e}", self.base))?;
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(json);
        }
        Err(self.failure(status, &json))
    }

    /// A `GET` whose answer is read as it comes (a tail): the answer, once
    /// its status is a success.
    pub async fn open(&self, path: &str) -> Result<reqwest::Response, String> {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let answer = req.send().await.map_err(|e| unreachable_api(&self.base, &e))?;
        let status = answer.status();
        if status.is_success() {
            return Ok(answer);
        }
        let text = answer.text().await.unwrap_or_default();
        Err(self.failure(status, &serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// The server's one-line error, with what to do.
    fn failure(&self, status: reqwest::StatusCode, json: &Value) -> String {
        let error = json["error"].as_str().map_or_else(|| format!("the API answered {status}"), str::to_owned);
        match status.as_u16() {
            401 if self.token.is_none() => format!(
                "{error} (no token: run `wasmkeep signup NAME` or `wasmkeep login`, or pass --token / WASMKEEP_TOKEN)"
            ),
            401 => format!("{error} (the token was refused: `wasmkeep login` with another, or sign up again)"),
            // A refusal for scope names the scope needed; others (a quota,
            // a suspended account) say what to do themselves.
            403 if error.contains("this needs `") => {
                format!("{error} (make one with `wasmkeep tokens create --scope SCOPE` and an admin token)")
            }
            429 => format!("{error} (slow down)"),
            _ => error,
        }
    }
}

fn unreachable_api(base: &str, e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    format!("cannot reach the API at {base}: {cause} (is `wasmkeep serve` running? set --api or WASMKEEP_API)")
}
