//! `wasmkeep serve`'s configuration: defaults, then `--config FILE`
//! (TOML), then `WASMKEEP_*` environment variables, then flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};
use wasmkeep_telemetry::traces::LogFormat;
use wasmkeep_tenants::api::SignupMode;
use wasmkeep_tenants::api::limits::RateSettings;

/// Everything `serve` is configured by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// The apps' public port.
    pub listen: SocketAddr,
    /// The provisioning API.
    pub api_listen: SocketAddr,
    /// `/metrics` and `/healthz`; none unless given.
    pub metrics_listen: Option<SocketAddr>,
    /// The data directory: the store, compiled components, the server's
    /// keys and the operator's token.
    pub data: PathBuf,
    /// Apps are reached at `<app>.<tenant>.<base_domain>`.
    pub base_domain: String,
    /// The directory of plan files.
    pub plans: PathBuf,
    /// The plan a tenant signs up on.
    pub default_plan: String,
    /// `open`, `key` or `closed`; unset: `open` when the API listens on
    /// loopback only, else `key`.
    pub signup: Option<SignupMode>,
    /// The sign-up key of `key` mode.
    pub signup_key: Option<String>,
    /// The values' sealing key, 64 hex digits; unset: generated into
    /// `DATA/value-key` on first start.
    pub value_key: Option<String>,
    /// A TOML file of node limits over `policies/limits.toml`'s.
    pub limits: Option<PathBuf>,
    /// A PEM file of roots the apps' outbound HTTPS trusts besides the
    /// Mozilla ones (an operator's private CA).
    pub egress_roots: Option<PathBuf>,
    /// The certificate chain and private key (PEM) both listeners serve
    /// HTTPS with; neither: plain HTTP.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// The API's per-address rates.
    pub rates: RateSettings,
    /// The cluster: the shared store, this node's id and QUIC address.
    pub cluster: ClusterSettings,
    /// Traces: where they go, and whether a client's context is taken.
    pub telemetry: TelemetrySettings,
}

/// `[telemetry]`: each unset key falls back to its standard variable
/// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`,
/// `OTEL_SERVICE_NAME`); no endpoint anywhere: no traces, at no cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The OTLP collector's base URL (`/v1/traces` is added).
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc` (the base URL itself, 4317).
    pub otlp_protocol: Option<String>,
    /// The traces' `service.name` [default: wasmkeep].
    pub service_name: Option<String>,
    /// Whether a client's `traceparent` makes the request's span a child
    /// of the client's trace [default: true]; false: every request starts
    /// a trace of its own, and the client's context goes no further.
    pub trust_traceparent: bool,
    /// The node's log output on stderr: `json` (one object a line, each
    /// guest's line with its tenant, app, actor and trace) or `text`
    /// [default: json].
    pub log_format: LogFormat,
    /// Whether tenants may send their apps' spans to their own endpoints
    /// (`PUT /v1/telemetry`) [default: false]. On, every request makes
    /// its spans, as with an operator's endpoint.
    pub tenant_export: bool,
    /// Hosts tenants' endpoints may name whatever their addresses (a
    /// collector gateway on the operator's network); any other endpoint
    /// must be public, as the node's egress policy has it.
    pub tenant_export_hosts: Vec<String>,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            otlp_protocol: None,
            service_name: None,
            trust_traceparent: true,
            log_format: LogFormat::Json,
            tenant_export: false,
            tenant_export_hosts: Vec::new(),
        }
    }
}

impl TelemetrySettings {
    /// Tenants' own exports, if the operator lets them have them: under
    /// the node's egress policy, HTTPS trusting the node's roots and
    /// `roots` (PEM).
    pub fn tenant_exports(
        &self,
        roots: &[u8],
    ) -> Result<Option<std::sync::Arc<wasmkeep_telemetry::tenant_export::TenantExports>>, String> {
        use wasmkeep_telemetry::tenant_export::{ExportPolicy, TenantExports};
        if !self.tenant_export {
            return Ok(None);
        }
        let tls = wasmkeep_runtime::egress_tls::client_config(roots)?;
        let policy = ExportPolicy {
            egress: wasmkeep_core::egress::EgressPolicy::Public { allowed_hosts: None },
            also: self.tenant_export_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
        };
        Ok(Some(TenantExports::new(policy, tls)))
    }

    /// Where node `node`'s traces go.
    pub fn traces(&self, node: Option<&str>) -> wasmkeep_telemetry::traces::TraceSettings {
        wasmkeep_telemetry::traces::TraceSettings {
            endpoint: self.otlp_endpoint.clone(),
            protocol: self.otlp_protocol.clone(),
            service_name: self.service_name.clone(),
            instance: node.map(str::to_owned),
        }
    }
}

/// Whether a signed hop is read on the public port
/// (docs/spec/cluster.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Plaintext {
    /// A signed request on the public port is an outside request: hops
    /// travel only over the cluster's QUIC port.
    #[default]
    Refuse,
    /// A signed request on the public port is read as a hop too.
    Allow,
}

/// `[cluster]`: the same keys as the flags, `-` as `_` (`node_id`,
/// `cluster_listen`, `cluster_advertise`, `store`, `cluster_dir`,
/// `failover_wait_secs`, `cluster_plaintext`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// This node's id (a DNS label); a cluster's nodes each have their own.
    pub node_id: Option<String>,
    /// The QUIC (UDP) address other nodes reach this one at.
    pub cluster_listen: Option<SocketAddr>,
    /// The address announced to the others, when it differs from the
    /// listening one (a wildcard listener, a NAT).
    pub cluster_advertise: Option<SocketAddr>,
    /// The shared store, `postgres://...`; unset: the embedded SQLite
    /// store in the data directory (one node).
    pub store: Option<String>,
    /// The directory `wasmkeep cluster init` wrote.
    pub cluster_dir: Option<PathBuf>,
    /// A node whose heartbeat is older than this is dead.
    pub failover_wait_secs: u64,
    /// `refuse` (signed requests on the public port are outside ones) or
    /// `allow`.
    pub cluster_plaintext: Plaintext,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            node_id: None,
            cluster_listen: None,
            cluster_advertise: None,
            store: None,
            cluster_dir: None,
            failover_wait_secs: 10,
            cluster_plaintext: Plaintext::Refuse,
        }
    }
}

