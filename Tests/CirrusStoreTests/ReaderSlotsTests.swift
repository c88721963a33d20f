import Synchronization
import Testing

@testable import CirrusStore

@Suite("Reader slots")
struct ReaderSlotsTests {
    @Test func aReadInPlaceTakesOnlyAFreeSlot() {
        let slots = ReaderSlots(count: 2)
        #expect(slots.takeIfFree())
        #expect(slots.takeIfFree())
        #expect(!slots.takeIfFree())
        slots.giveBack()
        #expect(slots.takeIfFree())
    }

    @Test func waitingReadsGetSlotsInTheOrderTheyCame() async throws {
        let slots = ReaderSlots(count: 1)
        #expect(slots.takeIfFree())
        let order = Order()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for reader in 0..<3 {
                group.addTask {
                    await slots.take()
                    order.values.withLock { $0.append(reader) }
                    slots.giveBack()
                }
                // Each waits before the next comes.
                try await eventuallyWaiting(slots, count: reader + 1)
            }
            // While reads wait, no slot is free for a read in place.
            #expect(!slots.takeIfFree())
            slots.giveBack()
            try await group.waitForAll()
        }
        #expect(order.values.withLock { $0 } == [0, 1, 2])
        #expect(slots.takeIfFree())
    }

    private final class Order: Sendable {
        let values = Mutex<[Int]>([])
    }

    /// Waits (on events, with a generous deadline) until `count` reads wait for a slot.
    private func eventuallyWaiting(_ slots: ReaderSlots, count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while slots.waitingCount < count {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            await Task.yield()
            try await Task.sleep(for: .milliseconds(1))
        }
    }
}
