//! Who is asking: bearer tokens, each one a tenant, and the ids that keep
//! each tenant's sessions and runs its own. With no token configured every
//! request is the one tenant `open`, and the server binds only loopback
//! addresses unless told `--insecure-open`.

use super::AppState;
use super::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use std::net::SocketAddr;
use std::sync::Arc;

/// The tenant of a server without tokens.
pub(crate) const OPEN_TENANT: &str = "open";

/// The configured tokens, by tenant.
#[derive(Clone, Debug, Default)]
pub struct Auth {
    tokens: Vec<(String, String)>,
}

/// The tenant a request acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tenant(pub(crate) String);

impl Auth {
    /// Tokens as `(tenant, token)` pairs. A tenant name is letters, digits
    /// and `-` (it starts every id the tenant creates); a token is at least
    /// 16 characters and belongs to one tenant.
    pub fn new(pairs: Vec<(String, String)>) -> Result<Auth, String> {
        for (index, (tenant, token)) in pairs.iter().enumerate() {
            let valid = !tenant.is_empty()
                && tenant.len() <= 32
                && tenant.chars().all(|character| character.is_ascii_alphanumeric() || character == '-');
            if !valid {
                return Err(format!(
                    "tenant name `{tenant}`: use letters, digits and `-`, at most 32 (it starts the ids of its sessions)"
                ));
            }
            if token.chars().count() < 16 {
                return Err(format!("the token of tenant `{tenant}` is shorter than 16 characters"));
            }
            if pairs.iter().skip(index + 1).any(|(_, other)| other == token) {
                return Err(format!("the token of tenant `{tenant}` is given to another tenant too"));
            }
        }
        Ok(Auth { tokens: pairs })
    }

    /// True when no tokens are set: every caller is the one open tenant.
    pub(crate) fn is_open(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The tenant an `Authorization` header names, or 401.
    pub(crate) fn tenant(&self, header: Option<&str>) -> Result<Tenant, ApiError> {
        if self.is_open() {
            return Ok(Tenant(OPEN_TENANT.to_string()));
        }
        let unauthorized = |message: &str| ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message);
        let Some(header) = header else {
            return Err(unauthorized("this server needs `Authorization: Bearer TOKEN`"));
        };
        let Some(given) = header.strip_prefix("Bearer ").map(str::trim) else {
            return Err(unauthorized("the Authorization header must be `Bearer TOKEN`"));
        };
        // Every token is compared in full, so the time taken says nothing
        // about how much of a guess was right.
        let mut found = None;
        for (tenant, token) in &self.tokens {
            if same(given.as_bytes(), token.as_bytes()) {
                found = Some(tenant);
            }
        }
        found.map(|tenant| Tenant(tenant.clone())).ok_or_else(|| unauthorized("the token is not one this server knows"))
    }
}

fn same(left: &[u8], right: &[u8]) -> bool {
    let mut difference = left.len() ^ right.len();
    for (index, byte) in left.iter().enumerate() {
        let other = right.get(index % right.len().max(1)).copied().unwrap_or(0);
        difference |= usize::from(byte ^ other);
    }
    difference == 0
}

/// Parses `TENANT=TOKEN` (the `--token` flag and `FLOWC_SERVE_TOKENS`,
/// comma-separated there).
pub(crate) fn parse_pair(text: &str) -> Result<(String, String), String> {
    let (tenant, token) = text.split_once('=').ok_or_else(|| format!("`{}` is not TENANT=TOKEN", redact(text)))?;
    Ok((tenant.trim().to_string(), token.trim().to_string()))
}

/// The `[serve.tokens]` table of a parsed `flowc.toml` (tenant = "token").
pub(crate) fn tokens_from_table(value: &toml::Table) -> Result<Vec<(String, String)>, String> {
    let Some(serve) = value.get("serve") else {
        return Ok(Vec::new());
    };
    let Some(serve) = serve.as_table() else {
        return Err("[serve] must be a table".to_string());
    };
    // Its other keys are the caps': `Caps::from_table` reads them and
    // refuses a key neither reads (`serve::caps` knows this one).
    let Some(tokens) = serve.get("tokens") else {
        return Ok(Vec::new());
    };
    let Some(tokens) = tokens.as_table() else {
        return Err("[serve.tokens] must be a table of tenant = \"token\"".to_string());
    };
    tokens
        .iter()
        .map(|(tenant, token)| match token.as_str() {
            Some(token) => Ok((tenant.clone(), token.to_string())),
            None => Err(format!("[serve.tokens] `{tenant}` must be a string")),
        })
        .collect()
}