impl ClusterSettings {
    /// Whether this node is one of a cluster (rather than alone, on
    /// either store).
    pub fn is_cluster(&self) -> bool {
        self.cluster_dir.is_some() || self.cluster_listen.is_some()
    }

    /// Checks that the settings make a node: a cluster needs all of its
    /// parts. Errors are one line.
    pub fn check(&self) -> Result<(), String> {
        if let Some(url) = &self.store
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return Err("cluster.store: expected a postgres:// URL (unset: the embedded SQLite store)".into());
        }
        if let Some(id) = &self.node_id {
            wasmkeep_cluster::NodeId::parse(id).map_err(|e| format!("cluster.node_id: {e}"))?;
        }
        if self.failover_wait_secs == 0 {
            return Err("cluster.failover_wait_secs: at least 1".into());
        }
        if self.is_cluster() {
            let missing: Vec<&str> = [
                ("--node-id", self.node_id.is_none()),
                ("--cluster-listen", self.cluster_listen.is_none()),
                ("--cluster-dir", self.cluster_dir.is_none()),
                ("--store", self.store.is_none()),
            ]
            .into_iter()
            .filter_map(|(flag, gone)| gone.then_some(flag))
            .collect();
            if !missing.is_empty() {
                return Err(format!("a cluster node also needs {}", missing.join(", ")));
            }
        }
        Ok(())
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: ([127, 0, 0, 1], 8080).into(),
            api_listen: ([127, 0, 0, 1], 8081).into(),
            metrics_listen: None,
            data: "wasmkeep-data".into(),
            base_domain: "localhost".into(),
            plans: "policies/plans".into(),
            default_plan: "free".into(),
            signup: None,
            signup_key: None,
            value_key: None,
            limits: None,
            egress_roots: None,
            tls_cert: None,
            tls_key: None,
            rates: RateSettings::default(),
            cluster: ClusterSettings::default(),
            telemetry: TelemetrySettings::default(),
        }
    }
}

