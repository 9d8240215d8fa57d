//! `flowc.toml`, found and parsed once: the CLI loads the [`Config`] of a
//! command and hands its tables to the modules that own them (the provider
//! settings at the top level to `llm::config`, `[limits]` to
//! `runtime::limits_config`, `[input]` to the CLI, `[serve.tokens]` to
//! `serve::auth`). Each owner checks its own keys and words its own errors;
//! this module only says which file applies, and refuses a file that cannot
//! be read or is not TOML, naming the file.
//!
//! The file is read beside the program first, else in the working
//! directory (the first one found is used, they are not merged). The store
//! looks for its project upwards instead (`store::location`, as cargo finds
//! its workspace), and reads the `flowc.toml` it finds there through
//! [`Config::read`].
#![warn(missing_docs)]

use std::path::{Path, PathBuf};

/// The configuration file's name.
pub const CONFIG_FILE: &str = "flowc.toml";

/// A parsed `flowc.toml`, or none (every table empty) when no file applies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    path: Option<PathBuf>,
    table: toml::Table,
}

/// Why a `flowc.toml` could not be used at all; each message starts with
/// the file (or says it) and then gives the system's or TOML parser's words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file, as shown.
        path: String,
        /// Why, in the system's words.
        message: String,
    },
    /// The file is not TOML.
    #[error("{path}: {message}")]
    Parse {
        /// The file, as shown.
        path: String,
        /// The TOML parser's message.
        message: String,
    },
}

impl ConfigError {
    /// What is wrong, without the file's name (for a caller that names the
    /// file in its own words).
    pub fn detail(&self) -> &str {
        match self {
            ConfigError::Read { message, .. } | ConfigError::Parse { message, .. } => message,
        }
    }
}

impl Config {
    /// The `flowc.toml` of a command: beside `program` (a file or a
    /// directory), else in the working directory; none when neither exists.
    pub fn load(program: Option<&Path>) -> Result<Config, ConfigError> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Config::load_from(program, &cwd)
    }

    /// [`Config::load`] with the working directory given.
    pub fn load_from(program: Option<&Path>, cwd: &Path) -> Result<Config, ConfigError> {
        match config_file(program, cwd) {
            Some(path) => Config::read(&path),
            None => Ok(Config::default()),
        }
    }

    /// The file at `path`, which must exist.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::Read { path: path.display().to_string(), message: error.to_string() })?;
        Config::parse(path, &text)
    }

    /// The text of a `flowc.toml` said to be at `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|error: toml::de::Error| ConfigError::Parse {
            path: path.display().to_string(),
            message: error.message().to_string(),
        })?;
        Ok(Config { path: Some(path.to_path_buf()), table })
    }

    /// The file read, if one applied.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The file as errors name it (empty when there is none: no key can be
    /// wrong then).
    pub fn shown(&self) -> String {
        self.path.as_deref().map(|path| path.display().to_string()).unwrap_or_default()
    }

    /// The whole file: top-level keys and tables.
    pub fn table(&self) -> &toml::Table {
        &self.table
    }
}

/// The `flowc.toml` that applies: beside `program`, else in `cwd`.
pub fn config_file(program: Option<&Path>, cwd: &Path) -> Option<PathBuf> {
    let beside_program = program.and_then(|path| {
        let dir = if path.is_dir() { Some(path) } else { path.parent() };
        dir.map(|dir| if dir.as_os_str().is_empty() { cwd.join(CONFIG_FILE) } else { dir.join(CONFIG_FILE) })
    });
    let candidates = beside_program.into_iter().chain(std::iter::once(cwd.join(CONFIG_FILE)));
    candidates.into_iter().find(|path| path.is_file())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("flowc-config-file-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(path.join("app")).unwrap();
            Dir(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_file_beside_the_program_wins_over_the_working_directory() {
        let dir = Dir::new("beside");
        let program = dir.0.join("app/booking.flow");
        assert_eq!(Config::load_from(Some(&program), &dir.0).unwrap(), Config::default(), "no file: no config");
        std::fs::write(dir.0.join(CONFIG_FILE), "model = \"cwd\"\n").unwrap();
        let config = Config::load_from(Some(&program), &dir.0).unwrap();
        assert_eq!(config.path(), Some(dir.0.join(CONFIG_FILE).as_path()));
        std::fs::write(dir.0.join("app").join(CONFIG_FILE), "model = \"beside\"\n[limits]\n").unwrap();
        let config = Config::load_from(Some(&program), &dir.0).unwrap();
        assert_eq!(config.table().get("model").and_then(toml::Value::as_str), Some("beside"));
        assert!(config.table().get("limits").is_some_and(toml::Value::is_table));
        let config = Config::load_from(None, &dir.0).unwrap();
        assert_eq!(config.table().get("model").and_then(toml::Value::as_str), Some("cwd"));
    }

    #[test]
    fn a_file_that_is_not_toml_is_refused_naming_it() {
        let error = Config::parse(Path::new("here/flowc.toml"), "model = \n").unwrap_err();
        let shown = error.to_string();
        assert!(shown.starts_with("here/flowc.toml: "), "{shown}");
        assert_eq!(shown, format!("here/flowc.toml: {}", error.detail()));
    }
}
