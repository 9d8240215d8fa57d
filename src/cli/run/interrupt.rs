//! Ctrl-C during a conversation: the signal handler that cancels the
//! running turn's model call, and quits on a second Ctrl-C.

/// In the REPL, Ctrl-C while a turn runs cancels its model call (the turn
/// fails cleanly and the session is unchanged); a second Ctrl-C before the
/// turn ends quits. At the prompt, rustyline reads Ctrl-C as a key.
pub(super) fn install_interrupt(cancel: &crate::llm::CancelFlag) {
    let cancel = cancel.clone();
    let _ = ctrlc_handler(move || {
        if cancel.is_cancelled() {
            std::process::exit(130);
        }
        cancel.cancel();
    });
}

#[cfg(unix)]
fn ctrlc_handler(on_interrupt: impl Fn() + Send + 'static) -> std::io::Result<()> {
    // A thread waits for SIGINT through a self-pipe so that the handler
    // itself only writes one byte (async-signal-safe).
    use std::io::Read;
    use std::os::fd::FromRawFd;
    static WRITE_END: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
    extern "C" fn handle(_: libc::c_int) {
        let fd = WRITE_END.load(std::sync::atomic::Ordering::Relaxed);
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
    WRITE_END.store(fds[1], std::sync::atomic::Ordering::Relaxed);
    // SAFETY: `handle` has the signature signal(2) expects.
    unsafe {
        libc::signal(libc::SIGINT, handle as *const () as libc::sighandler_t);
    }
    // SAFETY: fds[0] is the pipe's read end, owned by this File from now on.
    let mut read_end = unsafe { std::fs::File::from_raw_fd(fds[0]) };
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while read_end.read_exact(&mut byte).is_ok() {
            on_interrupt();
        }
    });
    Ok(())
}

#[cfg(not(unix))]
fn ctrlc_handler(_on_interrupt: impl Fn() + Send + 'static) -> std::io::Result<()> {
    Ok(())
}
