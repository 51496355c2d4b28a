//! How a transport connects: extra trusted CAs, a client certificate (mTLS), skipping
//! verification (loudly), HTTP/2 by ALPN, and proxies.
//!
//! Everything goes through rustls (ring): certificates and keys are read with the PEM support
//! of `rustls-pki-types`, the system roots with `rustls-native-certs` (what hyper-rustls itself
//! uses), so no second TLS stack or PEM crate is pulled in.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::Serialize;

use crate::Error;

/// TLS and protocol options of a transport's connections. The default trusts the system's
/// roots, presents no client certificate and speaks HTTP/1.1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConnectOptions {
    /// A PEM file of CA certificates trusted besides the system's (a private CA).
    pub ca_bundle: Option<PathBuf>,
    /// A PEM certificate chain presented to the server (mutual TLS); needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `client_cert`.
    pub client_key: Option<PathBuf>,
    /// Accept any server certificate. For test endpoints only: a warning is logged at build.
    pub insecure_skip_verify: bool,
    /// Offer HTTP/2 by ALPN on https (and use it when the server picks it). Every in-flight
    /// request to a host is then a stream of one connection (hyper-util's pool opens no
    /// second one), so past the server's `max_concurrent_streams` (nginx and AWS load balancers:
    /// 128) requests wait in the client, and that wait counts as latency; receive times are
    /// per connection, so a chunk may carry a later stream's read time (never an earlier one).
    pub http2: bool,
    /// Which proxy, if any, connections go through.
    pub proxy: ProxySetting,
    /// Local addresses to open connections from, in turn (empty: the system picks). One
    /// source address reaches one endpoint with at most the ephemeral port range (~28,000
    /// connections on Linux); N addresses reach N times that. See [`parse_source_addrs`].
    pub source_addrs: Vec<std::net::IpAddr>,
}

/// The most source addresses [`parse_source_addrs`] accepts.
pub const MAX_SOURCE_ADDRS: usize = 4096;

/// Parses `--source-addrs`: a comma-separated list of IPv4 or IPv6 addresses and IPv4 ranges
/// (`127.0.0.2-127.0.0.9`, both ends included), at most [`MAX_SOURCE_ADDRS`] in all, no
/// repeats.
pub fn parse_source_addrs(spec: &str) -> Result<Vec<std::net::IpAddr>, Error> {
    use std::net::{IpAddr, Ipv4Addr};
    let bad = |reason: String| Error::InvalidUrl {
        url: spec.to_owned(),
        reason,
    };
    let mut out: Vec<IpAddr> = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (Ipv4Addr, Ipv4Addr) = match (a.trim().parse(), b.trim().parse()) {
                (Ok(a), Ok(b)) => (a, b),
                _ => return Err(bad(format!("{part:?} is not a range of IPv4 addresses"))),
            };
            let (a, b) = (u32::from(a), u32::from(b));
            if b < a {
                return Err(bad(format!("the range {part:?} runs backwards")));
            }
            if (b - a) as usize >= MAX_SOURCE_ADDRS {
                return Err(bad(format!("more than {MAX_SOURCE_ADDRS} addresses")));
            }
            out.extend((a..=b).map(|x| IpAddr::V4(Ipv4Addr::from(x))));
        } else {
            out.push(
                part.parse()
                    .map_err(|_| bad(format!("{part:?} is not an IP address")))?,
            );
        }
        if out.len() > MAX_SOURCE_ADDRS {
            return Err(bad(format!("more than {MAX_SOURCE_ADDRS} addresses")));
        }
    }
    // A connector binds only an address of the destination's family: mixing them would
    // leave some connections unbound and the rotation uneven.
    if out.iter().any(|a| a.is_ipv4()) && out.iter().any(|a| a.is_ipv6()) {
        return Err(bad(
            "mix IPv4 and IPv6 addresses: give one family, the endpoint's".into(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = out.iter().find(|a| !seen.insert(**a)) {
        return Err(bad(format!("{dup} is listed twice")));
    }
    if out.is_empty() {
        return Err(bad("no address given".into()));
    }
    Ok(out)
}

/// Where a transport's connections go through a proxy. Its `Debug` and `Serialize` forms hide
/// a proxy URL's credentials (`http://[redacted]@host:port`).
#[derive(Clone, Default, PartialEq, Eq)]
pub enum ProxySetting {
    /// `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` and `NO_PROXY` (or their lower-case forms),
    /// as curl reads them: loopback destinations are proxied too unless `NO_PROXY` names them.
    #[default]
    Environment,
    /// No proxy, whatever the environment says.
    Off,
    /// This proxy (`http://[user:password@]host:port`) for every destination.
    Url(String),
}

impl ProxySetting {
    /// `environment`, `off`, or the proxy URL with any credentials replaced by `[redacted]`.
    pub fn describe(&self) -> String {
        match self {
            ProxySetting::Environment => "environment".into(),
            ProxySetting::Off => "off".into(),
            ProxySetting::Url(url) => match (url.find("://"), url.rfind('@')) {
                (Some(s), Some(at)) if at > s => {
                    format!("{}[redacted]@{}", &url[..s + 3], &url[at + 1..])
                }
                _ => url.clone(),
            },
        }
    }

    /// The matcher that picks a proxy per destination; `None` when nothing is proxied.
    pub(crate) fn matcher(&self) -> Option<hyper_util::client::proxy::matcher::Matcher> {
        use hyper_util::client::proxy::matcher::Matcher;
        match self {
            ProxySetting::Off => None,
            ProxySetting::Url(url) => Some(Matcher::builder().all(url.clone()).build()),
            ProxySetting::Environment => {
                let set = [
                    "HTTPS_PROXY",
                    "https_proxy",
                    "HTTP_PROXY",
                    "http_proxy",
                    "ALL_PROXY",
                    "all_proxy",
                ]
                .iter()
                .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
                set.then(Matcher::from_env)
            }
        }
    }
}

impl std::fmt::Debug for ProxySetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProxySetting({})", self.describe())
    }
}

impl Serialize for ProxySetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.describe())
    }
}

