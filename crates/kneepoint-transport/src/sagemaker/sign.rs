//! SigV4 signing (and, for the simulator, checking) of SageMaker runtime requests with AWS's
//! `aws-sigv4` crate.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SessionTokenMode, SignableBody,
    SignableRequest, SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

/// The signing name of the SageMaker runtime.
pub const SERVICE: &str = "sagemaker";

/// How a request is signed (the defaults are what the AWS SDKs use for the SageMaker runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignOptions {
    /// Add and sign `x-amz-content-sha256` (S3 needs it; SageMaker does not).
    pub content_sha256_header: bool,
    /// Sign `x-amz-security-token` (true) or add it after signing.
    pub sign_session_token: bool,
    /// S3's rules for the path: encoded once and not normalised (other services encode it
    /// twice).
    pub s3_path: bool,
}

impl Default for SignOptions {
    fn default() -> Self {
        SignOptions {
            content_sha256_header: false,
            sign_session_token: true,
            s3_path: false,
        }
    }
}

/// The headers to add to a request: `(name, value)`, `authorization` and `x-amz-date` among them.
/// `headers` are the request's own headers (all of them are signed; `host` is taken from the
/// URL when absent). Errors are strings: they never contain the secret.
#[allow(clippy::too_many_arguments)]
pub fn sign_request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    service: &str,
    time: SystemTime,
    options: SignOptions,
) -> Result<Vec<(String, String)>, String> {
    let identity: Identity = credentials.clone().into();
    let mut settings = SigningSettings::default();
    if options.content_sha256_header {
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    }
    if !options.sign_session_token {
        settings.session_token_mode = SessionTokenMode::Exclude;
    }
    if options.s3_path {
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    }
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| format!("SigV4 parameters: {e}"))?
        .into();
    let signable = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| format!("SigV4 cannot sign this request: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("SigV4 signing failed: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

/// The parts of an `Authorization: AWS4-HMAC-SHA256 ...` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The access key id.
    pub access_key_id: String,
    /// `YYYYMMDD`.
    pub date: String,
    /// The region of the credential scope.
    pub region: String,
    /// The service of the credential scope.
    pub service: String,
    /// Lower-case names of the signed headers, in order.
    pub signed_headers: Vec<String>,
    /// The hex signature.
    pub signature: String,
}

/// Parses an `Authorization` header; `None` when it is not SigV4.
pub fn parse_authorization(value: &str) -> Option<Authorization> {
    let rest = value.strip_prefix("AWS4-HMAC-SHA256")?.trim();
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed = Some(v),
            "Signature" => signature = Some(v),
            _ => {}
        }
    }
    let mut scope = credential?.split('/');
    let (id, date, region, service, term) = (
        scope.next()?,
        scope.next()?,
        scope.next()?,
        scope.next()?,
        scope.next()?,
    );
    if term != "aws4_request" {
        return None;
    }
    Some(Authorization {
        access_key_id: id.to_owned(),
        date: date.to_owned(),
        region: region.to_owned(),
        service: service.to_owned(),
        signed_headers: signed?.split(';').map(str::to_owned).collect(),
        signature: signature?.to_owned(),
    })
}

/// Parses `x-amz-date` (`YYYYMMDDTHHMMSSZ`).
pub fn parse_amz_date(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (hh, mm, ss) = (n(9..11)?, n(11..13)?, n(13..15)?);
    let days = kneepoint_core::civil::days_from_civil(y, m, d);
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

/// Why a signed request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyError {
    /// No `Authorization` header, or not SigV4.
    Missing,
    /// Signed with another access key.
    UnknownKey,
    /// The signature does not match.
    Mismatch,
    /// The request is malformed (no date, unparseable).
    Malformed(String),
}

