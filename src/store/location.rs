//! Where the store is (SQLite or PostgreSQL): `--store`, else `FLOWC_STORE`,
//! else the project's: the nearest folder holding a `flowc.toml` or a
//! `.flowc/`, looked for upwards from the program's folder and then from
//! the working folder (as cargo finds its workspace), whose `[store] url`
//! or else `.flowc/flowc.db` it is. With no project found, a command that
//! stores (`flowc run`, `flowc worker`) makes one in the working folder;
//! the others say there is no store ([`StoreLocation::resolve_existing`]).

use crate::config::{CONFIG_FILE, Config};
use std::path::{Path, PathBuf};

/// Which database a store is in; its `Display` is what messages show, a
/// PostgreSQL URL without its password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host/db`).
    Postgres(String),
}

/// Why no store location could be worked out, or the one named does not
/// exist.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    /// Text that is neither `sqlite:PATH` nor a `postgres://` URL.
    #[error("unknown store `{0}` (use sqlite:PATH or postgres://USER@HOST/DATABASE)")]
    Unknown(String),
    /// A `flowc.toml` whose `[store]` table cannot be read.
    #[error("cannot read the [store] table of {path}: {message}")]
    Config {
        /// The `flowc.toml` read.
        path: String,
        /// What is wrong with its `[store]` table.
        message: String,
    },
    /// A command that only reads found no project holding a store.
    #[error(
        "there is no store {location}: no `flowc.toml` or `.flowc/` holding one was found in {searched} or a folder above it \
         (`flowc run` makes one in the working folder; or pass --store or set FLOWC_STORE)"
    )]
    NotFound {
        /// The store that would have been used.
        location: String,
        /// The folder the search started from.
        searched: String,
    },
    /// The store named by `--store` or `FLOWC_STORE` does not exist, and
    /// the command does not make one.
    #[error("there is no store {location} (a workflow run or `flowc run --session` makes it)")]
    Missing {
        /// The store named.
        location: String,
    },
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
    /// Reads a location as `--store` and `FLOWC_STORE` take it:
    /// `sqlite:PATH`, or a `postgres://` or `postgresql://` URL.
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

    /// [`StoreLocation::resolve`] for a command that reads a store: a
    /// SQLite database that does not exist is [`LocationError::NotFound`],
    /// never created empty.
    pub fn resolve_existing(flag: Option<&str>) -> Result<StoreLocation, LocationError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let env = std::env::var("FLOWC_STORE").ok().filter(|value| !value.trim().is_empty());
        let named = flag.is_some() || env.is_some();
        match existing(resolve_with(flag, env.as_deref(), None, &cwd)?, &cwd) {
            Err(LocationError::NotFound { location, .. }) if named => Err(LocationError::Missing { location }),
            found => found,
        }
    }
}

fn existing(location: StoreLocation, cwd: &Path) -> Result<StoreLocation, LocationError> {
    match &location {
        StoreLocation::Sqlite(path) if !path.exists() => {
            Err(LocationError::NotFound { location: location.to_string(), searched: cwd.display().to_string() })
        }
        _ => Ok(location),
    }
}

/// The nearest folder from `start` upwards holding a `flowc.toml` or a
/// `.flowc/`.
pub fn project_dir(start: &Path) -> Option<PathBuf> {
    start.ancestors().find(|dir| dir.join(CONFIG_FILE).is_file() || dir.join(".flowc").is_dir()).map(Path::to_path_buf)
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
    let program_dir = program.and_then(Path::parent).map(|dir| cwd.join(dir));
    let project = program_dir.as_deref().and_then(project_dir).or_else(|| project_dir(cwd));
    if let Some(dir) = &project
        && dir.join(CONFIG_FILE).is_file()
        && let Some(url) = configured_url(&dir.join(CONFIG_FILE))?
    {
        return StoreLocation::parse(&url);
    }
    let dir = project.unwrap_or_else(|| cwd.to_path_buf());
    Ok(StoreLocation::Sqlite(dir.join(".flowc").join("flowc.db")))
}

/// `url` in the `[store]` table of a `flowc.toml`.
fn configured_url(path: &Path) -> Result<Option<String>, LocationError> {
    let error = |message: String| LocationError::Config { path: path.display().to_string(), message };
    let config = Config::read(path).map_err(|refused| error(refused.detail().to_string()))?;
    let Some(store) = config.table().get("store") else {
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
    fn every_command_finds_the_project_upwards_and_a_reader_never_creates_a_store() {
        let dir = temp_dir("project");
        std::fs::create_dir_all(dir.join("flows")).unwrap();
        let program = dir.join("flows").join("a.flow");
        let nested = dir.join("flows");
        // No project yet: `run` makes one in the working folder, a reader
        // says there is none.
        let made = resolve_with(None, None, Some(&program), &dir).unwrap();
        assert_eq!(made, StoreLocation::Sqlite(dir.join(".flowc/flowc.db")));
        let error = existing(resolve_with(None, None, None, &dir).unwrap(), &dir).unwrap_err().to_string();
        assert!(error.starts_with("there is no store sqlite:"), "{error}");
        // Once `.flowc/` exists, the program's folder and every folder
        // below the project find the same store.
        std::fs::create_dir_all(dir.join(".flowc")).unwrap();
        std::fs::write(dir.join(".flowc/flowc.db"), "").unwrap();
        for cwd in [&dir, &nested] {
            assert_eq!(resolve_with(None, None, Some(&program), cwd).unwrap(), made);
            assert_eq!(existing(resolve_with(None, None, None, cwd).unwrap(), cwd).unwrap(), made);
        }
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