fn redact(text: &str) -> String {
    text.chars().take(4).chain("…".chars()).collect()
}

/// Refuses a non-loopback address for a server without tokens, unless
/// the operator said `--insecure-open`.
pub(crate) fn check_bind(addr: SocketAddr, auth: &Auth, insecure_open: bool) -> Result<(), String> {
    if auth.is_open() && !addr.ip().is_loopback() && !insecure_open {
        return Err(format!(
            "no token is configured, so anyone who reaches {addr} could use every session: \
             configure tokens ([serve.tokens] in flowc.toml, --token or FLOWC_SERVE_TOKENS), \
             bind a loopback address, or pass --insecure-open"
        ));
    }
    Ok(())
}

impl FromRequestParts<Arc<AppState>> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Tenant, ApiError> {
        let header = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|value| value.to_str().ok());
        state.auth.tenant(header)
    }
}

/// A new id for something `tenant` creates with `program`:
/// `TENANT_PROGRAM_UUID`. The tenant comes first and has no `_`, so the
/// id says whose it is without a lookup; the program is in it so that a
/// listing by program reads ids only.
pub(crate) fn new_id(tenant: &Tenant, program: &str, unique: &str) -> String {
    format!("{}_{program}_{unique}", tenant.0)
}

/// The program an id of `tenant` names, or `None` when the id is another
/// tenant's (or not one the server made).
pub(crate) fn owned_program<'a>(tenant: &Tenant, id: &'a str) -> Option<&'a str> {
    let rest = id.strip_prefix(tenant.0.as_str())?.strip_prefix('_')?;
    let (program, _) = rest.rsplit_once('_')?;
    (!program.is_empty()).then_some(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth::new(vec![
            ("acme".into(), "acme-secret-0123456789".into()),
            ("globex".into(), "globex-secret-0123456789".into()),
        ])
        .unwrap()
    }

    #[test]
    fn a_token_names_its_tenant_and_a_wrong_one_is_401() {
        assert_eq!(auth().tenant(Some("Bearer globex-secret-0123456789")), Ok(Tenant("globex".into())));
        for header in
            [None, Some("Bearer nope"), Some("Basic acme-secret-0123456789"), Some("Bearer acme-secret-01234567890")]
        {
            assert_eq!(
                auth().tenant(header).map_err(|error| error.status),
                Err(StatusCode::UNAUTHORIZED),
                "{header:?}"
            );
        }
        assert_eq!(Auth::default().tenant(None), Ok(Tenant(OPEN_TENANT.into())));
    }

    #[test]
    fn ids_belong_to_the_tenant_that_made_them() {
        let acme = Tenant("acme".into());
        let id = new_id(&acme, "step_by_step", "6c1f-4a");
        assert_eq!(owned_program(&acme, &id), Some("step_by_step"));
        assert_eq!(owned_program(&Tenant("acm".into()), &id), None);
        assert_eq!(owned_program(&Tenant("globex".into()), &id), None);
        assert_eq!(owned_program(&acme, "acme_"), None);
    }

    #[test]
    fn bad_tenants_and_short_or_shared_tokens_are_refused() {
        assert!(Auth::new(vec![("a_b".into(), "x".repeat(16))]).is_err());
        assert!(Auth::new(vec![("a".into(), "short".into())]).is_err());
        assert!(Auth::new(vec![("a".into(), "x".repeat(16)), ("b".into(), "x".repeat(16))]).is_err());
    }

    #[test]
    fn an_open_server_binds_loopback_only_unless_told() {
        let public: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(check_bind(public, &Auth::default(), false).is_err());
        assert!(check_bind(public, &Auth::default(), true).is_ok());
        assert!(check_bind(local, &Auth::default(), false).is_ok());
        assert!(check_bind(public, &auth(), false).is_ok());
    }

    #[test]
    fn tokens_read_from_flowc_toml() {
        let tokens_from_toml = |text: &str| tokens_from_table(&text.parse().unwrap());
        let pairs = tokens_from_toml("[serve.tokens]\nacme = \"acme-secret-0123456789\"\n").unwrap();
        assert_eq!(pairs, vec![("acme".to_string(), "acme-secret-0123456789".to_string())]);
        assert_eq!(tokens_from_toml("[limits]\nmax_steps = 3\n"), Ok(Vec::new()));
        assert_eq!(tokens_from_toml("[serve]\nmax_requests = 8\n"), Ok(Vec::new()));
    }
}