/// Checks a request's SigV4 signature against `credentials` (the simulator's test key): the
/// request is signed again over exactly the headers it says it signed, at its own
/// `x-amz-date`, and the signatures compared.
pub fn verify_request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: &Credentials,
) -> Result<(), VerifyError> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    };
    let auth = get("authorization")
        .and_then(parse_authorization)
        .ok_or(VerifyError::Missing)?;
    if auth.access_key_id != credentials.access_key_id() {
        return Err(VerifyError::UnknownKey);
    }
    let time = get("x-amz-date")
        .and_then(parse_amz_date)
        .ok_or_else(|| VerifyError::Malformed("missing or bad x-amz-date".into()))?;
    let signed: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            auth.signed_headers.contains(&k) && k != "x-amz-date" && k != "x-amz-security-token"
        })
        .copied()
        .collect();
    let token_signed = auth
        .signed_headers
        .iter()
        .any(|h| h == "x-amz-security-token");
    let creds = Credentials::new(
        credentials.access_key_id(),
        credentials.secret_access_key(),
        get("x-amz-security-token").map(str::to_owned),
        None,
        "verify",
    );
    let options = SignOptions {
        content_sha256_header: auth
            .signed_headers
            .iter()
            .any(|h| h == "x-amz-content-sha256"),
        sign_session_token: token_signed,
        s3_path: auth.service == "s3",
    };
    let signed: Vec<(&str, &str)> = signed
        .into_iter()
        .filter(|(k, _)| {
            !(options.content_sha256_header && k.eq_ignore_ascii_case("x-amz-content-sha256"))
        })
        .collect();
    let again = sign_request(
        method,
        url,
        &signed,
        body,
        &creds,
        &auth.region,
        &auth.service,
        time,
        options,
    )
    .map_err(VerifyError::Malformed)?;
    let expected = again
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| parse_authorization(v))
        .ok_or_else(|| VerifyError::Malformed("re-signing gave no authorization".into()))?;
    if expected.signature == auth.signature && expected.signed_headers == auth.signed_headers {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    // AWS's published SigV4 test suite (the `aws-signing-test-suite/v4` cases that apply to a
    // POST): its example credentials, region us-east-1, service "service", 2015-08-30T12:36:00Z.
    const KEY_ID: &str = "AKIDEXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const TOKEN: &str = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";

    struct Case {
        name: &'static str,
        url: &'static str,
        headers: &'static [(&'static str, &'static str)],
        body: &'static [u8],
        sha256_header: bool,
        token: Option<bool>,
        signature: &'static str,
    }

    const HOST: (&str, &str) = ("Host", "example.amazonaws.com");

    const CASES: &[Case] = &[
        Case {
            name: "post-vanilla",
            url: "https://example.amazonaws.com/",
            headers: &[HOST],
            body: b"",
            sha256_header: false,
            token: None,
            signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        },
        Case {
            name: "post-vanilla-query",
            url: "https://example.amazonaws.com/?Param1=value1",
            headers: &[HOST],
            body: b"",
            sha256_header: false,
            token: None,
            signature: "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
        },
        Case {
            name: "post-header-key-sort",
            url: "https://example.amazonaws.com/",
            headers: &[HOST, ("My-Header1", "value1")],
            body: b"",
            sha256_header: false,
            token: None,
            signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
        },
        Case {
            name: "post-header-value-case",
            url: "https://example.amazonaws.com/",
            headers: &[HOST, ("My-Header1", "VALUE1")],
            body: b"",
            sha256_header: false,
            token: None,
            signature: "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
        },
        Case {
            name: "post-sts-header-before",
            url: "https://example.amazonaws.com/",
            headers: &[HOST],
            body: b"",
            sha256_header: false,
            token: Some(true),
            signature: "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
        },
        Case {
            name: "post-sts-header-after",
            url: "https://example.amazonaws.com/",
            headers: &[HOST],
            body: b"",
            sha256_header: false,
            token: Some(false),
            signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        },
        Case {
            name: "post-x-www-form-urlencoded",
            url: "https://example.amazonaws.com/",
            headers: &[
                ("Content-Type", "application/x-www-form-urlencoded"),
                HOST,
                ("Content-Length", "13"),
            ],
            body: b"Param1=value1",
            sha256_header: true,
            token: None,
            signature: "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b",
        },
        Case {
            name: "post-x-www-form-urlencoded-parameters",
            url: "https://example.amazonaws.com/",
            headers: &[
                (
                    "Content-Type",
                    "application/x-www-form-urlencoded; charset=utf-8",
                ),
                HOST,
                ("Content-Length", "13"),
            ],
            body: b"Param1=value1",
            sha256_header: true,
            token: None,
            signature: "328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422",
        },
    ];

    fn time() -> SystemTime {
        parse_amz_date("20150830T123600Z").unwrap()
    }

    #[test]
    fn aws_published_post_vectors() {
        for c in CASES {
            let token = c.token.map(|_| TOKEN.to_owned());
            let creds = Credentials::new(KEY_ID, SECRET, token, None, "test");
            let options = SignOptions {
                content_sha256_header: c.sha256_header,
                sign_session_token: c.token.unwrap_or(true),
                s3_path: false,
            };
            let out = sign_request(
                "POST",
                c.url,
                c.headers,
                c.body,
                &creds,
                "us-east-1",
                "service",
                time(),
                options,
            )
            .unwrap();
            let auth = out
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| parse_authorization(v).unwrap())
                .unwrap();
            assert_eq!(auth.signature, c.signature, "{}", c.name);
            assert_eq!(auth.access_key_id, KEY_ID);
            assert_eq!(auth.date, "20150830");
            let date = out.iter().find(|(k, _)| k == "x-amz-date").unwrap();
            assert_eq!(date.1, "20150830T123600Z");
        }
    }

    #[test]
    fn verification_accepts_its_own_signatures_and_nothing_else() {
        let creds = Credentials::new(KEY_ID, SECRET, None, None, "test");
        let url = "http://127.0.0.1:9/endpoints/e/invocations";
        let base = [
            ("host", "127.0.0.1:9"),
            ("content-type", "application/json"),
            ("x-amzn-sagemaker-inference-component", "ic-1"),
        ];
        let body = br#"{"inputs":"hi"}"#;
        let signed = sign_request(
            "POST",
            url,
            &base,
            body,
            &creds,
            "us-west-2",
            SERVICE,
            SystemTime::now(),
            SignOptions::default(),
        )
        .unwrap();
        let mut all: Vec<(&str, &str)> = base.to_vec();
        all.extend(signed.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        assert_eq!(verify_request("POST", url, &all, body, &creds), Ok(()));
        let tampered = br#"{"inputs":"ho"}"#;
        assert_eq!(
            verify_request("POST", url, &all, tampered, &creds),
            Err(VerifyError::Mismatch)
        );
        let other = Credentials::new(KEY_ID, "another-secret", None, None, "t");
        assert_eq!(
            verify_request("POST", url, &all, body, &other),
            Err(VerifyError::Mismatch)
        );
        let stranger = Credentials::new("AKIDOTHER", SECRET, None, None, "t");
        assert_eq!(
            verify_request("POST", url, &all, body, &stranger),
            Err(VerifyError::UnknownKey)
        );
        assert_eq!(
            verify_request("POST", url, &base, body, &creds),
            Err(VerifyError::Missing)
        );
    }

    #[test]
    fn amz_dates() {
        let t = parse_amz_date("20150830T123600Z").unwrap();
        let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
        assert_eq!(secs, 1_440_938_160);
        assert!(parse_amz_date("2015-08-30").is_none());
    }
}
