import CirrusWire
import Testing

/// A stream opened with `credit` and nothing sent.
private func openStream(credit: UInt32 = 4, lastSeq: UInt64 = 0, maximum: UInt64 = 100) -> StreamStateMachine {
    var stream = StreamStateMachine(maximumCredit: maximum)
    _ = stream.open(initialCredit: credit, lastSeq: lastSeq)
    return stream
}

private let cancelled = Wire.Cancel(reason: "user")
private let detach = Wire.Cancel(detach: true)
private let acknowledge = Wire.Cancel(completionAcknowledged: true)

@Suite("StreamStateMachine")
struct StreamStateMachineTests {
    // MARK: - Opening

    @Test func openTakesTheInitialCreditAndLastSeq() {
        var stream = StreamStateMachine(maximumCredit: 100)
        #expect(stream.phase == .idle)
        #expect(stream.open(initialCredit: 8, lastSeq: 5) == .opened(credit: 8))
        #expect(stream.phase == .open)
        #expect(stream.credit == 8)
        #expect(stream.lastSeq == 5)
    }

    @Test func initialCreditStopsAtTheMaximum() {
        var stream = StreamStateMachine(maximumCredit: 10)
        #expect(stream.open(initialCredit: 50, lastSeq: 0) == .opened(credit: 10))
    }

    @Test(arguments: [StreamStateMachine.Phase.open, .cancelled, .closed])
    func aSecondOpenIsADuplicate(_ phase: StreamStateMachine.Phase) {
        var stream = openStream(credit: 4)
        switch phase {
        case .cancelled: _ = stream.receiveCancel(cancelled)
        case .closed: _ = stream.complete(lastSeq: 0, isError: false)
        default: break
        }
        let before = stream
        #expect(stream.open(initialCredit: 9, lastSeq: 3) == .duplicate)
        #expect(stream == before, "a duplicate Open changes nothing")
    }

    @Test func anIdleStreamTakesNothing() {
        var stream = StreamStateMachine(maximumCredit: 100)
        #expect(stream.sendEvent(seq: 1) == .drop)
        #expect(stream.receiveEvent(seq: 1) == .ignore)
        #expect(stream.receiveWindow(5) == .ignore)
        let windowSent = stream.sendWindow(5)
        #expect(!windowSent)
        #expect(!stream.canSendPersisted)
        #expect(stream.receiveCancel(cancelled) == .ignore)
        #expect(stream.complete(lastSeq: 0, isError: false) == .drop)
        #expect(stream.phase == .idle)
    }

    // MARK: - Events and credit

    @Test func eventsSpendCreditInSeqOrder() {
        var stream = openStream(credit: 2)
        #expect(stream.sendEvent(seq: 1) == .send)
        #expect(stream.sendEvent(seq: 2) == .send)
        #expect(stream.credit == 0)
        #expect(stream.lastSeq == 2)
        #expect(stream.sendEvent(seq: 3) == .waitForCredit)
        #expect(stream.lastSeq == 2, "an event waiting for credit is not sent")
    }

    @Test func anEventOutOfOrderIsRefusedAndChangesNothing() {
        var stream = openStream(credit: 4, lastSeq: 7)
        #expect(stream.sendEvent(seq: 7) == .outOfOrder(lastSeq: 7))
        #expect(stream.sendEvent(seq: 9) == .outOfOrder(lastSeq: 7))
        #expect(stream.credit == 4)
        #expect(stream.sendEvent(seq: 8) == .send)
    }

    @Test func aWindowAddsCredit() {
        var stream = openStream(credit: 1)
        #expect(stream.sendEvent(seq: 1) == .send)
        #expect(stream.receiveWindow(3) == .granted(3))
        #expect(stream.credit == 3)
        #expect(stream.sendEvent(seq: 2) == .send)
    }

    @Test func aWindowUpToTheMaximumIsGrantedAndOneBeyondOverflows() {
        var stream = openStream(credit: 90, maximum: 100)
        #expect(stream.receiveWindow(10) == .granted(10))
        #expect(stream.credit == 100)
        #expect(stream.receiveWindow(1) == .overflow)
        #expect(stream.credit == 100, "an overflowing Window grants nothing")
    }

    @Test func creditNeverWrapsAround() {
        var stream = openStream(credit: UInt32.max, maximum: UInt64(UInt32.max))
        #expect(stream.receiveWindow(UInt32.max) == .overflow)
        #expect(stream.credit == UInt64(UInt32.max))
    }

