//! TLS for guests' outbound HTTPS: rustls on aws-lc-rs, trusting the
//! Mozilla roots (webpki-roots) and any roots the operator adds (a private
//! CA of its own services, or a test's).

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The client configuration every app's outbound HTTPS shares.
pub fn client_config(extra_roots_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for cert in CertificateDer::pem_slice_iter(extra_roots_pem) {
        let cert = cert.map_err(|e| format!("egress roots: {e}"))?;
        roots.add(cert).map_err(|e| format!("egress roots: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The egress sender speaks HTTP/1.1 to upstreams.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_extra_roots_are_one_line_errors() {
        client_config(b"").unwrap();
        let e = client_config(b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n").unwrap_err();
        assert!(e.starts_with("egress roots: ") && !e.contains('\n'), "{e}");
    }
}
