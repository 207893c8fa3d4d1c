//! Free TCP ports on 127.0.0.1 that parallel tests can never both pick.
//!
//! Binding port 0 and releasing it is racy: two test processes can be handed
//! the same port between release and etcd's own bind. Instead a port is
//! *leased*: an exclusive `flock` on `/tmp/warden-harness-ports/<port>.lock`,
//! held as long as the lease lives (the kernel drops it if the test process
//! dies, so leases never leak), plus a bind check that nothing else uses it.
//! Ports come from 20000–29999, below the kernel's ephemeral range
//! (32768–60999), so outgoing connections never take them either.

use std::fs::{self, File, OpenOptions};
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU16, Ordering};

use anyhow::{Result, bail};
use nix::fcntl::{Flock, FlockArg};

const FIRST: u16 = 20000;
const COUNT: u16 = 10000;
const LOCK_DIR: &str = "/tmp/warden-harness-ports";

/// A TCP port on 127.0.0.1 reserved for this process until dropped.
#[derive(Debug)]
pub struct PortLease {
    port: u16,
    _lock: Flock<File>,
}

impl PortLease {
    /// The leased port number.
    pub fn port(&self) -> u16 {
        self.port
    }
}

// Where the next search starts: spread by PID so parallel processes rarely
// contend for the same lock files.
static NEXT: AtomicU16 = AtomicU16::new(0);

/// Leases one free port.
pub fn lease() -> Result<PortLease> {
    fs::create_dir_all(LOCK_DIR)?;
    let seed = (std::process::id() % u32::from(COUNT)) as u16;
    for _ in 0..COUNT {
        let off = NEXT.fetch_add(1, Ordering::Relaxed).wrapping_add(seed) % COUNT;
        let port = FIRST + off;
        let path: PathBuf = [LOCK_DIR, &format!("{port}.lock")].iter().collect();
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(&path)?;
        let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue;
        };
        // Someone outside the harness may be using it.
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err() {
            continue;
        }
        return Ok(PortLease { port, _lock: lock });
    }
    bail!("no free port in {FIRST}..{} on 127.0.0.1", FIRST + COUNT)
}

/// Leases `n` free ports.
pub fn lease_many(n: usize) -> Result<Vec<PortLease>> {
    (0..n).map(|_| lease()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_distinct_and_bindable() {
        let a = lease_many(4).unwrap();
        let mut ports: Vec<u16> = a.iter().map(PortLease::port).collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 4);
        for p in ports {
            TcpListener::bind((Ipv4Addr::LOCALHOST, p)).unwrap();
        }
    }
}
