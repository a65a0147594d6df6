//! A connection's reply side. Replies are sent by whoever finished their requests, with no
//! thread to wake in the common case: a completion queues its reply and defers a flush to the
//! end of the worker's batch of completions (`uraid_runtime::after_completions`), and the
//! flush sends every queued reply in one vectored send that never blocks. Only when the
//! socket is full (a slow or stalled client) does the rest go to this connection's backlog
//! thread, which waits on the socket so that no worker ever does; until it has sent all,
//! replies only queue for it. `uraid bench serve` measured the old way (every reply handed to
//! a writer thread) at about a tenth of a worker's CPU in futex wakes on 4 KiB writes, plus
//! the writer thread's own.
//!
//! Invariants: one sender at a time (`Sender::Sending`), so batches never interleave on the wire;
//! every queued reply is sent or, once the socket broke, discarded, and either way its window
//! charge and buffers are given back (`finish`); nothing stays queued while nobody sends.

use crate::pool::BufferPool;
use crate::reply::{Batch, Body, Reply};
use crate::server::Shared;
use crate::socket::Socket;
use crate::stats::bump;
use crate::window::Window;
use std::net::Shutdown;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

pub(crate) struct Output {
    socket: Socket,
    structured: bool,
    window: Arc<Window>,
    pool: Arc<BufferPool>,
    shared: Arc<Shared>,
    state: Mutex<State>,
    /// Wakes the backlog thread (a backlog to send, or the connection closing).
    backlog_ready: Condvar,
}

/// Who sends what is queued.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Sender {
    /// Nobody: the next reply queued schedules a flush.
    #[default]
    Idle,
    /// A flush is deferred to the end of some batch of completions.
    Scheduled,
    /// A flush, or the backlog thread, is sending; what is queued meanwhile it sends before
    /// it stops.
    Sending,
}

#[derive(Default)]
struct State {
    /// Answered, not yet on the wire.
    queue: Vec<Reply>,
    sender: Sender,
    /// What a flush could not send without waiting, for the backlog thread.
    backlog: Option<Batch>,
    /// A send failed: the client is gone, replies are discarded.
    broken: bool,
    closing: bool,
}

impl Output {
    pub fn new(
        socket: Socket,
        structured: bool,
        window: Arc<Window>,
        pool: Arc<BufferPool>,
        shared: Arc<Shared>,
    ) -> Output {
        Output {
            socket,
            structured,
            window,
            pool,
            shared,
            state: Mutex::default(),
            backlog_ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `reply`; it goes out at the end of this thread's batch of completions (at once
    /// outside one), or with whatever is being sent now.
    pub fn push(self: &Arc<Self>, reply: Reply) {
        let mut s = self.lock();
        s.queue.push(reply);
        if s.sender != Sender::Idle {
            return;
        }
        s.sender = Sender::Scheduled;
        drop(s);
        let me = self.clone();
        uraid_runtime::after_completions(move || me.flush());
    }

    /// Sends what is queued, without waiting on the socket; hands what the socket would not
    /// take to the backlog thread.
    fn flush(&self) {
        let mut s = self.lock();
        if s.sender != Sender::Scheduled {
            return;
        }
        if s.broken {
            s.sender = Sender::Idle;
            let replies = std::mem::take(&mut s.queue);
            drop(s);
            return self.finish(replies);
        }
        s.sender = Sender::Sending;
        loop {
            let mut batch = Batch::new(std::mem::take(&mut s.queue), self.structured);
            drop(s);
            match batch.send(&self.socket, false) {
                Ok(true) => self.finish(batch.into_replies()),
                Ok(false) => {
                    let mut s = self.lock();
                    s.backlog = Some(batch);
                    self.backlog_ready.notify_one();
                    return;
                }
                Err(_) => return self.break_down(batch),
            }
            s = self.lock();
            if s.queue.is_empty() {
                s.sender = Sender::Idle;
                return;
            }
        }
    }

    /// The backlog thread: sends, waiting on the socket, what flushes could not, and what
    /// queues meanwhile; returns once the connection closes.
    pub fn send_backlog(&self) {
        loop {
            let mut s = self.lock();
            let mut batch = loop {
                if let Some(b) = s.backlog.take() {
                    break b;
                }
                if s.closing {
                    return;
                }
                s = self.backlog_ready.wait(s).unwrap_or_else(PoisonError::into_inner);
            };
            drop(s);
            loop {
                if batch.send(&self.socket, true).is_err() {
                    self.break_down(batch);
                    break;
                }
                self.finish(batch.into_replies());
                let mut s = self.lock();
                if s.queue.is_empty() {
                    s.sender = Sender::Idle;
                    break;
                }
                batch = Batch::new(std::mem::take(&mut s.queue), self.structured);
            }
        }
    }

    /// The socket failed: the client is gone. Wakes the reader (answering is impossible, so
    /// reading more is pointless) and discards every reply, now and from now on.
    fn break_down(&self, batch: Batch) {
        self.socket.shutdown(Shutdown::Both);
        self.finish(batch.into_replies());
        let mut s = self.lock();
        s.broken = true;
        s.sender = Sender::Idle;
        let replies = std::mem::take(&mut s.queue);
        drop(s);
        self.finish(replies);
    }

    /// Replies sent (or discarded): their buffers back to the pool, their charge to the window.
    fn finish(&self, replies: Vec<Reply>) {
        for reply in replies {
            if let Body::Data { data, .. } = reply.body {
                let bytes = data.iter().map(Vec::len).sum::<usize>();
                bump(&self.shared.counters.read_bytes, bytes as u64);
                self.pool.give_all(data);
            }
            self.window.release(reply.charge_bytes);
        }
    }

    /// Ends the backlog thread once it has sent everything (call when nothing is in flight).
    pub fn close(&self) {
        self.lock().closing = true;
        self.backlog_ready.notify_one();
    }
}
