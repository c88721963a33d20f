import NIOCore
import NIOEmbedded
import Testing

@testable import CirrusServer

/// One timer per event loop for every connection's timers.
@Suite("Connection ticker")
struct ConnectionTickerTests {
    final class Counts {
        var first = 0
        var second = 0
    }

    @Test func connectionsOfOneLoopShareATimerThatStopsWithTheLast() throws {
        let loop = EmbeddedEventLoop()
        let counts = Counts()
        let first = ConnectionTicker.register(on: loop, every: .milliseconds(10)) { counts.first += 1 }
        let second = ConnectionTicker.register(on: loop, every: .milliseconds(10)) { counts.second += 1 }
        #expect(ConnectionTicker.isRunning(on: loop, every: .milliseconds(10)))
        loop.advanceTime(by: .milliseconds(30))
        #expect(counts.first == 3 && counts.second == 3)

        first.cancel()
        loop.advanceTime(by: .milliseconds(10))
        #expect(counts.first == 3 && counts.second == 4)

        second.cancel()
        #expect(!ConnectionTicker.isRunning(on: loop, every: .milliseconds(10)))
        loop.advanceTime(by: .milliseconds(50))
        #expect(counts.second == 4)

        // A connection that comes later starts it again.
        let third = ConnectionTicker.register(on: loop, every: .milliseconds(10)) { counts.first += 1 }
        loop.advanceTime(by: .milliseconds(10))
        #expect(counts.first == 4)
        third.cancel()
        try loop.syncShutdownGracefully()
    }

    @Test func aTickThatClosesItsConnectionLeavesTheOthersTicking() throws {
        let loop = EmbeddedEventLoop()
        let counts = Counts()
        var registration: ConnectionTicker.Registration?
        registration = ConnectionTicker.register(on: loop, every: .seconds(1)) {
            counts.first += 1
            registration?.cancel()
        }
        let other = ConnectionTicker.register(on: loop, every: .seconds(1)) { counts.second += 1 }
        loop.advanceTime(by: .seconds(3))
        #expect(counts.first == 1 && counts.second == 3)
        other.cancel()
        try loop.syncShutdownGracefully()
    }

    @Test func loopsAndIntervalsHaveTimersOfTheirOwn() throws {
        let one = EmbeddedEventLoop()
        let two = EmbeddedEventLoop()
        let counts = Counts()
        let a = ConnectionTicker.register(on: one, every: .milliseconds(10)) { counts.first += 1 }
        let b = ConnectionTicker.register(on: two, every: .milliseconds(10)) { counts.second += 1 }
        let c = ConnectionTicker.register(on: one, every: .milliseconds(20)) { counts.second += 100 }
        #expect(ConnectionTicker.isRunning(on: one, every: .milliseconds(10)))
        #expect(ConnectionTicker.isRunning(on: one, every: .milliseconds(20)))
        #expect(ConnectionTicker.isRunning(on: two, every: .milliseconds(10)))
        one.advanceTime(by: .milliseconds(20))
        #expect(counts.first == 2 && counts.second == 100)
        for registration in [a, b, c] { registration.cancel() }
        #expect(!ConnectionTicker.isRunning(on: one, every: .milliseconds(10)))
        #expect(!ConnectionTicker.isRunning(on: two, every: .milliseconds(10)))
        try one.syncShutdownGracefully()
        try two.syncShutdownGracefully()
    }
}