    @Test func aClientWindowStopsAtTheMaximum() {
        var stream = openStream(credit: 90, maximum: 100)
        let windowSent = stream.sendWindow(50)
        #expect(windowSent)
        #expect(stream.credit == 100)
    }

    @Test func theClientCountsEventsAgainstItsCredit() {
        var stream = openStream(credit: 1)
        #expect(stream.receiveEvent(seq: 2) == .outOfOrder(lastSeq: 0))
        #expect(stream.receiveEvent(seq: 1) == .deliver)
        #expect(stream.receiveEvent(seq: 2) == .beyondCredit)
        #expect(stream.lastSeq == 1)
    }

    // MARK: - Cancel

    @Test func aPlainCancelLeavesRoomForTheConfirmingCompleteOnly() {
        var stream = openStream(credit: 4)
        #expect(stream.sendEvent(seq: 1) == .send)
        #expect(stream.receiveCancel(cancelled) == .confirm(lastSeq: 1))
        #expect(stream.phase == .cancelled)
        #expect(stream.credit == 0)
        #expect(stream.sendEvent(seq: 2) == .drop)
        #expect(!stream.canSendPersisted)
        #expect(stream.receiveWindow(5) == .ignore, "a Window crossing the Cancel grants nothing")
        #expect(stream.credit == 0)
        #expect(stream.receiveCancel(cancelled) == .ignore, "a second Cancel changes nothing")
        #expect(stream.receiveCancel(detach) == .ignore)
        #expect(stream.complete(lastSeq: 1, isError: true) == .complete)
        #expect(stream.phase == .closed)
    }

    @Test func detachEndsTheStreamWithNothingSent() {
        var stream = openStream(credit: 4)
        #expect(stream.receiveCancel(detach) == .detach)
        #expect(stream.phase == .closed)
        #expect(stream.sendEvent(seq: 1) == .drop)
        #expect(stream.complete(lastSeq: 0, isError: false) == .drop)
    }

    @Test func anAcknowledgementOutranksDetach() {
        var stream = openStream(credit: 4)
        #expect(stream.receiveCancel(Wire.Cancel(completionAcknowledged: true, detach: true)) == .acknowledgeCompletion)
        #expect(stream.phase == .closed)
    }

    @Test func cancelAfterCompleteIsIgnoredUnlessItAcknowledges() {
        var stream = openStream(credit: 4)
        #expect(stream.sendEvent(seq: 1) == .send)
        #expect(stream.complete(lastSeq: 1, isError: false) == .complete)
        #expect(stream.receiveCancel(cancelled) == .ignore)
        #expect(stream.receiveCancel(detach) == .ignore)
        #expect(stream.receiveCancel(acknowledge) == .acknowledgeCompletion)
        #expect(stream.phase == .closed)
    }

    // MARK: - Complete

    @Test func aSuccessfulCompleteMustNameTheLastSeq() {
        var stream = openStream(credit: 4)
        #expect(stream.sendEvent(seq: 1) == .send)
        #expect(stream.complete(lastSeq: 2, isError: false) == .lastSeqMismatch(lastSeq: 1))
        #expect(stream.phase == .closed, "the stream ends all the same")
    }

    @Test func aFailedCompleteMayNameAnEarlierSeq() {
        var stream = openStream(credit: 4)
        #expect(stream.sendEvent(seq: 1) == .send)
        #expect(stream.sendEvent(seq: 2) == .send)
        // An oversize event 2 was refused by the encoder: the stream ends after 1.
        #expect(stream.complete(lastSeq: 1, isError: true) == .complete)
    }

    @Test func aClosedStreamTakesNothing() {
        var stream = openStream(credit: 4)
        #expect(stream.complete(lastSeq: 0, isError: false) == .complete)
        #expect(stream.credit == 0)
        #expect(stream.receiveWindow(5) == .ignore, "a Window on a closed stream")
        #expect(stream.credit == 0)
        let windowSent = stream.sendWindow(5)
        #expect(!windowSent)
        #expect(stream.sendEvent(seq: 1) == .drop)
        #expect(stream.receiveEvent(seq: 1) == .ignore)
        #expect(!stream.canSendPersisted)
        #expect(stream.complete(lastSeq: 0, isError: false) == .drop, "a second Complete")
    }

    @Test func aResumedStreamContinuesTheOperationsSeqs() {
        var stream = openStream(credit: 2, lastSeq: 41)
        #expect(stream.sendEvent(seq: 1) == .outOfOrder(lastSeq: 41))
        #expect(stream.sendEvent(seq: 42) == .send)
        #expect(stream.complete(lastSeq: 42, isError: false) == .complete)
    }
}
