//! The cluster directory: what every node of a cluster shares, and each
//! node's own identity. `wasmkeep cluster init DIR --nodes a,b,c` writes it
//! once; an operator copies it (or a node's part of it) to each machine.
//!
//! ```text
//! DIR/ca.pem             the cluster CA's certificate (every node trusts it)
//! DIR/ca-key.pem         its key: kept to add nodes later (0600)
//! DIR/nodes/<id>.pem     a node's certificate, for both ends of mutual TLS
//! DIR/nodes/<id>-key.pem its key (0600)
//! DIR/secret             the signing secret of hops between nodes (0600)
//! DIR/pepper             the API tokens' pepper, shared so any node checks any token (0600)
//! DIR/value-key          the apps' values' sealing key, shared likewise (0600)
//! DIR/operator-token     the operator's API token (0600)
//! ```
//!
//! Secrets are 32 random bytes each (aws-lc-rs). Running `init` again on a
//! directory adds the nodes it lacks, signed by the same CA, and changes
//! nothing else.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A node's id: a DNS label (1–63 of `a-z`, `0-9`, `-`, starting with a
/// letter), as it is also the name its certificate is issued for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(String);

impl NodeId {
    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = (1..=63).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && !s.ends_with('-')
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!("{s:?}: a node id is 1-63 of a-z, 0-9 and '-', starting with a letter, not ending with '-'"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The files of one node's view of the cluster directory, read.
#[derive(Clone)]
pub struct ClusterDir {
    pub node: NodeId,
    /// The CA certificate, DER.
    pub ca: Vec<u8>,
    /// The node's certificate, DER, and its key, PKCS#8 DER.
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub secret: [u8; 32],
    pub pepper: [u8; 32],
    pub value_key: [u8; 32],
    /// The operator's token, as written.
    pub operator_token: String,
}

impl std::fmt::Debug for ClusterDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets.
        f.debug_struct("ClusterDir").field("node", &self.node).finish_non_exhaustive()
    }
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "wasmkeep cluster CA");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn write_new(path: &Path, bytes: &[u8], private: bool) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)
        .map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
    file.write_all(bytes).and_then(|()| file.sync_all()).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

fn random32() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system's random source");
    bytes
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Fails unless the file is its owner's only.
fn check_private(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(format!("{}: readable by others (mode {:o}); chmod 600 it", path.display(), mode & 0o777));
    }
    Ok(())
}

/// A secret file: exactly 32 bytes, readable by its owner only.
fn read_secret(path: &Path) -> Result<[u8; 32], String> {
    check_private(path)?;
    read(path)?.try_into().map_err(|_| format!("{}: not 32 bytes", path.display()))
}

fn node_paths(dir: &Path, node: &NodeId) -> (PathBuf, PathBuf) {
    let nodes = dir.join("nodes");
    (nodes.join(format!("{node}.pem")), nodes.join(format!("{node}-key.pem")))
}

/// Writes the cluster directory `dir` for `nodes`, or adds the nodes it
/// lacks; answers the nodes it added.
pub fn init(dir: &Path, nodes: &[NodeId]) -> Result<Vec<NodeId>, String> {
    if nodes.is_empty() {
        return Err("name at least one node (--nodes a,b,c)".into());
    }
    std::fs::create_dir_all(dir.join("nodes")).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let ca_key_path = dir.join("ca-key.pem");
    let ca_key = if ca_key_path.exists() {
        let pem = String::from_utf8(read(&ca_key_path)?).map_err(|_| format!("{}: not PEM", ca_key_path.display()))?;
        KeyPair::from_pem(&pem).map_err(|e| format!("{}: {e}", ca_key_path.display()))?
    } else {
        let key = KeyPair::generate().map_err(|e| format!("a CA key: {e}"))?;
        let cert = ca_params().self_signed(&key).map_err(|e| format!("the CA certificate: {e}"))?;
        write_new(&dir.join("ca.pem"), cert.pem().as_bytes(), false)?;
        write_new(&ca_key_path, key.serialize_pem().as_bytes(), true)?;
        for name in ["secret", "pepper", "value-key"] {
            write_new(&dir.join(name), &random32(), true)?;
        }
        let token = format!("wk_{}\n", hex::encode(random32()));
        write_new(&dir.join("operator-token"), token.as_bytes(), true)?;
        key
    };
    let issuer = Issuer::new(ca_params(), ca_key);
    let mut added = Vec::new();
    for node in nodes {
        let (cert_path, key_path) = node_paths(dir, node);
        if cert_path.exists() {
            continue;
        }
        let mut params =
            CertificateParams::new(vec![node.to_string()]).map_err(|e| format!("node {node}'s certificate: {e}"))?;
        params.distinguished_name.push(DnType::CommonName, node.as_str());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().map_err(|e| format!("node {node}'s key: {e}"))?;
        let cert = params.signed_by(&key, &issuer).map_err(|e| format!("node {node}'s certificate: {e}"))?;
        write_new(&key_path, key.serialize_pem().as_bytes(), true)?;
        write_new(&cert_path, cert.pem().as_bytes(), false)?;
        added.push(node.clone());
    }
    Ok(added)
}

