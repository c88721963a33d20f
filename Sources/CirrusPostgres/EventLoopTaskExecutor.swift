import NIOCore

/// Runs tasks that prefer it on one event loop: the loop of a PostgreSQL connection, so a
/// task that sends a statement and awaits its answer resumes on the thread that read the
/// answer and sends the next statement from there, instead of waking a thread of the
/// cooperative pool for each statement and the event loop again for each send.
///
/// For work that mostly waits on its connection's statements (``PostgresWriteQueue``'s
/// transactions, a serial chain whose latency bounds the throughput of a database's
/// writes); what it computes between statements runs on the event loop, so it must stay short.
final class EventLoopTaskExecutor: TaskExecutor {
    private let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        eventLoop.execute { job.runSynchronously(on: executor) }
    }
}
