//! Ports for local servers: a free one to run on, and a host as a URL writes it.

use std::path::PathBuf;

use crate::Error;

/// A port nobody listens on now (the OS picks it; a server may still lose it to another
/// process before it binds: [`LocalSpec::launch`](crate::LocalSpec::launch)
/// then tries another).
pub(crate) fn free_port(host: &str) -> Result<u16, Error> {
    let l = std::net::TcpListener::bind((host, 0)).map_err(|source| Error::Io {
        path: PathBuf::from(format!("{host}:0")),
        source,
    })?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|source| Error::Io {
            path: PathBuf::from(format!("{host}:0")),
            source,
        })
}

/// `host` as a URL writes it (an IPv6 address in brackets).
pub(crate) fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}
