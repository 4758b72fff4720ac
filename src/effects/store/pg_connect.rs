//! Reaching the fleet's PostgreSQL server as libpq users expect: the URL's parameters, then
//! libpq's environment (`PGPASSWORD`, `PGPASSFILE` or `~/.pgpass`, `PGSSLMODE`,
//! `PGSSLROOTCERT`), and TLS through rustls (no system OpenSSL to link or to match).
//!
//! `sslmode` means what it means to libpq: `disable` never speaks TLS; `allow` and `prefer`
//! (the default) use it when the server offers it, without checking the certificate; `require`
//! insists on it, and checks the certificate's chain like `verify-ca` when a root certificate
//! is at hand (`sslrootcert`, or `~/.postgresql/root.crt`), as libpq does; `verify-ca` checks
//! the chain against `sslrootcert`; `verify-full` also checks that the certificate names the
//! host. `sslrootcert=system` is the system's CA bundle. The driver knows only disable, prefer
//! and require, so the TLS parameters are taken out of the URL here and the checking is done
//! by the verifiers below.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

/// How the connection is to be made.
pub struct Endpoint {
    pub config: postgres::Config,
    /// `None`: no TLS (sslmode=disable).
    pub tls: Option<rustls::ClientConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// A URL (and the environment) as a connection target. Errors are sentences for the user.
pub fn endpoint(url: &str) -> Result<Endpoint, String> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut kept = Vec::new();
    let (mut mode, mut root) = (None, None);
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "sslmode" => mode = Some(v.to_string()),
            "sslrootcert" => root = Some(percent_decode(v)),
            "sslcert" | "sslkey" => {
                return Err(format!(
                    "{k}: client certificates are not supported yet; authenticate with a password (PGPASSWORD or ~/.pgpass)"
                ));
            }
            _ => kept.push(kv),
        }
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mode = mode.or_else(|| env("PGSSLMODE"));
    let root = root.or_else(|| env("PGSSLROOTCERT"));
    let mode = match mode.as_deref().unwrap_or("prefer") {
        "disable" => Mode::Disable,
        "allow" | "prefer" => Mode::Prefer,
        "require" => Mode::Require,
        "verify-ca" => Mode::VerifyCa,
        "verify-full" => Mode::VerifyFull,
        other => {
            return Err(format!(
                "sslmode '{other}' is not one of disable, allow, prefer, require, verify-ca, verify-full"
            ));
        }
    };
    let rebuilt = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mut config: postgres::Config = rebuilt
        .parse()
        .map_err(|e: postgres::Error| e.to_string())?;
    if config.get_password().is_none()
        && let Some(pw) = env("PGPASSWORD").or_else(|| pgpass(&config))
    {
        config.password(pw);
    }
    let tls = tls_config(mode, root.as_deref())?;
    config.ssl_mode(match mode {
        Mode::Disable => postgres::config::SslMode::Disable,
        Mode::Prefer => postgres::config::SslMode::Prefer,
        _ => postgres::config::SslMode::Require,
    });
    Ok(Endpoint { config, tls })
}

/// The rustls configuration for `mode` (`None` for disable).
fn tls_config(mode: Mode, root: Option<&str>) -> Result<Option<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let default_root = home().map(|h| h.join(".postgresql/root.crt"));
    let root_file: Option<PathBuf> = match root {
        Some("system") => Some(PathBuf::from("/etc/ssl/certs/ca-certificates.crt")),
        Some(p) => Some(PathBuf::from(p)),
        None => default_root.filter(|p| p.is_file()),
    };
    let verify = match mode {
        Mode::Disable => return Ok(None),
        Mode::Prefer => None,
        // libpq: require with a root certificate at hand behaves as verify-ca.
        Mode::Require => root_file.as_ref().map(|f| (f, false)),
        Mode::VerifyCa | Mode::VerifyFull => Some((
            root_file.as_ref().ok_or(
                "sslmode verify-ca and verify-full need the server's root certificate: give sslrootcert=FILE (or PGSSLROOTCERT), or put it in ~/.postgresql/root.crt",
            )?,
            mode == Mode::VerifyFull,
        )),
    };
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let config = match verify {
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCheck(provider)))
            .with_no_client_auth(),
        Some((file, names)) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = read_certs(file)?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("{}: no certificate could be read", file.display()));
            }
            let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::clone(&provider),
            )
            .build()
            .map_err(|e| e.to_string())?;
            let verifier: Arc<dyn ServerCertVerifier> = if names {
                chain
            } else {
                Arc::new(ChainOnly(chain))
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(verifier)
                .with_no_client_auth()
        }
    };
    Ok(Some(config))
}

