import CirrusStore
import CirrusWire
import Testing

@testable import CirrusServer

private func key(_ name: String) -> LongLivedOperationKey {
    LongLivedOperationKey(owner: "alice", operationID: name)
}

@Suite("CompletedLongLivedStreams")
struct CompletedLongLivedStreamsTests {
    @Test func anAcknowledgementNamesTheOperationOnce() {
        var completed = CompletedLongLivedStreams()
        completed.insert(streamID: 3, key: key("op-3"))
        #expect(completed.acknowledge(streamID: 3) == key("op-3"))
        #expect(completed.acknowledge(streamID: 3) == nil, "a second acknowledgement finds nothing")
        #expect(completed.acknowledge(streamID: 5) == nil, "a stream that followed no operation")
        #expect(completed.count == 0)
    }

    @Test func theOldestStreamIsForgottenAtCapacity() {
        var completed = CompletedLongLivedStreams(capacity: 3)
        for id in [9, 3, 5] as [UInt64] {
            completed.insert(streamID: id, key: key("op-\(id)"))
        }
        completed.insert(streamID: 11, key: key("op-11"))
        #expect(completed.count == 3)
        #expect(completed.acknowledge(streamID: 3) == nil, "the lowest stream ID went first")
        for id in [5, 9, 11] as [UInt64] {
            #expect(completed.acknowledge(streamID: id) == key("op-\(id)"))
        }
    }

    @Test func theDefaultCapacityBoundsAClientThatNeverAcknowledges() {
        var completed = CompletedLongLivedStreams()
        for id in 1...(CompletedLongLivedStreams.defaultCapacity + 100) {
            completed.insert(streamID: UInt64(id), key: key("op-\(id)"))
        }
        #expect(completed.count == CompletedLongLivedStreams.defaultCapacity)
    }
}

@Suite("DeferredDrains")
struct DeferredDrainsTests {
    @Test func streamsDrainInTheOrderTheyAskedOnceEach() {
        var deferred = DeferredDrains()
        #expect(deferred.isEmpty)
        deferred.append(streamID: 5)
        deferred.append(streamID: 1)
        deferred.append(streamID: 5)
        #expect(deferred.popFirst()?.streamID == 5)
        #expect(deferred.popFirst()?.streamID == 1)
        #expect(deferred.popFirst() == nil)
        #expect(deferred.isEmpty)
    }

    @Test func aCompletionWaitsBehindItsStreamsEvents() {
        var deferred = DeferredDrains()
        deferred.append(streamID: 1)
        deferred.append(streamID: 3, completion: .success())
        deferred.append(streamID: 1, completion: .failure(.internalError, "late"))
        let first = deferred.popFirst()
        #expect(first?.streamID == 1, "stream 1 keeps its place")
        #expect(first?.completion == .failure(.internalError, "late"))
        let second = deferred.popFirst()
        #expect(second?.streamID == 3)
        #expect(second?.completion == .success())
    }

    @Test func aStoppedStreamsCompletionIsNotSent() {
        var deferred = DeferredDrains()
        deferred.append(streamID: 2, completion: .success())
        deferred.dropCompletion(streamID: 2)
        let next = deferred.popFirst()
        #expect(next?.streamID == 2, "its queued events are still taken (and dropped: the stream is gone)")
        #expect(next?.completion == nil)
    }
}