fn tls_error(path: Option<&Path>, reason: impl Into<String>) -> Error {
    Error::TlsConfig {
        path: path.map(Path::to_owned),
        reason: reason.into(),
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_error(Some(path), e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(Some(path), e.to_string()))?;
    if certs.is_empty() {
        return Err(tls_error(Some(path), "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// The rustls client configuration for `options` (ALPN is set by the caller's connector).
pub(crate) fn client_config(options: &ConnectOptions) -> Result<ClientConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(None, e.to_string()))?;
    let builder = if options.insecure_skip_verify {
        tracing::warn!(
            "TLS certificate verification is OFF (--insecure): any server can impersonate the endpoint"
        );
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for e in &native.errors {
            tracing::warn!("reading the system's TLS roots: {e}");
        }
        roots.add_parsable_certificates(native.certs);
        if let Some(path) = &options.ca_bundle {
            for cert in read_certs(path)? {
                roots
                    .add(cert)
                    .map_err(|e| tls_error(Some(path), e.to_string()))?;
            }
        }
        if roots.is_empty() {
            tracing::warn!("no TLS roots found; https endpoints will fail to verify");
        }
        builder.with_root_certificates(roots)
    };
    match (&options.client_cert, &options.client_key) {
        (None, None) => Ok(builder.with_no_client_auth()),
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert)?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| tls_error(Some(key), format!("no usable private key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls_error(Some(cert), e.to_string()))
        }
        _ => Err(tls_error(
            None,
            "a client certificate needs both the certificate and its key",
        )),
    }
}

/// The verifier of `insecure_skip_verify`: any certificate, but handshake signatures are still
/// checked (so the connection is at least to whoever holds the presented key).
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_build_and_bad_files_are_named() {
        assert!(client_config(&ConnectOptions::default()).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let e = client_config(&ConnectOptions {
            ca_bundle: Some(empty.clone()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("empty.pem"), "{e}");
        let e = client_config(&ConnectOptions {
            client_cert: Some(empty),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.to_string().contains("both"), "{e}");
        let missing = client_config(&ConnectOptions {
            ca_bundle: Some(dir.path().join("missing.pem")),
            ..Default::default()
        })
        .unwrap_err();
        assert!(missing.to_string().contains("missing.pem"), "{missing}");
    }

    #[test]
    fn proxy_credentials_never_show() {
        let p = ProxySetting::Url("http://alice:s3cret@127.0.0.1:3128".into());
        assert_eq!(p.describe(), "http://[redacted]@127.0.0.1:3128");
        assert!(!format!("{p:?}").contains("s3cret"));
        assert!(!serde_json::to_string(&p).unwrap().contains("s3cret"));
        assert!(p.matcher().is_some());
        assert!(ProxySetting::Off.matcher().is_none());
        assert_eq!(
            ProxySetting::Url("http://h:1".into()).describe(),
            "http://h:1"
        );
    }

    #[test]
    fn source_address_lists_and_ranges() {
        let a = parse_source_addrs("127.0.0.2-127.0.0.4, 10.1.2.3").unwrap();
        let text: Vec<String> = a.iter().map(|x| x.to_string()).collect();
        assert_eq!(text, ["127.0.0.2", "127.0.0.3", "127.0.0.4", "10.1.2.3"]);
        assert_eq!(parse_source_addrs("::1, ::2").unwrap().len(), 2);
        assert_eq!(
            parse_source_addrs("127.0.0.255-127.0.1.1").unwrap().len(),
            3
        );
        for bad in [
            "",
            "127.0.0.9-127.0.0.2",
            "nope",
            "127.0.0.1,127.0.0.1",
            "10.0.0.0-10.1.0.0",
            "::1-::2",
            "127.0.0.2,::1",
        ] {
            assert!(parse_source_addrs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn insecure_builds() {
        let c = client_config(&ConnectOptions {
            insecure_skip_verify: true,
            ..Default::default()
        });
        assert!(c.is_ok());
    }
}
