//! A TCP stream whose reads publish their receive time on a [`ReceiveClock`].
//!
//! On Linux the stream asks for `SO_TIMESTAMPNS` and reads with `recvmsg` (through `nix`, so
//! no unsafe code here) to get the kernel's receive time of each read's newest segment; where
//! that is unavailable it reads as usual and stamps the read's return. Writes pass through.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::receive_clock::ReceiveClock;

/// The smallest and largest read sizes. `recvmsg` needs an initialised buffer, and hyper hands
/// an uninitialised one to every read, so a read zeroes the part it may fill: the size starts
/// small (a token's event is a few hundred bytes), doubles whenever a read fills it and halves
/// whenever a read uses under a quarter of it, so that small reads zero little.
#[cfg(target_os = "linux")]
const MIN_READ: usize = 2 << 10;
#[cfg(target_os = "linux")]
const MAX_READ: usize = 64 << 10;

/// A [`TcpStream`] that stamps every read on its [`ReceiveClock`].
#[derive(Debug)]
pub struct StampedTcpStream {
    inner: TcpStream,
    clock: ReceiveClock,
    /// Kernel receive times are on (`SO_TIMESTAMPNS` accepted).
    #[cfg(target_os = "linux")]
    kernel: Option<KernelStamps>,
}

#[cfg(target_os = "linux")]
#[derive(Debug)]
struct KernelStamps {
    /// Room for one `SCM_TIMESTAMPNS` control message, reused by every read.
    control: Vec<u8>,
    read_size: usize,
    /// Initialised bytes `recvmsg` reads into before they are copied to the caller's buffer:
    /// the caller's buffer arrives uninitialised each time, and zeroing `read_size` bytes for
    /// every read cost more than copying the few that arrive (no `unsafe` here to read into
    /// uninitialised memory). It grows with `read_size`, once.
    scratch: Vec<u8>,
}

impl StampedTcpStream {
    /// Wraps `inner`, turning kernel receive times on where the platform has them.
    pub fn new(inner: TcpStream) -> Self {
        #[cfg(target_os = "linux")]
        let kernel = {
            use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};
            setsockopt(&inner, ReceiveTimestampns, &true)
                .ok()
                .map(|()| KernelStamps {
                    control: nix::cmsg_space!(nix::sys::time::TimeSpec),
                    read_size: MIN_READ,
                    scratch: Vec::new(),
                })
        };
        StampedTcpStream {
            inner,
            clock: ReceiveClock::new(),
            #[cfg(target_os = "linux")]
            kernel,
        }
    }

    /// The clock this stream's reads stamp.
    pub fn clock(&self) -> &ReceiveClock {
        &self.clock
    }

    /// Whether reads carry the kernel's receive time (else the time each read returned).
    pub fn kernel_stamps(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.kernel.is_some();
        #[cfg(not(target_os = "linux"))]
        return false;
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.inner
    }
}

/// One `recvmsg` into `dst`: the bytes read and the kernel receive time, when given.
#[cfg(target_os = "linux")]
fn recv_stamped(
    fd: std::os::fd::RawFd,
    dst: &mut [u8],
    control: &mut [u8],
) -> io::Result<(usize, Option<Instant>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut iov = [io::IoSliceMut::new(dst)];
    let msg = recvmsg::<()>(fd, &mut iov, Some(control), MsgFlags::MSG_DONTWAIT)?;
    let mut at = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                at = Some(crate::receive_clock::instant_of_realtime(
                    ts.tv_sec(),
                    ts.tv_nsec(),
                ));
            }
        }
    }
    Ok((msg.bytes, at))
}

impl AsyncRead for StampedTcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        #[cfg(target_os = "linux")]
        if let Some(k) = this.kernel.as_mut() {
            use std::os::fd::AsRawFd;
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let fd = this.inner.as_raw_fd();
            loop {
                std::task::ready!(this.inner.poll_read_ready(cx))?;
                let want = buf.remaining().min(k.read_size);
                if k.scratch.len() < want {
                    k.scratch.resize(want, 0);
                }
                let (dst, control) = (&mut k.scratch[..want], &mut k.control);
                // A short read drained the socket: report it to tokio as "would block" so that
                // its readiness is cleared (as tokio's own reads do), and keep what was read.
                // Otherwise the next poll would spend a `recvmsg` to learn it is empty.
                let mut short = None;
                let read = this.inner.try_io(tokio::io::Interest::READABLE, || {
                    let (n, at) = recv_stamped(fd, dst, control)?;
                    if n > 0 && n < want {
                        short = Some((n, at));
                        return Err(io::ErrorKind::WouldBlock.into());
                    }
                    Ok((n, at))
                });
                let read = match (read, short) {
                    (Err(_), Some(got)) => Ok(got),
                    (read, _) => read,
                };
                match read {
                    Ok((n, at)) => {
                        if n > 0 {
                            this.clock.record(at.unwrap_or_else(Instant::now));
                        }
                        if n == want {
                            k.read_size = (k.read_size * 2).min(MAX_READ);
                        } else if n < want / 4 {
                            k.read_size = (k.read_size / 2).max(MIN_READ);
                        }
                        buf.put_slice(&k.scratch[..n]);
                        return Poll::Ready(Ok(()));
                    }
                    // Not ready after all (readiness is cleared), or interrupted: try again.
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) =>
                    {
                        continue
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.clock.record(Instant::now());
        }
        r
    }
}

impl AsyncWrite for StampedTcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn reads_are_stamped_no_later_than_they_are_seen() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (written, second_written) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"first").await.unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            let sent_second = Instant::now();
            s.write_all(b"second").await.unwrap();
            written.send(()).unwrap();
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).await.unwrap();
            (sent_second, rest)
        });
        let mut s = StampedTcpStream::new(TcpStream::connect(addr).await.unwrap());
        if cfg!(target_os = "linux") {
            assert!(s.kernel_stamps());
        }
        assert_eq!(s.clock().latest(), None);
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"first");
        let first = s.clock().latest().unwrap();
        assert!(first <= Instant::now());
        // Let the second write sit in the socket before it is read: the stamp is its arrival,
        // not the read.
        second_written.await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut buf = [0u8; 6];
        s.read_exact(&mut buf).await.unwrap();
        let seen = Instant::now();
        assert_eq!(&buf, b"second");
        s.write_all(b"bye").await.unwrap();
        s.shutdown().await.unwrap();
        let (sent_second, rest) = server.await.unwrap();
        assert_eq!(rest, b"bye");
        let second = s.clock().latest().unwrap();
        assert!(second >= first + Duration::from_millis(25));
        if s.kernel_stamps() {
            // (A millisecond of slack for the wall-clock conversion.)
            assert!(
                second + Duration::from_millis(1) >= sent_second,
                "stamped before it was sent"
            );
            assert!(
                seen - second >= Duration::from_millis(29),
                "the kernel stamp is the arrival, not the read ({:?})",
                seen - second
            );
        }
        // The end of the stream reads zero bytes and leaves the clock alone.
        let mut end = Vec::new();
        s.read_to_end(&mut end).await.unwrap();
        assert!(end.is_empty());
        assert_eq!(s.clock().latest(), Some(second));
    }
}