fn read_certs(file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read {}: {e}", file.display()))
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `%2F` and friends, as a URL parameter spells a path.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The password `~/.pgpass` (or `PGPASSFILE`) gives for this host, port, database and user,
/// read as libpq reads it: `host:port:database:user:password`, `*` matching anything, `\`
/// escaping `:` and `\`, the first matching line winning, and the file ignored unless only
/// its owner may read it.
fn pgpass(config: &postgres::Config) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let file = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| home().map(|h| h.join(".pgpass")))?;
    let meta = std::fs::metadata(&file).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o077 != 0 {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    let host = match config.get_hosts().first()? {
        postgres::config::Host::Tcp(h) => h.clone(),
        postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default().to_string();
    let db = config.get_dbname().unwrap_or(&user).to_string();
    let want = [host.as_str(), port.as_str(), db.as_str(), user.as_str()];
    pgpass_lookup(&text, &want)
}

/// The password of the first line of a pgpass file matching `want` (host, port, db, user).
fn pgpass_lookup(text: &str, want: &[&str; 4]) -> Option<String> {
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let fields = split_pgpass(line);
        if fields.len() != 5 {
            continue;
        }
        let matches = fields[..4]
            .iter()
            .zip(want)
            .all(|(f, w)| f == "*" || f == w || (*w == "localhost" && f == "localhost"));
        if matches {
            return Some(fields[4].clone());
        }
    }
    None
}

fn split_pgpass(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(n), Some(f)) = (chars.next(), fields.last_mut()) {
                    f.push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => {
                if let Some(f) = fields.last_mut() {
                    f.push(c);
                }
            }
        }
    }
    fields
}

/// TLS without checking the certificate (sslmode prefer and require without a root
/// certificate, as libpq): the link is encrypted, the server not authenticated. Signatures
/// are still checked, so the handshake itself is sound.
#[derive(Debug)]
struct NoCheck(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
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

/// verify-ca: the chain must lead to the root certificate; the name in it is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_lines_match_as_libpq_reads_them() {
        let text = "# comment\n\
                    other:5432:*:me:no\n\
                    db.lan:5432:fleet:me:first\\:pw\n\
                    *:*:*:me:fallback\n";
        let want = |h, p, d, u| pgpass_lookup(text, &[h, p, d, u]);
        assert_eq!(
            want("db.lan", "5432", "fleet", "me"),
            Some("first:pw".into())
        );
        assert_eq!(
            want("db.lan", "5433", "fleet", "me"),
            Some("fallback".into())
        );
        assert_eq!(want("db.lan", "5432", "fleet", "you"), None);
    }

    #[test]
    fn tls_parameters_are_taken_out_of_the_url_and_checked() {
        let t = endpoint("postgresql://me@db.lan/fleet?sslmode=require&connect_timeout=3").unwrap();
        assert!(t.tls.is_some());
        assert_eq!(t.config.get_ssl_mode(), postgres::config::SslMode::Require);
        assert_eq!(
            t.config.get_connect_timeout(),
            Some(&std::time::Duration::from_secs(3))
        );
        let t = endpoint("postgresql://me@db.lan/fleet?sslmode=disable").unwrap();
        assert!(t.tls.is_none());
        let e =
            endpoint("postgresql://me@db.lan/fleet?sslmode=verify-full&sslrootcert=/nonexistent")
                .err()
                .unwrap();
        assert!(e.contains("/nonexistent"), "{e}");
        let e = endpoint("postgresql://me@db.lan/fleet?sslmode=sometimes")
            .err()
            .unwrap();
        assert!(e.contains("not one of"), "{e}");
        assert_eq!(percent_decode("%2Ftmp%2Fca.crt"), "/tmp/ca.crt");
    }
}