fn cert_der(path: &Path) -> Result<Vec<u8>, String> {
    use rustls::pki_types::pem::PemObject;
    let cert = rustls::pki_types::CertificateDer::from_pem_file(path);
    cert.map(|c| c.to_vec()).map_err(|e| format!("{}: {e}", path.display()))
}

fn key_der(path: &Path) -> Result<Vec<u8>, String> {
    use rustls::pki_types::pem::PemObject;
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_file(path);
    key.map(|k| k.secret_pkcs8_der().to_vec()).map_err(|e| format!("{}: {e}", path.display()))
}

impl ClusterDir {
    /// Reads node `node`'s view of the cluster directory `dir`.
    pub fn load(dir: &Path, node: &NodeId) -> Result<Self, String> {
        let (cert_path, key_path) = node_paths(dir, node);
        if !cert_path.exists() {
            return Err(format!(
                "{}: no certificate for node {node} (add it with `wasmkeep cluster init {} --nodes {node}`)",
                cert_path.display(),
                dir.display()
            ));
        }
        check_private(&key_path)?;
        let token = String::from_utf8(read(&dir.join("operator-token"))?)
            .map_err(|_| format!("{}: not a token", dir.join("operator-token").display()))?;
        check_private(&dir.join("operator-token"))?;
        Ok(Self {
            node: node.clone(),
            ca: cert_der(&dir.join("ca.pem"))?,
            cert: cert_der(&cert_path)?,
            key: key_der(&key_path)?,
            secret: read_secret(&dir.join("secret"))?,
            pepper: read_secret(&dir.join("pepper"))?,
            value_key: read_secret(&dir.join("value-key"))?,
            operator_token: token.trim().to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<NodeId> {
        names.iter().map(|n| NodeId::parse(n).unwrap()).collect()
    }

    #[test]
    fn node_ids_are_dns_labels() {
        for ok in ["a", "node-1", "n0", &"x".repeat(63)] {
            NodeId::parse(ok).unwrap();
        }
        for bad in ["", "1a", "A", "a_b", "a.b", "a-", &"x".repeat(64), "é"] {
            assert!(NodeId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn init_writes_each_nodes_identity_and_the_shared_secrets_privately() {
        let dir = tempfile::tempdir().unwrap();
        let added = init(dir.path(), &ids(&["a", "b"])).unwrap();
        assert_eq!(added, ids(&["a", "b"]));
        let a = ClusterDir::load(dir.path(), &ids(&["a"])[0]).unwrap();
        let b = ClusterDir::load(dir.path(), &ids(&["b"])[0]).unwrap();
        assert_eq!((a.secret, a.pepper, a.value_key, &a.ca), (b.secret, b.pepper, b.value_key, &b.ca));
        assert_ne!(a.cert, b.cert);
        assert_ne!(a.secret, a.pepper);
        assert!(a.operator_token.starts_with("wk_") && a.operator_token.len() == 3 + 64);
        assert!(!format!("{a:?}").contains(&hex::encode(a.secret)));
        use std::os::unix::fs::PermissionsExt;
        for private in ["ca-key.pem", "secret", "pepper", "value-key", "operator-token", "nodes/a-key.pem"] {
            let mode = std::fs::metadata(dir.path().join(private)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{private}");
        }
        // A node not initialised is named in the error.
        let e = ClusterDir::load(dir.path(), &ids(&["c"])[0]).unwrap_err();
        assert!(e.contains("no certificate for node c"), "{e}");
    }

    #[test]
    fn init_again_adds_nodes_under_the_same_ca_and_keeps_the_secrets() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &ids(&["a"])).unwrap();
        let before = ClusterDir::load(dir.path(), &ids(&["a"])[0]).unwrap();
        assert_eq!(init(dir.path(), &ids(&["a", "c"])).unwrap(), ids(&["c"]));
        let a = ClusterDir::load(dir.path(), &ids(&["a"])[0]).unwrap();
        let c = ClusterDir::load(dir.path(), &ids(&["c"])[0]).unwrap();
        assert_eq!((a.cert, a.secret), (before.cert, before.secret));
        assert_eq!(c.ca, before.ca);
        // The new node's certificate verifies under the CA (as a server and
        // as a client of mutual TLS).
        crate::tls::check_chain(&c.ca, &c.cert, "c").unwrap();
    }

    #[test]
    fn a_secret_readable_by_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), &ids(&["a"])).unwrap();
        std::fs::set_permissions(dir.path().join("secret"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ClusterDir::load(dir.path(), &ids(&["a"])[0]).unwrap_err();
        assert!(e.contains("readable by others"), "{e}");
    }
}