/// The settings that come from the environment: `WASMKEEP_<NAME>`. Other
/// `WASMKEEP_*` variables (`WASMKEEP_LOG`, the CLI's `WASMKEEP_API`) are
/// not the server's.
const FROM_ENV: &[&str] = &[
    "listen",
    "api_listen",
    "metrics_listen",
    "data",
    "base_domain",
    "plans",
    "default_plan",
    "signup",
    "signup_key",
    "value_key",
    "limits",
    "egress_roots",
    "tls_cert",
    "tls_key",
];

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A TOML file of settings (ops/serve.toml is a sample).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the apps' public port listens [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Where the provisioning API listens [default: 127.0.0.1:8081].
    #[arg(long, value_name = "ADDR")]
    pub api_listen: Option<SocketAddr>,
    /// Where `/metrics` and `/healthz` are served [default: nowhere].
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// The data directory [default: ./wasmkeep-data].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Apps answer at <app>.<tenant>.<base domain> [default: localhost].
    #[arg(long, value_name = "DOMAIN")]
    pub base_domain: Option<String>,
    /// The directory of plan files [default: policies/plans].
    #[arg(long, value_name = "DIR")]
    pub plans: Option<PathBuf>,
    /// The plan of a new tenant [default: free].
    #[arg(long, value_name = "PLAN")]
    pub default_plan: Option<String>,
    /// Who may sign up: open, key or closed [default: open on a loopback API, else key].
    #[arg(long, value_name = "MODE")]
    pub signup: Option<String>,
    /// A TOML file of node limits over policies/limits.toml's.
    #[arg(long, value_name = "FILE")]
    pub limits: Option<PathBuf>,
    /// Serve both listeners over HTTPS with this certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// This node's id in its cluster.
    #[arg(long, value_name = "ID")]
    pub node_id: Option<String>,
    /// The cluster's QUIC (UDP) address of this node.
    #[arg(long, value_name = "ADDR")]
    pub cluster_listen: Option<SocketAddr>,
    /// The QUIC address announced to the other nodes [default: --cluster-listen].
    #[arg(long, value_name = "ADDR")]
    pub cluster_advertise: Option<SocketAddr>,
    /// The shared store (postgres://...) [default: the embedded SQLite store].
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// The directory `wasmkeep cluster init` wrote.
    #[arg(long, value_name = "DIR")]
    pub cluster_dir: Option<PathBuf>,
    /// Seconds after its last heartbeat that a node is dead [default: 10].
    #[arg(long, value_name = "SECS")]
    pub failover_wait_secs: Option<u64>,
    /// Signed hops on the public port: refuse or allow [default: refuse].
    #[arg(long, value_name = "MODE")]
    pub cluster_plaintext: Option<String>,
}

impl ServeConfig {
    /// The configuration in force, checked. Errors are one line.
    pub fn load(args: &ServeArgs) -> Result<Self, String> {
        let mut figment = Figment::from(Serialized::defaults(ServeConfig::default()));
        if let Some(file) = &args.config {
            if !file.is_file() {
                return Err(format!("{}: no such configuration file", file.display()));
            }
            figment = figment.merge(Toml::file(file));
        }
        figment = figment.merge(Env::prefixed("WASMKEEP_").only(FROM_ENV));
        // `WASMKEEP_CLUSTER__NODE_ID` and the like: `[cluster]`'s keys.
        figment = figment.merge(Env::prefixed("WASMKEEP_CLUSTER__").map(|k| format!("cluster.{k}").into()));
        figment = figment.merge(Env::prefixed("WASMKEEP_TELEMETRY__").map(|k| format!("telemetry.{k}").into()));
        let flags = [
            ("listen", args.listen.map(|a| a.to_string())),
            ("api_listen", args.api_listen.map(|a| a.to_string())),
            ("metrics_listen", args.metrics_listen.map(|a| a.to_string())),
            ("data", args.data.as_ref().map(|p| p.display().to_string())),
            ("base_domain", args.base_domain.clone()),
            ("plans", args.plans.as_ref().map(|p| p.display().to_string())),
            ("default_plan", args.default_plan.clone()),
            ("signup", args.signup.clone()),
            ("limits", args.limits.as_ref().map(|p| p.display().to_string())),
            ("tls_cert", args.tls_cert.as_ref().map(|p| p.display().to_string())),
            ("tls_key", args.tls_key.as_ref().map(|p| p.display().to_string())),
            ("cluster.node_id", args.node_id.clone()),
            ("cluster.cluster_listen", args.cluster_listen.map(|a| a.to_string())),
            ("cluster.cluster_advertise", args.cluster_advertise.map(|a| a.to_string())),
            ("cluster.store", args.store.clone()),
            ("cluster.cluster_dir", args.cluster_dir.as_ref().map(|p| p.display().to_string())),
            ("cluster.cluster_plaintext", args.cluster_plaintext.clone()),
        ];
        for (name, value) in flags {
            if let Some(value) = value {
                figment = figment.merge(Serialized::default(name, value));
            }
        }
        if let Some(secs) = args.failover_wait_secs {
            figment = figment.merge(Serialized::default("cluster.failover_wait_secs", secs));
        }
        let config: ServeConfig =
            figment.extract().map_err(|e| format!("configuration: {}", e.to_string().lines().next().unwrap_or("")))?;
        config.cluster.check()?;
        Ok(config)
    }

