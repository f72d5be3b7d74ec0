//! The one loop every live mode runs, one target or a fleet: drain the ring buffer (on wake-up,
//! and on a short timer since the kernel wakes the agent only when a quarter of the ring is
//! full), close a window every interval, and stop on a stop signal, the duration, or what the
//! mode itself waits on. What a drained event and a closed window go to is the mode's (its
//! sessions, their steering and sinks), never the loop's.
use std::{future::Future, os::fd::OwnedFd, time::Duration};

use anyhow::Result;
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{SignalKind, signal},
};

use crate::wait::{stop_signals, unblock};

/// How often the ring buffer is drained when the kernel does not wake the agent.
const DRAIN_PERIOD: Duration = Duration::from_millis(100);

/// A mode the loop drives: single-target observe, advise, act and record, or fleet mode.
pub trait Driven {
    /// What the mode's own sources deliver (a single target's exit and actuator, fleet mode's
    /// execs and scans).
    type Event;
    /// Why the mode stops on its own.
    type Stop;
    /// The mode's next event. Cancel-safe: the loop drops it whenever something else is ready.
    fn next(&mut self) -> impl Future<Output = Self::Event>;
    /// Handles one of the mode's events; `Some` stops the loop.
    fn on_event(&mut self, event: Self::Event) -> Result<Option<Self::Stop>>;
    /// Hands what the kernel produced to the sessions.
    fn drain(&mut self) -> Result<()>;
    /// A window closes.
    fn window(&mut self) -> Result<()>;
}

/// Why the loop stopped.
pub enum Stopped<S> {
    Duration,
    Signal(&'static str),
    Mode(S),
    /// The agent itself failed (reading the ring, writing its output): the mode still ends in
    /// order.
    Failed(anyhow::Error),
}

/// Runs `mode` until it stops. `ring`: the ring buffer's fd, for readiness only (the map stays
/// with the mode, which drains it). SIGINT, SIGTERM and SIGHUP are unblocked here, once their
/// handlers are in place.
pub async fn drive<D: Driven>(
    mode: &mut D,
    ring: &AsyncFd<OwnedFd>,
    interval: Duration,
    duration: Option<Duration>,
) -> Stopped<D::Stop> {
    match run(mode, ring, interval, duration).await {
        Ok(stopped) => stopped,
        Err(err) => Stopped::Failed(err),
    }
}

async fn run<D: Driven>(
    mode: &mut D,
    ring: &AsyncFd<OwnedFd>,
    interval: Duration,
    duration: Option<Duration>,
) -> Result<Stopped<D::Stop>> {
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    unblock(&stop_signals())?;
    let mut drain_timer = tokio::time::interval(DRAIN_PERIOD);
    let mut window = tokio::time::interval(interval);
    window.tick().await;
    let deadline = tokio::time::sleep(duration.unwrap_or(Duration::from_secs(u64::MAX / 4)));
    tokio::pin!(deadline);
    loop {
        let stop = tokio::select! {
            guard = ring.readable() => {
                let mut guard = guard?;
                let drained = mode.drain();
                guard.clear_ready();
                drained.map(|()| None)
            }
            _ = drain_timer.tick() => mode.drain().map(|()| None),
            _ = window.tick() => mode.window().map(|()| None),
            event = mode.next() => mode.on_event(event).map(|s| s.map(Stopped::Mode)),
            _ = sigint.recv() => Ok(Some(Stopped::Signal("SIGINT"))),
            _ = sigterm.recv() => Ok(Some(Stopped::Signal("SIGTERM"))),
            _ = sighup.recv() => Ok(Some(Stopped::Signal("SIGHUP"))),
            _ = &mut deadline, if duration.is_some() => Ok(Some(Stopped::Duration)),
        };
        if let Some(stopped) = stop? {
            return Ok(stopped);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use nix::{fcntl::OFlag, unistd};

    use super::*;
    use crate::wait::readable;

    /// A mode whose ring is a pipe: it stops once it has drained `stop_after` bytes, or fails at
    /// its first window when told to.
    struct Piped {
        pipe: OwnedFd,
        drained: usize,
        stop_after: usize,
        windows: u32,
        fail_window: bool,
    }

    impl Driven for Piped {
        type Event = ();
        type Stop = (usize, u32);

        async fn next(&mut self) {
            if self.drained < self.stop_after {
                std::future::pending::<()>().await;
            }
        }

        fn on_event(&mut self, (): ()) -> Result<Option<(usize, u32)>> {
            Ok(Some((self.drained, self.windows)))
        }

        fn drain(&mut self) -> Result<()> {
            let mut buf = [0u8; 64];
            while let Ok(n @ 1..) = unistd::read(self.pipe.as_fd(), &mut buf) {
                self.drained += n;
            }
            Ok(())
        }

        fn window(&mut self) -> Result<()> {
            self.windows += 1;
            anyhow::ensure!(!self.fail_window, "the window's sink failed");
            Ok(())
        }
    }

    fn run_piped(
        written: &[u8],
        stop_after: usize,
        fail_window: bool,
        duration: Option<Duration>,
    ) -> Stopped<(usize, u32)> {
        let (read, write) = unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).unwrap();
        unistd::write(&write, written).unwrap();
        let mut mode =
            Piped { pipe: read.try_clone().unwrap(), drained: 0, stop_after, windows: 0, fail_window };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let ring = readable(read).unwrap();
            let interval = if fail_window { Duration::from_millis(20) } else { Duration::from_secs(3600) };
            drive(&mut mode, &ring, interval, duration).await
        })
    }

    #[test]
    fn what_the_ring_holds_reaches_the_mode_and_the_mode_can_stop_the_loop() {
        match run_piped(b"abc", 3, false, None) {
            Stopped::Mode((drained, windows)) => assert_eq!((drained, windows), (3, 0)),
            _ => panic!("the loop did not stop on the mode's own event"),
        }
    }

    #[test]
    fn a_failing_window_ends_the_loop_as_the_agents_failure() {
        match run_piped(b"", 1, true, None) {
            Stopped::Failed(err) => assert_eq!(err.to_string(), "the window's sink failed"),
            _ => panic!("a failing window did not end the loop"),
        }
    }

    #[test]
    fn the_duration_ends_the_loop() {
        assert!(matches!(run_piped(b"", 1, false, Some(Duration::from_millis(50))), Stopped::Duration));
    }
}
