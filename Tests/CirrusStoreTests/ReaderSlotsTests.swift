import CirrusTestSupport
import Synchronization
import Testing

@testable import CirrusStore

@Suite("Reader slots")
struct ReaderSlotsTests {
    @Test func takeIfFreeTakesOnlyAFreeSlot() {
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
                try await eventually("read \(reader) to wait") { slots.waitingCount == reader + 1 }
            }
            // While reads wait, no slot is free.
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
}
