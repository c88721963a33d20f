import NIOCore

/// A `TaskExecutor` that runs a task's jobs on one NIO event loop: a task started with it as
/// its executor preference runs its nonisolated code on the loop's thread, between the loop's
/// I/O, instead of on the cooperative pool.
///
/// For an operation whose own work is a few microseconds (the checks of a small save, whose
/// transaction runs on the storage's writer thread), the pool costs more than the work: the
/// connection's loop wakes a pool thread to start the task, and the task wakes the loop to
/// write its events and its `Complete` — two thread hand-offs per operation, each a futex wake
/// and a context switch. On the loop the operation starts after the read that carried its
/// `Open`, and its events are written and flushed in the loop iteration that resumes it.
///
/// Only for work that never blocks: an awaited call that suspends (the writer's commit) lets
/// the loop go on, and the task continues on the loop when it is resumed. A default actor's
/// methods called from the task run on the loop too (SE-0417): nothing that does I/O in an
/// actor may run this way.
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
