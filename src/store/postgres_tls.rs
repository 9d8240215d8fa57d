//! How the PostgreSQL store reaches its server: libpq's TLS settings read
//! from the store URL (`sslmode`, `sslrootcert`), honoured with rustls, and
//! a failed connection put into one sentence that says what to do.
//!
//! The client library understands only `sslmode=disable|prefer|require` and
//! no `sslrootcert`, so both are taken out of the URL here; everything else
//! in it is the client library's to read. What each mode does is libpq's:
//!
//! | sslmode | TLS | certificate |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` (the default) | if the server offers it | not checked (the chain, with `sslrootcert`) |
//! | `require` | always | not checked (the chain, with `sslrootcert`) |
//! | `verify-ca` | always | the chain up to a trusted CA |
//! | `verify-full` | always | the chain, and the host name in the certificate |
//!
//! A trusted CA is one in `sslrootcert=PATH` (a PEM file), or else one of
//! the Mozilla roots compiled into flowc (`webpki-roots`); `sslrootcert=system`
//! names those roots and, as in libpq, needs `verify-full`. `allow` (plain
//! first, TLS only if the server insists) and client certificates are
//! refused with a message rather than quietly treated as something weaker.

use percent_encoding::percent_decode_str;
use postgres::config::Host;
use postgres::{Client, NoTls};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`, all of the values flowc honours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// `sslmode=disable`: plain TCP, never TLS.
    Disable,
    /// `sslmode=prefer`: TLS if the server offers it, without checking its
    /// certificate; plain TCP otherwise.
    Prefer,
    /// `sslmode=require`: TLS or no connection, the certificate unchecked
    /// (unless `sslrootcert` is given, as libpq does).
    Require,
    /// `sslmode=verify-ca`: TLS, the certificate signed by a trusted root.
    VerifyCa,
    /// `sslmode=verify-full`: as `verify-ca`, and the certificate names the
    /// host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode, String> {
        match text {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-ca" => Ok(SslMode::VerifyCa),
            "verify-full" => Ok(SslMode::VerifyFull),
            "allow" => Err("sslmode=allow (TLS only when the server insists) is not supported; \
                 use sslmode=prefer, or sslmode=require to insist on TLS"
                .to_string()),
            other => {
                Err(format!("sslmode `{other}` is not known; use disable, prefer, require, verify-ca or verify-full"))
            }
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The mode the client library runs the handshake under: it decides
    /// whether TLS is asked for and insisted on; the checks of the
    /// certificate are the connector's.
    fn wire(self) -> postgres::config::SslMode {
        match self {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => postgres::config::SslMode::Require,
        }
    }
}

/// Where trusted CAs come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootCerts {
    /// The Mozilla roots compiled into flowc (`sslrootcert=system`, or none given).
    Builtin,
    /// A PEM file of one or more CA certificates (`sslrootcert=PATH`).
    File(PathBuf),
}

/// What the server's certificate must prove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verification {
    Nothing,
    Chain,
    ChainAndName,
}

/// The TLS part of a store URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSettings {
    /// Whether TLS is used, and what the server's certificate must prove.
    pub mode: SslMode,
    /// The certificates a server's chain is checked against.
    pub roots: RootCerts,
}

/// libpq settings flowc knows and does not honour: named, so that the
/// message says so instead of "unknown option".
const UNSUPPORTED: &[&str] = &[
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslcrl",
    "sslcrldir",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "sslcompression",
];

impl TlsSettings {
    /// The TLS settings of `url`, and the URL without them for the client
    /// library (which would refuse `sslrootcert` and the verify modes).
    pub fn from_url(url: &str) -> Result<(TlsSettings, String), String> {
        let (base, query) = split_query(url);
        let mut mode = None;
        let mut root_cert = None;
        let mut kept = Vec::new();
        for parameter in query.split('&').filter(|parameter| !parameter.is_empty()) {
            let Some((key, value)) = parameter.split_once('=') else {
                kept.push(parameter);
                continue;
            };
            let key = decode(key)?;
            match key.as_str() {
                "sslmode" => mode = Some(SslMode::parse(&decode(value)?)?),
                "sslrootcert" => root_cert = Some(decode(value)?),
                unsupported if UNSUPPORTED.contains(&unsupported) => {
                    return Err(format!(
                        "`{unsupported}` is not supported by flowc's PostgreSQL store \
                         (client certificates, revocation lists and protocol bounds are not); remove it"
                    ));
                }
                _ => kept.push(parameter),
            }
        }
        let settings = TlsSettings::resolve(mode, root_cert)?;
        let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        Ok((settings, rest))
    }

    fn resolve(mode: Option<SslMode>, root_cert: Option<String>) -> Result<TlsSettings, String> {
        match root_cert.as_deref() {
            Some("") => Err("sslrootcert is empty; give the path of the CA's PEM file".to_string()),
            // libpq's rule: the system's roots are only worth trusting when
            // the host name is checked too.
            Some("system") => match mode {
                None | Some(SslMode::VerifyFull) => {
                    Ok(TlsSettings { mode: SslMode::VerifyFull, roots: RootCerts::Builtin })
                }
                Some(weaker) => Err(format!(
                    "sslmode={} may not be used with sslrootcert=system; use sslmode=verify-full",
                    weaker.as_str()
                )),
            },
            Some(path) => {
                Ok(TlsSettings { mode: mode.unwrap_or(SslMode::Prefer), roots: RootCerts::File(PathBuf::from(path)) })
            }
            None => Ok(TlsSettings { mode: mode.unwrap_or(SslMode::Prefer), roots: RootCerts::Builtin }),
        }
    }

    fn verification(&self) -> Verification {
        match self.mode {
            SslMode::Disable => Verification::Nothing,
            // libpq's rule: a CA file named with these makes them check the chain.
            SslMode::Prefer | SslMode::Require if matches!(self.roots, RootCerts::File(_)) => Verification::Chain,
            SslMode::Prefer | SslMode::Require => Verification::Nothing,
            SslMode::VerifyCa => Verification::Chain,
            SslMode::VerifyFull => Verification::ChainAndName,
        }
    }

    fn root_store(&self) -> Result<RootCertStore, String> {
        let RootCerts::File(path) = &self.roots else {
            return Ok(RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() });
        };
        let shown = path.display();
        let bytes = std::fs::read(path).map_err(|error| {
            format!("cannot read sslrootcert `{shown}`: {error}; give the path of the CA's certificate (PEM)")
        })?;
        let mut store = RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(&bytes) {
            let certificate =
                certificate.map_err(|error| format!("sslrootcert `{shown}` is not a PEM file: {error}"))?;
            store
                .add(certificate)
                .map_err(|error| format!("sslrootcert `{shown}` holds a bad certificate: {error}"))?;
        }
        if store.is_empty() {
            return Err(format!(
                "sslrootcert `{shown}` holds no certificate; give the CA's certificate as PEM (-----BEGIN CERTIFICATE-----)"
            ));
        }
        Ok(store)
    }

    fn client_config(&self) -> Result<ClientConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| error.to_string())?;
        let chain = match self.verification() {
            Verification::ChainAndName => {
                return Ok(alpn(builder.with_root_certificates(self.root_store()?).with_no_client_auth()));
            }
            Verification::Nothing => None,
            Verification::Chain => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.root_store()?), Arc::clone(&provider))
                    .build()
                    .map_err(|error| error.to_string())?,
            ),
        };
        let relaxed = Arc::new(Relaxed { provider, chain });
        Ok(alpn(builder.dangerous().with_custom_certificate_verifier(relaxed).with_no_client_auth()))
    }
}

/// What libpq offers; PostgreSQL 17's direct TLS (`sslnegotiation=direct`)
/// requires it.
fn alpn(mut config: ClientConfig) -> ClientConfig {
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    config
}

/// `url` cut before its query, and the query. The credentials end at the
/// first `@`, as the client library reads them, so a `?` in a password is
/// not taken for the query.
pub(super) fn split_query(url: &str) -> (&str, &str) {
    let authority = url.find("://").map_or(0, |scheme| scheme + 3);
    let after_credentials =
        url.get(authority..).and_then(|rest| rest.find('@')).map_or(authority, |at| authority + at + 1);
    match url.get(after_credentials..).and_then(|rest| rest.find('?')) {
        Some(question) => {
            let cut = after_credentials + question;
            (url.get(..cut).unwrap_or(url), url.get(cut + 1..).unwrap_or_default())
        }
        None => (url, ""),
    }
}

fn decode(text: &str) -> Result<String, String> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| format!("`{text}` in the URL is not UTF-8 once decoded"))
}

/// Connects to the server `url` names, with TLS as its `sslmode` says. The
/// error is one sentence, without the URL (the caller names it, redacted).
pub fn connect(url: &str) -> Result<Client, String> {
    let (settings, rest) = TlsSettings::from_url(url)?;
    let mut config: postgres::Config = rest.parse().map_err(|error: postgres::Error| describe(&error))?;
    // As libpq: TLS is never used on a Unix socket, whatever the mode.
    let all_local = config.get_hosts().iter().all(|host| !matches!(host, Host::Tcp(_)));
    let mode = if all_local && !config.get_hosts().is_empty() { SslMode::Disable } else { settings.mode };
    config.ssl_mode(mode.wire());
    let connected = match mode {
        SslMode::Disable => config.connect(NoTls),
        _ => config.connect(MakeRustlsConnect::new(settings.client_config()?)),
    };
    connected.map_err(|error| explain(&error, &settings))
}

/// What went wrong, and what to do about it.
fn explain(error: &postgres::Error, settings: &TlsSettings) -> String {
    if error.as_db_error().is_some() {
        let said = describe(error);
        // The server's pg_hba.conf wants TLS for this user (`hostssl`).
        if said.contains("no encryption") {
            return format!("{said}; the server accepts this user only over TLS: use sslmode=require or stronger");
        }
        return said;
    }
    if let Some(tls) = rustls_error(error) {
        return match tls {
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => format!(
                "the server's certificate is not for this host ({tls}); connect with a host name the \
                 certificate lists, or use sslmode=verify-ca to check only that a trusted CA signed it"
            ),
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
                let trusted = match &settings.roots {
                    RootCerts::File(path) => format!("the CA in sslrootcert `{}`", path.display()),
                    RootCerts::Builtin => "a CA flowc trusts (no sslrootcert was given)".to_string(),
                };
                format!(
                    "the server's certificate is not signed by {trusted} ({tls}); name the CA that signed it \
                     with sslrootcert=PATH (managed databases publish theirs), or use sslmode=require to \
                     encrypt without checking the certificate"
                )
            }
            rustls::Error::InvalidCertificate(_) => format!(
                "the server's certificate does not verify ({tls}); renew or fix the server's certificate, or \
                 use sslmode=require to encrypt without checking it"
            ),
            _ => format!("the TLS handshake with the server failed ({tls})"),
        };
    }
    let text = describe(error);
    if text.contains("server does not support TLS") {
        return format!(
            "the server does not offer TLS, and sslmode={} needs it; turn on ssl on the server, or use \
             sslmode=prefer on a network you trust",
            settings.mode.as_str()
        );
    }
    text
}

/// What the server said (`FATAL: …`), or the error and what caused it,
/// each after a colon: the client library's own words are only its kind
/// ("db error", "error connecting to server").
pub fn describe(error: &postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(current) = cause {
        text.push_str(": ");
        text.push_str(&current.to_string());
        cause = current.source();
    }
    text
}

/// The rustls error under a failed connection, if TLS is what failed: the
/// connector hands it up inside an I/O error.
fn rustls_error(error: &postgres::Error) -> Option<&rustls::Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(current) = cause {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(inner) = current.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return Some(tls);
            }
        }
        cause = current.source();
    }
    None
}

/// The certificate checks short of WebPKI's full one: none at all
/// (`prefer` and `require` without a CA: encrypted, not authenticated), or,
/// with `chain`, everything but the host name (`verify-ca`; WebPKI checks
/// the chain before the name, so a name mismatch means the chain passed).
/// The handshake's signatures are checked either way, so the server must
/// hold the key of the certificate it presents.
#[derive(Debug)]
struct Relaxed {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Relaxed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            checked => checked,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> Result<(TlsSettings, String), String> {
        TlsSettings::from_url(url)
    }

    #[test]
    fn no_sslmode_is_prefer_and_the_url_is_passed_on_untouched() {
        let (tls, rest) = settings("postgres://flowc:pw@db/flowc").unwrap();
        assert_eq!((tls.mode, &tls.roots), (SslMode::Prefer, &RootCerts::Builtin));
        assert_eq!(rest, "postgres://flowc:pw@db/flowc");
        assert_eq!(tls.verification(), Verification::Nothing);
    }

    #[test]
    fn the_tls_parameters_are_taken_out_and_the_others_kept() {
        let (tls, rest) = settings(
            "postgresql://u@db:5432/app?connect_timeout=5&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20bundle.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(tls.mode, SslMode::VerifyFull);
        assert_eq!(tls.roots, RootCerts::File(PathBuf::from("/etc/ca bundle.pem")));
        assert_eq!(rest, "postgresql://u@db:5432/app?connect_timeout=5&application_name=x");
        assert_eq!(tls.verification(), Verification::ChainAndName);
    }

    #[test]
    fn a_question_mark_in_the_password_is_not_the_query() {
        let (tls, rest) = settings("postgres://u:p?w@db/app?sslmode=require").unwrap();
        assert_eq!(tls.mode, SslMode::Require);
        assert_eq!(rest, "postgres://u:p?w@db/app");
    }

    #[test]
    fn each_mode_checks_what_libpq_checks() {
        let check = |query: &str| settings(&format!("postgres://db/app?{query}")).unwrap().0.verification();
        assert_eq!(check("sslmode=disable"), Verification::Nothing);
        assert_eq!(check("sslmode=require"), Verification::Nothing);
        assert_eq!(check("sslmode=verify-ca"), Verification::Chain);
        assert_eq!(check("sslmode=verify-full"), Verification::ChainAndName);
        // libpq's rule for a named CA file: require then checks the chain.
        assert_eq!(check("sslmode=require&sslrootcert=ca.pem"), Verification::Chain);
        assert_eq!(check("sslrootcert=system"), Verification::ChainAndName);
    }

    #[test]
    fn modes_flowc_cannot_honour_are_refused_with_what_to_use() {
        let refusal = |query: &str| settings(&format!("postgres://db/app?{query}")).unwrap_err();
        assert!(refusal("sslmode=allow").contains("use sslmode=prefer"));
        assert!(refusal("sslmode=verify").contains("use disable, prefer, require, verify-ca or verify-full"));
        assert!(refusal("sslmode=require&sslrootcert=system").contains("use sslmode=verify-full"));
        assert!(refusal("sslcert=client.pem").contains("`sslcert` is not supported"));
        assert!(refusal("sslrootcert=").contains("sslrootcert is empty"));
    }

    #[test]
    fn a_missing_or_certificate_less_root_file_is_said_plainly() {
        let missing = TlsSettings::resolve(Some(SslMode::VerifyFull), Some("/nonexistent/ca.pem".to_string()))
            .unwrap()
            .root_store()
            .unwrap_err();
        assert!(missing.starts_with("cannot read sslrootcert `/nonexistent/ca.pem`"), "{missing}");
        let dir = std::env::temp_dir().join(format!("flowc-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("not-a-ca.pem");
        std::fs::write(&empty, "hello\n").unwrap();
        let none = TlsSettings::resolve(Some(SslMode::VerifyCa), Some(empty.display().to_string()))
            .unwrap()
            .root_store()
            .unwrap_err();
        assert!(none.contains("holds no certificate"), "{none}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_unix_socket_host_never_uses_tls() {
        // Nothing listens at the socket: the point is that no TLS is tried
        // (which would fail with "no hostname provided for TLS handshake").
        let error =
            connect("postgres://flowc@%2Fnonexistent-flowc-socket-dir/db?sslmode=verify-full").map(|_| ()).unwrap_err();
        assert!(!error.contains("TLS"), "{error}");
    }
}
