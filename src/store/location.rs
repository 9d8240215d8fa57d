//! Where the store is (SQLite or PostgreSQL): `--store`, else `FLOWC_STORE`, else `[store] url` in
//! `flowc.toml`, else `.flowc/flowc.db` beside the program (or in the
//! working directory for commands that name no program).

use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host/db`).
    Postgres(String),
}

#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[error("unknown store `{0}` (use sqlite:PATH or postgres://USER@HOST/DATABASE)")]
    Unknown(String),
    #[error("cannot read the [store] table of {path}: {message}")]
    Config { path: String, message: String },
}

impl std::fmt::Display for StoreLocation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Sqlite(path) => write!(formatter, "sqlite:{}", path.display()),
            StoreLocation::Postgres(url) => write!(formatter, "{}", super::postgres::redact(url)),
        }
    }
}

impl StoreLocation {
    pub fn parse(text: &str) -> Result<StoreLocation, LocationError> {
        let text = text.trim();
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(text.to_string()));
        }
        match text.strip_prefix("sqlite:") {
            Some(path) if !path.is_empty() => Ok(StoreLocation::Sqlite(PathBuf::from(path))),
            // A mistyped scheme may still carry a password: it is not shown.
            _ => Err(LocationError::Unknown(super::postgres::redact(text))),
        }
    }

    /// The store this process uses; `program` is the program file, if the
    /// command has one.
    pub fn resolve(flag: Option<&str>, program: Option<&Path>) -> Result<StoreLocation, LocationError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let env = std::env::var("FLOWC_STORE").ok().filter(|value| !value.trim().is_empty());
        resolve_with(flag, env.as_deref(), program, &cwd)
    }
}

/// [`StoreLocation::resolve`] with the environment and working directory
/// given, for tests.
fn resolve_with(
    flag: Option<&str>,
    env: Option<&str>,
    program: Option<&Path>,
    cwd: &Path,
) -> Result<StoreLocation, LocationError> {
    if let Some(text) = flag.or(env) {
        return StoreLocation::parse(text);
    }
    if let Some(path) = crate::llm::config::config_file(program, cwd)
        && let Some(url) = configured_url(&path)?
    {
        return StoreLocation::parse(&url);
    }
    let dir = program
        .and_then(Path::parent)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map_or_else(|| cwd.to_path_buf(), Path::to_path_buf);
    Ok(StoreLocation::Sqlite(dir.join(".flowc").join("flowc.db")))
}

/// `url` in the `[store]` table of a `flowc.toml`.
fn configured_url(path: &Path) -> Result<Option<String>, LocationError> {
    let error = |message: String| LocationError::Config { path: path.display().to_string(), message };
    let text = std::fs::read_to_string(path).map_err(|read| error(read.to_string()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|parse| error(parse.message().to_string()))?;
    let Some(store) = table.get("store") else {
        return Ok(None);
    };
    let Some(store) = store.as_table() else {
        return Err(error("`store` must be a table with `url = \"sqlite:PATH\"`".to_string()));
    };
    for key in store.keys() {
        if key != "url" {
            return Err(error(format!("unknown key `{key}` in [store] (known: url)")));
        }
    }
    match store.get("url") {
        None => Ok(None),
        Some(url) => url
            .as_str()
            .map(|url| Some(url.to_string()))
            .ok_or_else(|| error("[store] url must be a string like \"sqlite:.flowc/flowc.db\"".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("flowc-location-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_flag_wins_over_the_environment_which_wins_over_the_file() {
        let dir = temp_dir("order");
        std::fs::write(dir.join("flowc.toml"), "[store]\nurl = \"sqlite:from-file.db\"\n").unwrap();
        let program = dir.join("a.flow");
        let resolve = |flag, env| resolve_with(flag, env, Some(&program), &dir).unwrap();
        assert_eq!(resolve(Some("sqlite:flag.db"), Some("sqlite:env.db")), StoreLocation::Sqlite("flag.db".into()));
        assert_eq!(resolve(None, Some("sqlite:env.db")), StoreLocation::Sqlite("env.db".into()));
        assert_eq!(resolve(None, None), StoreLocation::Sqlite("from-file.db".into()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_default_is_beside_the_program_or_in_the_working_directory() {
        let dir = temp_dir("default");
        let program = dir.join("flows").join("a.flow");
        assert_eq!(
            resolve_with(None, None, Some(&program), &dir).unwrap(),
            StoreLocation::Sqlite(dir.join("flows/.flowc/flowc.db"))
        );
        assert_eq!(resolve_with(None, None, None, &dir).unwrap(), StoreLocation::Sqlite(dir.join(".flowc/flowc.db")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unknown_store_or_a_bad_store_table_is_an_error() {
        assert!(matches!(StoreLocation::parse("mysql://x"), Err(LocationError::Unknown(_))));
        let typo = StoreLocation::parse("postgress://ann:s3cret@db/flowc").map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            typo,
            "unknown store `postgress://ann:***@db/flowc` (use sqlite:PATH or postgres://USER@HOST/DATABASE)"
        );
        assert!(matches!(StoreLocation::parse("sqlite:"), Err(LocationError::Unknown(_))));
        assert_eq!(
            StoreLocation::parse("postgres://u:p@h/db").unwrap().to_string(),
            "postgres://u:***@h/db",
            "a password is never shown"
        );
        let dir = temp_dir("bad-table");
        std::fs::write(dir.join("flowc.toml"), "[store]\npath = \"x\"\n").unwrap();
        assert!(matches!(resolve_with(None, None, None, &dir), Err(LocationError::Config { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