    /// The sign-up mode in force: as set, or by where the API listens.
    pub fn signup_mode(&self) -> SignupMode {
        self.signup.unwrap_or(if self.api_listen.ip().is_loopback() { SignupMode::Open } else { SignupMode::Key })
    }

    /// The TLS configuration both listeners serve, when a certificate and
    /// key are given (one without the other is a mistake).
    pub fn tls(&self) -> Result<Option<std::sync::Arc<rustls::ServerConfig>>, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (None, None) => return Ok(None),
            (Some(cert), Some(key)) => (cert, key),
            _ => return Err("tls_cert and tls_key go together".into()),
        };
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("tls_cert: {}: {e}", cert.display()))?;
        if chain.is_empty() {
            return Err(format!("tls_cert: {}: no certificate in it", cert.display()));
        }
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("tls_key: {}: {e}", key.display()))?;
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("tls_key: {e}"))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Some(std::sync::Arc::new(config)))
    }

    /// Where the plans are, relative paths against the working directory.
    pub fn plans_dir(&self) -> &Path {
        &self.plans
    }
}

#[cfg(test)]
// figment's `Jail` closures answer its (large) error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    fn args() -> ServeArgs {
        ServeArgs {
            config: None,
            listen: None,
            api_listen: None,
            metrics_listen: None,
            data: None,
            base_domain: None,
            plans: None,
            default_plan: None,
            signup: None,
            limits: None,
            tls_cert: None,
            tls_key: None,
            node_id: None,
            cluster_listen: None,
            cluster_advertise: None,
            store: None,
            cluster_dir: None,
            failover_wait_secs: None,
            cluster_plaintext: None,
        }
    }

    #[test]
    fn layers_apply_in_order() {
        figment::Jail::expect_with(|jail| {
            assert_eq!(ServeConfig::load(&args()).unwrap(), ServeConfig::default());
            jail.create_file(
                "serve.toml",
                "listen = \"0.0.0.0:80\"\nbase_domain = \"apps.example.com\"\ndata = \"/var/lib/x\"\n[rates]\nsignups_per_hour = 3\nauth_failures_per_minute = 5\n",
            )?;
            jail.set_env("WASMKEEP_BASE_DOMAIN", "env.example.com");
            // Not the server's: ignored, not refused.
            jail.set_env("WASMKEEP_LOG", "debug");
            jail.set_env("WASMKEEP_TOKEN", "wk_x");
            let mut a = args();
            a.config = Some("serve.toml".into());
            a.data = Some("/flag".into());
            let c = ServeConfig::load(&a).unwrap();
            assert_eq!(c.listen, "0.0.0.0:80".parse().unwrap());
            assert_eq!(c.base_domain, "env.example.com");
            assert_eq!(c.data, PathBuf::from("/flag"));
            assert_eq!(c.rates.signups_per_hour, 3);
            Ok(())
        });
    }

    #[test]
    fn the_ops_sample_loads() {
        let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/serve.toml");
        figment::Jail::expect_with(|_| {
            let mut a = args();
            a.config = Some(sample.clone());
            let c = ServeConfig::load(&a).unwrap();
            assert_eq!(c.base_domain, "apps.example.com");
            assert_eq!(c.signup_mode(), SignupMode::Key);
            assert_eq!(c.rates, RateSettings::default());
            Ok(())
        });
    }

    #[test]
    fn the_cluster_keys_come_from_flags_env_and_the_cluster_table() {
        figment::Jail::expect_with(|jail| {
            assert_eq!(ServeConfig::load(&args()).unwrap().cluster, ClusterSettings::default());
            jail.create_file(
                "node.toml",
                "[cluster]\nnode_id = \"a\"\ncluster_listen = \"127.0.0.1:9001\"\ncluster_dir = \"/etc/wasmkeep/cluster\"\nstore = \"postgres://db/wk\"\nfailover_wait_secs = 5\n",
            )?;
            let mut a = args();
            a.config = Some("node.toml".into());
            let c = ServeConfig::load(&a).unwrap().cluster;
            assert_eq!(c.node_id.as_deref(), Some("a"));
            assert_eq!(c.cluster_listen, Some("127.0.0.1:9001".parse().unwrap()));
            assert_eq!((c.failover_wait_secs, c.cluster_plaintext), (5, Plaintext::Refuse));
            jail.set_env("WASMKEEP_CLUSTER__NODE_ID", "b");
            jail.set_env("WASMKEEP_CLUSTER__CLUSTER_PLAINTEXT", "allow");
            a.failover_wait_secs = Some(7);
            let c = ServeConfig::load(&a).unwrap().cluster;
            assert_eq!(
                (c.node_id.as_deref(), c.cluster_plaintext, c.failover_wait_secs),
                (Some("b"), Plaintext::Allow, 7)
            );
            a.node_id = Some("c".into());
            assert_eq!(ServeConfig::load(&a).unwrap().cluster.node_id.as_deref(), Some("c"));
            Ok(())
        });
    }

    #[test]
    fn a_cluster_node_missing_a_part_is_one_line_naming_it() {
        figment::Jail::expect_with(|_| {
            let mut a = args();
            a.cluster_listen = Some("127.0.0.1:9001".parse().unwrap());
            let e = ServeConfig::load(&a).unwrap_err();
            assert_eq!(e, "a cluster node also needs --node-id, --cluster-dir, --store");
            a.node_id = Some("Bad_Id".into());
            assert!(ServeConfig::load(&a).unwrap_err().starts_with("cluster.node_id: "));
            let mut a = args();
            a.store = Some("mysql://x".into());
            assert!(ServeConfig::load(&a).unwrap_err().contains("postgres://"));
            let mut a = args();
            a.cluster_plaintext = Some("maybe".into());
            assert!(ServeConfig::load(&a).unwrap_err().contains("cluster_plaintext"));
            // A store alone is one node on PostgreSQL.
            let mut a = args();
            a.store = Some("postgres://db/wk".into());
            assert!(!ServeConfig::load(&a).unwrap().cluster.is_cluster());
            Ok(())
        });
    }

    #[test]
    fn signup_mode_follows_the_api_address() {
        let mut c = ServeConfig::default();
        assert_eq!(c.signup_mode(), SignupMode::Open);
        c.api_listen = "0.0.0.0:8081".parse().unwrap();
        assert_eq!(c.signup_mode(), SignupMode::Key);
        c.signup = Some(SignupMode::Closed);
        assert_eq!(c.signup_mode(), SignupMode::Closed);
    }

    #[test]
    fn mistakes_are_one_line() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("bad.toml", "listen = \"nowhere\"\n")?;
            let mut a = args();
            a.config = Some("bad.toml".into());
            let e = ServeConfig::load(&a).unwrap_err();
            assert!(e.starts_with("configuration: ") && !e.contains('\n'), "{e}");
            let mut a = args();
            a.signup = Some("sometimes".into());
            assert!(ServeConfig::load(&a).unwrap_err().contains("signup"));
            a.config = Some("missing.toml".into());
            assert!(ServeConfig::load(&a).unwrap_err().contains("no such configuration file"));
            jail.create_file("unknown.toml", "lisen = \"x\"\n")?;
            let mut a = args();
            a.config = Some("unknown.toml".into());
            assert!(ServeConfig::load(&a).unwrap_err().contains("lisen"));
            Ok(())
        });
    }
}
