//! TLS between nodes: TLS 1.3 (QUIC's), aws-lc-rs, mutual authentication
//! under the cluster CA. A node's certificate names its id, so a node that
//! dials `b` accepts only `b`'s certificate, and a node answers only
//! peers holding a certificate of the same CA.

use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};

use crate::cluster_dir::ClusterDir;

/// The ALPN protocol of hops between nodes: HTTP/1.1 heads on QUIC streams.
pub const ALPN: &[u8] = b"wasmkeep-hop/1";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn roots(ca: &[u8]) -> Result<Arc<rustls::RootCertStore>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(ca.to_vec())).map_err(|e| format!("the cluster CA: {e}"))?;
    Ok(Arc::new(roots))
}

fn identity(dir: &ClusterDir) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    (vec![CertificateDer::from(dir.cert.clone())], PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(dir.key.clone())))
}

/// What a node answers peers with: its certificate, and peers' checked.
pub fn server_config(dir: &ClusterDir) -> Result<rustls::ServerConfig, String> {
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots(&dir.ca)?, provider())
        .build()
        .map_err(|e| format!("the peers' verifier: {e}"))?;
    let (chain, key) = identity(dir);
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("node {}'s key: {e}", dir.node))?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// What a node dials peers with: the CA as the only root, its own
/// certificate as the client's.
pub fn client_config(dir: &ClusterDir) -> Result<rustls::ClientConfig, String> {
    let (chain, key) = identity(dir);
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots(&dir.ca)?)
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("node {}'s key: {e}", dir.node))?;
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(config)
}

/// Checks that `cert` is valid under `ca` for the node `name`.
pub fn check_chain(ca: &[u8], cert: &[u8], name: &str) -> Result<(), String> {
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(ca)?, provider())
        .build()
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    verifier
        .verify_server_cert(&CertificateDer::from(cert.to_vec()), &[], &name, &[], UnixTime::now())
        .map(|_| ())
        .map_err(|e| e.to_string())
}
