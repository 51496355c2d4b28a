//! TLS to PostgreSQL, as libpq's `sslmode` and `sslrootcert` ask for it, in either form of
//! connection string (`?sslmode=verify-full&sslrootcert=/etc/ca.pem`, or `sslmode=require`
//! among `key=value` pairs):
//!
//! | sslmode | TLS | server certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `allow`, `prefer` (the default) | when the server offers it | not checked (as libpq) |
//! | `require` | always | checked against `sslrootcert` when one is given, else not (as libpq) |
//! | `verify-ca` | always | chain checked against `sslrootcert` (or the system's roots) |
//! | `verify-full` | always | chain and host name checked |
//!
//! `sslrootcert=system` takes the system's roots. Client certificates (`sslcert`, `sslkey`)
//! are refused with a clear error rather than ignored. The `postgres` driver reads `sslmode`
//! only as disable/prefer/require: the checks above are made here, with rustls (the ring
//! provider the HTTP transport already uses).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::location::{libpq_pairs, looks_like_libpq};

/// How to connect: in the clear, or with a rustls connector.
pub(crate) enum Tls {
    /// No TLS.
    Off,
    /// TLS as the connection string asks.
    On(Box<MakeRustlsConnect>),
}

/// The connection string made ready for the driver, and the TLS it asks for; `Err` is the
/// reason, for [`crate::Error::Location`].
pub(crate) fn prepare(conn: &str) -> Result<(postgres::Config, Tls), String> {
    let (rest, options) = split_options(conn);
    let mut mode = "prefer".to_owned();
    let mut root = None;
    let mut kept = Vec::new();
    for (k, v) in options {
        match k.as_str() {
            "sslmode" => mode = v,
            "sslrootcert" => root = Some(v),
            "sslcert" | "sslkey" | "sslpassword" => {
                return Err(format!(
                    "{k}: client certificates are not supported (use a password)"
                ))
            }
            _ => kept.push((k, v)),
        }
    }
    let (driver_mode, verify) = match mode.as_str() {
        "disable" => ("disable", None),
        "allow" | "prefer" => ("prefer", Some(Check::Nothing)),
        "require" if root.is_some() => ("require", Some(Check::Chain)),
        "require" => ("require", Some(Check::Nothing)),
        "verify-ca" => ("require", Some(Check::Chain)),
        "verify-full" => ("require", Some(Check::ChainAndName)),
        other => {
            return Err(format!(
                "sslmode {other:?}: use disable, prefer, require, verify-ca or verify-full"
            ))
        }
    };
    kept.push(("sslmode".into(), driver_mode.into()));
    let config: postgres::Config = join_options(&rest, &kept, looks_like_libpq(conn))
        .parse()
        .map_err(|e: postgres::Error| e.to_string())?;
    let tls = match verify {
        None => Tls::Off,
        Some(check) => Tls::On(Box::new(MakeRustlsConnect::new(client_config(
            check,
            root.as_deref(),
        )?))),
    };
    Ok((config, tls))
}

/// What is checked of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// The string without its options, and its options (a URL's query, or a libpq string's
/// pairs: then the first part is empty).
fn split_options(conn: &str) -> (String, Vec<(String, String)>) {
    if looks_like_libpq(conn) {
        return (String::new(), libpq_pairs(conn));
    }
    // the query starts at the first `?` after the user info (a password may hold one)
    let after = conn.rfind('@').map_or(0, |at| at + 1);
    let split = conn[after..].find('?').map(|i| after + i);
    match split.map(|i| (&conn[..i], &conn[i + 1..])) {
        Some((base, query)) => (
            base.to_owned(),
            form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        ),
        None => (conn.to_owned(), Vec::new()),
    }
}

fn join_options(base: &str, options: &[(String, String)], libpq: bool) -> String {
    if libpq {
        return options
            .iter()
            .map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'")))
            .collect::<Vec<_>>()
            .join(" ");
    }
    // percent-encoded (a space as %20: the driver does not read `+` as one)
    let query: Vec<String> = options
        .iter()
        .map(|(k, v)| format!("{}={}", percent(k), percent(v)))
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// `text` with every byte but RFC 3986's unreserved ones (and `/`, for paths) encoded.
fn percent(text: &str) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    const KEEP: &percent_encoding::AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~')
        .remove(b'/');
    utf8_percent_encode(text, KEEP).to_string()
}

fn client_config(check: Check, root: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let inner = match check {
        Check::Nothing => None,
        Check::Chain | Check::ChainAndName => {
            let roots = Arc::new(roots(root)?);
            Some(
                WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| format!("sslrootcert: {e}"))?,
            )
        }
    };
    let verifier = Verifier {
        inner,
        check_name: check == Check::ChainAndName,
        provider: provider.clone(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// The roots a certificate is checked against: `sslrootcert`'s PEM file, or the system's.
fn roots(root: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match root {
        None | Some("system") => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = store.add(cert);
            }
        }
        Some(path) => {
            let text = read_capped(path).map_err(|e| format!("sslrootcert {path}: {e}"))?;
            for cert in CertificateDer::pem_slice_iter(&text) {
                let cert = cert.map_err(|e| format!("sslrootcert {path}: {e}"))?;
                store
                    .add(cert)
                    .map_err(|e| format!("sslrootcert {path}: {e}"))?;
            }
        }
    }
    if store.is_empty() {
        return Err(format!(
            "sslrootcert {}: no certificate to check the server's against",
            root.unwrap_or("system")
        ));
    }
    Ok(store)
}

/// A CA file, at most 4 MiB of it (a bundle of every public root is about 250 KB).
fn read_capped(path: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    const CAP: u64 = 4 << 20;
    let mut out = Vec::new();
    std::fs::File::open(path)?
        .take(CAP + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > CAP {
        return Err(std::io::Error::other("larger than 4 MiB, the most read"));
    }
    Ok(out)
}

/// The server-certificate check libpq's modes ask for.
#[derive(Debug)]
struct Verifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(inner) = &self.inner else {
            return Ok(ServerCertVerified::assertion());
        };
        match inner.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn modes_map_to_the_driver_and_our_checks() {
        let (c, tls) = prepare("postgres://u:pw@h:5432/db?sslmode=disable").unwrap();
        assert!(matches!(tls, Tls::Off));
        assert_eq!(c.get_ssl_mode(), postgres::config::SslMode::Disable);
        let (c, tls) = prepare("host=h user=u sslmode=require").unwrap();
        assert!(matches!(tls, Tls::On(_)));
        assert_eq!(c.get_ssl_mode(), postgres::config::SslMode::Require);
        let (c, _) = prepare("postgres://u@h/db").unwrap();
        assert_eq!(c.get_ssl_mode(), postgres::config::SslMode::Prefer);
        assert_eq!(c.get_dbname(), Some("db"));
        let e = prepare("postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
            .err()
            .unwrap();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let e = prepare("postgres://u@h/db?sslmode=sometimes")
            .err()
            .unwrap();
        assert!(e.contains("verify-full"), "{e}");
        let e = prepare("host=h sslcert=/c.pem").err().unwrap();
        assert!(e.contains("client certificates"), "{e}");
        // options keep their spaces; a `?` in the password is not the query
        let (c, _) =
            prepare("postgres://u:p?ss@h/db?options=-c%20statement_timeout%3D5000").unwrap();
        assert_eq!(c.get_options(), Some("-c statement_timeout=5000"));
        assert_eq!(c.get_password(), Some(&b"p?ss"[..]));
    }
}
