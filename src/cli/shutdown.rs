//! SIGTERM and SIGINT for the commands that run workflows (`flowc worker`,
//! `flowc run` of a workflow): the first asks for a graceful stop
//! ([`crate::runtime::shutdown`]), the second stops at once, killing the
//! exec tool in flight. The grace period is `--grace`, else `[worker]
//! grace` or `[run] grace` in `flowc.toml`, else 30 s.

use crate::config::Config;
use std::time::Duration;

/// The grace period when neither `--grace` nor `flowc.toml` says.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// The grace period of a command: `--grace`, else `grace` (seconds) in the
/// `table` of the command's `flowc.toml` (`config`: beside the program,
/// else in the working folder): `[worker]` for `flowc worker`, `[run]` for
/// `flowc run` of a workflow; else [`DEFAULT_GRACE`].
pub fn grace(flag: Option<u64>, table: &str, config: &Config) -> Result<Duration, String> {
    if let Some(seconds) = flag {
        return Ok(Duration::from_secs(seconds));
    }
    configured(config.table(), table).map_err(|message| format!("{}: {message}", config.shown()))
}

fn configured(file: &toml::Table, name: &str) -> Result<Duration, String> {
    let Some(table) = file.get(name) else {
        return Ok(DEFAULT_GRACE);
    };
    let Some(table) = table.as_table() else {
        return Err(format!("`{name}` must be a table with `grace = SECONDS`"));
    };
    if let Some(key) = table.keys().find(|key| *key != "grace") {
        return Err(format!("unknown key `{key}` in [{name}] (known: grace)"));
    }
    match table.get("grace") {
        None => Ok(DEFAULT_GRACE),
        Some(value) => value
            .as_integer()
            .and_then(|seconds| u64::try_from(seconds).ok())
            .map(Duration::from_secs)
            .ok_or_else(|| format!("[{name}] grace must be a whole number of seconds, 0 or more")),
    }
}

/// Installs the handlers; a failure to install them is said, not fatal.
pub fn install(grace: Duration) {
    if let Err(error) = on_signal(move |count| {
        if count == 1 {
            eprintln!(
                "flowc: stopping after the step in flight (at most {} s); a second signal stops at once",
                grace.as_secs_f64()
            );
            crate::runtime::shutdown::request(grace);
        } else {
            crate::runtime::tools::kill_running_tools();
            eprintln!("flowc: stopped at once; the run in flight is left to the next worker once its claim expires");
            std::process::exit(130);
        }
    }) {
        eprintln!("warning: cannot handle SIGTERM and SIGINT ({error}); a signal stops flowc at once");
    }
}

#[cfg(unix)]
fn on_signal(handler: impl Fn(u32) + Send + 'static) -> std::io::Result<()> {
    // A thread reads the signals from a self-pipe, so that the handler
    // itself only writes one byte (async-signal-safe).
    use std::io::Read;
    use std::os::fd::FromRawFd;
    use std::sync::atomic::{AtomicI32, Ordering};
    static WRITE_END: AtomicI32 = AtomicI32::new(-1);
    extern "C" fn handle(_: libc::c_int) {
        let fd = WRITE_END.load(Ordering::Relaxed);
        if fd >= 0 {
            let byte = 1u8;
            // SAFETY: write(2) is async-signal-safe; the buffer is a valid byte.
            unsafe {
                libc::write(fd, (&raw const byte).cast(), 1);
            }
        }
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    WRITE_END.store(fds[1], Ordering::Relaxed);
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `handle` has the signature signal(2) expects.
        unsafe {
            libc::signal(signal, handle as *const () as libc::sighandler_t);
        }
    }
    // SAFETY: fds[0] is the pipe's read end, owned by this File from now on.
    let mut read_end = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let mut count = 0u32;
        while read_end.read_exact(&mut byte).is_ok() {
            count = count.saturating_add(1);
            handler(count);
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn on_signal(_handler: impl Fn(u32) + Send + 'static) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_period_is_read_from_its_table() {
        let configured = |text: &str, name: &str| configured(&text.parse::<toml::Table>().unwrap(), name);
        assert_eq!(configured("", "worker"), Ok(DEFAULT_GRACE));
        assert_eq!(configured("[worker]\ngrace = 5\n", "worker"), Ok(Duration::from_secs(5)));
        assert_eq!(configured("[worker]\ngrace = 5\n", "run"), Ok(DEFAULT_GRACE));
        assert_eq!(configured("[run]\ngrace = 0\n", "run"), Ok(Duration::ZERO));
        assert_eq!(
            configured("[run]\ngrace = -1\n", "run").unwrap_err(),
            "[run] grace must be a whole number of seconds, 0 or more"
        );
        assert_eq!(configured("[run]\ngrce = 1\n", "run").unwrap_err(), "unknown key `grce` in [run] (known: grace)");
        assert_eq!(configured("run = 3\n", "run").unwrap_err(), "`run` must be a table with `grace = SECONDS`");
    }
}
