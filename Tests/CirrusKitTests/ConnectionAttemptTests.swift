import CirrusTestSupport
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import CirrusKit

/// How callers share a connection attempt and hear its outcome.
@Suite("Connection attempts")
struct ConnectionAttemptTests {
    /// A caller off the event loop starts an attempt while the loop is busy; a caller on the
    /// loop joins it before the attempt's own bookkeeping has run. Both hear its failure once.
    /// The joining caller once ran first, saw the failed attempt still in progress, joined it
    /// again at once, and so on until its thread's stack overflowed: the test process died of
    /// SIGSEGV now and then in the whole suite.
    @Test func aCallerOnTheLoopJoiningAnAttemptStartedOffTheLoopHearsItFail() async throws {
        let closed = try await FakePeer.start { _, _ in FakeReply() }
        let port = closed.port
        await closed.stop()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        var configuration = TestCertificates.client(port: port)
        // Only the first attempt goes out at once; another would wait ten minutes.
        configuration.reconnectBaseDelay = 600
        configuration.reconnectMaximumDelay = 600
        let manager = ConnectionManager(configuration: configuration, group: group)

        let (offLoop, onLoop) = try await group.next().submit {
            // The loop is held here, so the attempt the other thread starts cannot run yet.
            let started = DispatchSemaphore(value: 0)
            let offLoop = NIOLockedValueBox<EventLoopFuture<ClientConnection>?>(nil)
            Thread.detachNewThread {
                offLoop.withLockedValue { $0 = manager.connectionFailingOver() }
                started.signal()
            }
            started.wait()
            let joined = manager.connectionFailingOver()
            return (offLoop.withLockedValue { $0 }, joined)
        }.get()

        let first = try #require(offLoop)
        await #expect(throws: (any Error).self) { try await first.get() }
        await #expect(throws: (any Error).self) { try await onLoop.get() }
        manager.shutdown()
        try await group.shutdownGracefully()
    }
}
