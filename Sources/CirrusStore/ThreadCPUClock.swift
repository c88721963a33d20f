#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`): what the writer
/// spends on a transaction, without the time it waits for the disk or for a core.
enum ThreadCPUClock {
    /// The calling thread's CPU time so far; zero where the clock cannot be read.
    static func now() -> Duration {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return .zero }
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }
}
