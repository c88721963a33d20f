import CirrusWire
import NIOCore
import Testing

private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

private func frame(_ streamID: UInt64, _ kind: Wire.Frame.Kind) -> Wire.Frame {
    Wire.Frame(streamID: streamID, kind: kind)
}

private func hello(version: UInt32 = Wire.protocolVersion) -> Wire.Frame {
    frame(0, .hello(Wire.Hello(protocolVersion: version, clientName: "test")))
}

private func open(_ streamID: UInt64, window: UInt32 = 0) -> Wire.Frame {
    frame(streamID, .open(Wire.Open(operationID: "op-\(streamID)", initialWindow: window)))
}

private func event(_ streamID: UInt64, seq: UInt64) -> Wire.Frame {
    frame(streamID, .event(Wire.Event(seq: seq)))
}

private func complete(_ streamID: UInt64, lastSeq: UInt64) -> Wire.Frame {
    frame(streamID, .complete(Wire.Complete(lastSeq: lastSeq)))
}

/// A server machine past the handshake.
private func activeServer(_ configure: (inout ConnectionStateMachine.Configuration) -> Void = { _ in })
    -> ConnectionStateMachine
{
    var configuration = ConnectionStateMachine.Configuration()
    configure(&configuration)
    var machine = ConnectionStateMachine(role: .server, configuration: configuration, now: t0)
    guard case .helloReceived = machine.receive(hello(), now: t0) else {
        Issue.record("Hello refused")
        return machine
    }
    _ = machine.send(frame(0, .helloAck(Wire.HelloAck(protocolVersion: Wire.protocolVersion))))
    return machine
}

/// A client machine past the handshake.
private func activeClient() -> ConnectionStateMachine {
    var machine = ConnectionStateMachine(role: .client, configuration: .init(), now: t0)
    #expect(machine.send(hello()) == .send)
    let ack = frame(0, .helloAck(Wire.HelloAck(protocolVersion: Wire.protocolVersion)))
    guard case .helloAckReceived = machine.receive(ack, now: t0) else {
        Issue.record("HelloAck refused")
        return machine
    }
    return machine
}

private func isClose(_ action: ConnectionStateMachine.ReceiveAction, _ code: Wire.ErrorCode) -> Bool {
    if case .closeWithError(code, _) = action { return true }
    return false
}

@Suite("Connection state machine: handshake")
struct HandshakeTests {
    @Test func helloThenAckActivates() {
        let machine = activeServer()
        #expect(machine.phase == .active)
    }

    @Test func wrongVersionIsRefused() {
        var machine = ConnectionStateMachine(role: .server, configuration: .init(), now: t0)
        #expect(isClose(machine.receive(hello(version: 99), now: t0), .unsupportedVersion))
        #expect(machine.phase == .closed)
    }

    @Test func openBeforeHelloIsAViolation() {
        var machine = ConnectionStateMachine(role: .server, configuration: .init(), now: t0)
        #expect(isClose(machine.receive(open(1), now: t0), .protocolViolation))
    }

    @Test func secondHelloIsAViolation() {
        var machine = activeServer()
        #expect(isClose(machine.receive(hello(), now: t0), .protocolViolation))
    }

    @Test func helloOnAStreamIsAViolation() {
        var machine = ConnectionStateMachine(role: .server, configuration: .init(), now: t0)
        let misplaced = frame(5, .hello(Wire.Hello(protocolVersion: Wire.protocolVersion)))
        #expect(isClose(machine.receive(misplaced, now: t0), .protocolViolation))
    }

    @Test func frameWithoutKindIsRefused() {
        var machine = activeServer()
        #expect(isClose(machine.receive(Wire.Frame(streamID: 0), now: t0), .unknownFrameKind))
    }

    @Test func handshakeTimesOut() {
        var machine = ConnectionStateMachine(role: .server, configuration: .init(), now: t0)
        #expect(machine.timerFired(now: t0 + .seconds(9)) == .none)
        guard case .closeWithError(.handshakeTimeout, _) = machine.timerFired(now: t0 + .seconds(10)) else {
            Issue.record("expected a handshake timeout")
            return
        }
        #expect(machine.phase == .closed)
    }

    @Test func clientFramesSentToAClientAreViolations() {
        var machine = activeClient()
        #expect(isClose(machine.receive(open(1), now: t0), .protocolViolation))
    }
}

@Suite("Connection state machine: streams")
struct StreamTests {
    @Test func openEventsAndCompleteWithinCredit() {
        var machine = activeServer()
        #expect(machine.receive(open(1, window: 2), now: t0) == .openStream(streamID: 1, Wire.Open(operationID: "op-1", initialWindow: 2)))
        #expect(machine.send(event(1, seq: 1)) == .send)
        #expect(machine.send(event(1, seq: 2)) == .send)
        #expect(machine.send(event(1, seq: 3)) == .waitForCredit)
        #expect(machine.receive(frame(1, .window(Wire.Window(credit: 1))), now: t0) == .creditAvailable(streamID: 1, granted: 1))
        #expect(machine.send(event(1, seq: 3)) == .send)
        #expect(machine.send(complete(1, lastSeq: 3)) == .send)
        #expect(machine.openStreamCount == 0)
    }

    @Test func zeroWindowMeansTheDefault() {
        var machine = activeServer { $0.initialStreamWindow = 3 }
        _ = machine.receive(open(1, window: 0), now: t0)
        #expect(machine.credit(streamID: 1) == 3)
    }

    @Test func eventSequenceHasNoGaps() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 10), now: t0)
        guard case .invalid = machine.send(event(1, seq: 2)) else {
            Issue.record("seq 2 before seq 1 must be refused")
            return
        }
        #expect(machine.send(event(1, seq: 1)) == .send)
        guard case .invalid = machine.send(event(1, seq: 1)) else {
            Issue.record("a repeated seq must be refused")
            return
        }
    }

    @Test func completeMustCarryTheLastSeq() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 10), now: t0)
        _ = machine.send(event(1, seq: 1))
        guard case .invalid = machine.send(complete(1, lastSeq: 5)) else {
            Issue.record("a Complete with the wrong last seq must be refused")
            return
        }
    }

    @Test func resumeContinuesAfterTheClientsSeq() {
        var machine = activeServer()
        let resume = frame(1, .resume(Wire.Resume(operationID: "op", lastSeq: 41, initialWindow: 5)))
        guard case .resumeStream(1, _) = machine.receive(resume, now: t0) else {
            Issue.record("Resume refused")
            return
        }
        #expect(machine.send(event(1, seq: 42)) == .send)
    }

    @Test func streamIDsMustIncrease() {
        var machine = activeServer()
        _ = machine.receive(open(5), now: t0)
        #expect(isClose(machine.receive(open(3), now: t0), .protocolViolation))
    }

    @Test func streamZeroCannotCarryAnOperation() {
        var machine = activeServer()
        #expect(isClose(machine.receive(open(0), now: t0), .protocolViolation))
    }

    @Test func concurrentStreamsAreBounded() {
        var machine = activeServer { $0.maximumConcurrentStreams = 2 }
        _ = machine.receive(open(1), now: t0)
        _ = machine.receive(open(2), now: t0)
        guard case .refuseStream(3, .tooManyStreams, _) = machine.receive(open(3), now: t0) else {
            Issue.record("the third stream must be refused")
            return
        }
        #expect(machine.phase == .active)
        #expect(machine.openStreamCount == 2)
        _ = machine.send(complete(1, lastSeq: 0))
        guard case .openStream(4, _) = machine.receive(open(4), now: t0) else {
            Issue.record("a stream must be admitted once one ended")
            return
        }
    }

    @Test func plainCancelLeavesRoomForExactlyOneComplete() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 10), now: t0)
        #expect(machine.send(event(1, seq: 1)) == .send)
        let cancel = frame(1, .cancel(Wire.Cancel(reason: "user")))
        #expect(
            machine.receive(cancel, now: t0) == .cancelStream(streamID: 1, reason: "user", action: .confirm(lastSeq: 1)))
        #expect(machine.isOpen(streamID: 1))
        #expect(machine.send(event(1, seq: 2)) == .drop)
        #expect(machine.send(frame(1, .persisted(Wire.Persisted(operationID: "op-1")))) == .drop)
        #expect(machine.receive(frame(1, .window(Wire.Window(credit: 1))), now: t0) == .none)
        let cancelled = frame(
            1, .complete(Wire.Complete(lastSeq: 1, error: Wire.OperationError(code: .operationCancelled, message: "cancelled"))))
        #expect(machine.send(cancelled) == .send)
        #expect(!machine.isOpen(streamID: 1))
        #expect(machine.send(cancelled) == .drop)
        // A Cancel that crosses the Complete is ignored.
        #expect(machine.receive(cancel, now: t0) == .none)
    }

    @Test(arguments: [Wire.Cancel(detach: true), Wire.Cancel(completionAcknowledged: true)])
    func detachOrAcknowledgeEndsTheStreamWithNothingSent(_ cancel: Wire.Cancel) {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 10), now: t0)
        let action: StreamStateMachine.CancelAction = cancel.detach ? .detach : .acknowledgeCompletion
        #expect(machine.receive(frame(1, .cancel(cancel)), now: t0) == .cancelStream(streamID: 1, reason: "", action: action))
        #expect(!machine.isOpen(streamID: 1))
        #expect(machine.send(event(1, seq: 1)) == .drop)
        #expect(machine.send(complete(1, lastSeq: 0)) == .drop)
    }

    @Test func anAcknowledgementAfterCompleteNamesTheStreamAndCostsNothing() {
        var machine = activeServer {
            $0.cancelBurst = 1
            $0.cancelsPerSecond = 1
        }
        _ = machine.receive(open(1, window: 10), now: t0)
        #expect(machine.send(complete(1, lastSeq: 0)) == .send)
        let ack = frame(1, .cancel(Wire.Cancel(completionAcknowledged: true)))
        for _ in 1...3 {
            #expect(machine.receive(ack, now: t0) == .completionAcknowledged(streamID: 1))
        }
        // A plain Cancel crossing the Complete, and an acknowledgement on a stream never
        // opened, are ignored.
        #expect(machine.receive(frame(1, .cancel(Wire.Cancel())), now: t0) == .none)
        #expect(machine.receive(frame(3, .cancel(Wire.Cancel(completionAcknowledged: true))), now: t0) == .none)
        // None of them spent the one cancel the peer may make.
        _ = machine.receive(open(5, window: 10), now: t0)
        #expect(
            machine.receive(frame(5, .cancel(Wire.Cancel())), now: t0)
                == .cancelStream(streamID: 5, reason: "", action: .confirm(lastSeq: 0)))
    }

    @Test func aSecondCancelOnACancelledStreamIsIgnored() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 10), now: t0)
        #expect(machine.send(event(1, seq: 1)) == .send)
        #expect(
            machine.receive(frame(1, .cancel(Wire.Cancel())), now: t0)
                == .cancelStream(streamID: 1, reason: "", action: .confirm(lastSeq: 1)))
        #expect(machine.receive(frame(1, .cancel(Wire.Cancel(detach: true))), now: t0) == .none)
        #expect(machine.isOpen(streamID: 1), "the confirming Complete is still owed")
    }

    @Test func theCompleteOfTheLastCancelledStreamClosesADrainingConnection() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 10), now: t0)
        #expect(machine.send(machine.makeGoAway(code: .shuttingDown, reason: "test")) == .send)
        #expect(
            machine.receive(frame(1, .cancel(Wire.Cancel())), now: t0)
                == .cancelStream(streamID: 1, reason: "", action: .confirm(lastSeq: 0)))
        #expect(!machine.isDrained, "the cancelled stream still owes its Complete")
        let cancelled = Wire.Complete(lastSeq: 0, error: Wire.OperationError(code: .operationCancelled, message: "cancelled"))
        #expect(machine.send(frame(1, .complete(cancelled))) == .sendAndClose)
    }

    @Test func cancelOnStreamZeroIsAViolation() {
        var machine = activeServer()
        #expect(isClose(machine.receive(frame(0, .cancel(Wire.Cancel())), now: t0), .protocolViolation))
    }

    @Test func rapidCancelIsRateLimited() {
        var machine = activeServer {
            $0.cancelBurst = 10
            $0.cancelsPerSecond = 5
        }
        var closed = false
        for id in 1...11 {
            _ = machine.receive(open(UInt64(id)), now: t0)
            if isClose(machine.receive(frame(UInt64(id), .cancel(Wire.Cancel())), now: t0), .rateLimited) {
                closed = true
                #expect(id == 11)
            }
        }
        #expect(closed)
    }

    @Test func refusedOpensCountLikeCancels() {
        var machine = activeServer {
            $0.maximumConcurrentStreams = 1
            $0.cancelBurst = 10
            $0.cancelsPerSecond = 5
        }
        guard case .openStream(1, _) = machine.receive(open(1), now: t0) else {
            Issue.record("the first stream must be admitted")
            return
        }
        for id in 2...11 {
            guard case .refuseStream(UInt64(id), .tooManyStreams, _) = machine.receive(open(UInt64(id)), now: t0) else {
                Issue.record("stream \(id) must be refused, not cut")
                return
            }
        }
        // The burst is spent: one more refused Open closes the connection.
        #expect(isClose(machine.receive(open(12), now: t0), .rateLimited))
        #expect(machine.phase == .closed)
    }

    @Test func refusalsAndCancelsShareOneAllowance() {
        var machine = activeServer {
            $0.maximumConcurrentStreams = 1
            $0.cancelBurst = 2
            $0.cancelsPerSecond = 1
        }
        _ = machine.receive(open(1), now: t0)
        #expect(
            machine.receive(frame(1, .cancel(Wire.Cancel())), now: t0)
                == .cancelStream(streamID: 1, reason: "", action: .confirm(lastSeq: 0)))
        let cancelled = Wire.OperationError(code: .operationCancelled, message: "cancelled")
        #expect(machine.send(frame(1, .complete(Wire.Complete(lastSeq: 0, error: cancelled)))) == .send)
        _ = machine.receive(open(2), now: t0)
        guard case .refuseStream(3, .tooManyStreams, _) = machine.receive(open(3), now: t0) else {
            Issue.record("stream 3 must be refused")
            return
        }
        #expect(isClose(machine.receive(open(4), now: t0), .rateLimited))
    }

    @Test func cancelsRefillOverTime() {
        var machine = activeServer {
            $0.cancelBurst = 2
            $0.cancelsPerSecond = 1
        }
        var now = t0
        for id in 1...20 {
            now = now + .seconds(1)
            _ = machine.receive(open(UInt64(id)), now: now)
            #expect(
                machine.receive(frame(UInt64(id), .cancel(Wire.Cancel())), now: now)
                    == .cancelStream(streamID: UInt64(id), reason: "", action: .confirm(lastSeq: 0)))
        }
    }

    @Test func creditBeyondTheMaximumIsAFlowControlViolation() {
        var machine = activeServer { $0.maximumStreamCredit = 100 }
        _ = machine.receive(open(1, window: 90), now: t0)
        #expect(machine.receive(frame(1, .window(Wire.Window(credit: 10))), now: t0) == .creditAvailable(streamID: 1, granted: 10))
        #expect(machine.credit(streamID: 1) == 100)
        #expect(isClose(machine.receive(frame(1, .window(Wire.Window(credit: 1))), now: t0), .flowControlViolation))
    }

    @Test func twoWindowsAbove2To32AreAFlowControlViolation() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 1), now: t0)
        let most = UInt32.max - 1
        #expect(machine.receive(frame(1, .window(Wire.Window(credit: most))), now: t0) == .creditAvailable(streamID: 1, granted: UInt64(most)))
        #expect(machine.credit(streamID: 1) == UInt64(UInt32.max))
        #expect(isClose(machine.receive(frame(1, .window(Wire.Window(credit: 1))), now: t0), .flowControlViolation))
    }

    @Test func windowOnStreamZeroIsAFlowControlViolation() {
        var machine = activeServer()
        #expect(isClose(machine.receive(frame(0, .window(Wire.Window(credit: 1))), now: t0), .flowControlViolation))
    }
}

@Suite("Connection state machine: client side")
struct ClientSideTests {
    @Test func eventsBeyondCreditAreAViolation() {
        var machine = activeClient()
        #expect(machine.send(open(1, window: 1)) == .send)
        #expect(machine.receive(event(1, seq: 1), now: t0) == .deliver(event(1, seq: 1)))
        #expect(isClose(machine.receive(event(1, seq: 2), now: t0), .flowControlViolation))
    }

    @Test func grantedCreditAllowsMore() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 1))
        _ = machine.receive(event(1, seq: 1), now: t0)
        #expect(machine.send(frame(1, .window(Wire.Window(credit: 1)))) == .send)
        #expect(machine.receive(event(1, seq: 2), now: t0) == .deliver(event(1, seq: 2)))
    }

    @Test func outOfOrderEventIsAViolation() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 5))
        #expect(isClose(machine.receive(event(1, seq: 2), now: t0), .protocolViolation))
    }

    @Test func eventsAfterCancelAreDropped() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 5))
        #expect(machine.send(frame(1, .cancel(Wire.Cancel()))) == .send)
        #expect(machine.receive(event(1, seq: 1), now: t0) == .none)
    }

    @Test func eventOnANeverOpenedStreamIsAViolation() {
        var machine = activeClient()
        #expect(isClose(machine.receive(event(7, seq: 1), now: t0), .protocolViolation))
    }

    @Test func completeEndsTheStream() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 5))
        _ = machine.receive(event(1, seq: 1), now: t0)
        #expect(machine.receive(complete(1, lastSeq: 1), now: t0) == .deliver(complete(1, lastSeq: 1)))
        #expect(!machine.isOpen(streamID: 1))
    }

    @Test func clientAdoptsShorterPeerTimers() {
        var machine = activeClient()
        #expect(machine.timerFired(now: t0 + .milliseconds(200)) == .none)
        machine.adoptPeerTimers(Wire.Limits(pingIntervalMs: 100, idleTimeoutMs: 1_000))
        #expect(machine.configuration.keepaliveInterval == .milliseconds(100))
        #expect(machine.configuration.idleTimeout == .milliseconds(1_000))
        guard case .sendPing = machine.timerFired(now: t0 + .milliseconds(200)) else {
            Issue.record("no ping after the peer's interval")
            return
        }
        // Longer or absent values change nothing.
        machine.adoptPeerTimers(Wire.Limits(pingIntervalMs: 60_000, idleTimeoutMs: 0))
        #expect(machine.configuration.keepaliveInterval == .milliseconds(100))
        #expect(machine.configuration.idleTimeout == .milliseconds(1_000))
    }

    @Test func completionAcknowledgementGoesOnTheCompletedStream() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 5))
        _ = machine.receive(complete(1, lastSeq: 0), now: t0)
        let ack = frame(1, .cancel(Wire.Cancel(completionAcknowledged: true)))
        #expect(machine.send(ack) == .send)
        // A plain Cancel after Complete still has nothing to cancel, and a stream never opened
        // gets no acknowledgement.
        #expect(machine.send(frame(1, .cancel(Wire.Cancel()))) == .drop)
        #expect(machine.send(frame(3, .cancel(Wire.Cancel(completionAcknowledged: true)))) == .drop)
        #expect(machine.openStreamCount == 0)
    }

    @Test func resumedStreamContinuesTheOperationsNumbering() {
        var machine = activeClient()
        #expect(machine.send(frame(1, .resume(Wire.Resume(operationID: "op", lastSeq: 4, initialWindow: 5)))) == .send)
        #expect(isClose(machine.receive(event(1, seq: 1), now: t0), .protocolViolation))
        var again = activeClient()
        _ = again.send(frame(1, .resume(Wire.Resume(operationID: "op", lastSeq: 4, initialWindow: 5))))
        #expect(again.receive(event(1, seq: 5), now: t0) == .deliver(event(1, seq: 5)))
        #expect(again.receive(complete(1, lastSeq: 5), now: t0) == .deliver(complete(1, lastSeq: 5)))
    }

    @Test func completeWithAWrongLastSeqIsAViolation() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 5))
        #expect(isClose(machine.receive(complete(1, lastSeq: 3), now: t0), .protocolViolation))
    }

    @Test func goAwayFailsStreamsTheServerNeverSaw() {
        var machine = activeClient()
        _ = machine.send(open(1, window: 5))
        _ = machine.send(open(3, window: 5))
        let goAway = frame(0, .goAway(Wire.GoAway(lastStreamID: 1, code: .shuttingDown)))
        #expect(machine.receive(goAway, now: t0) == .peerGoingAway(lastStreamID: 1, closeNow: false))
        #expect(machine.isOpen(streamID: 1))
        #expect(!machine.isOpen(streamID: 3))
        guard case .invalid = machine.send(open(5)) else {
            Issue.record("no new streams while draining")
            return
        }
    }
}

@Suite("Connection state machine: keepalive, idle, drain")
struct TimerAndDrainTests {
    @Test func pingIsAnsweredWithItsNonce() {
        var machine = activeServer()
        #expect(machine.receive(frame(0, .ping(Wire.Ping(nonce: 77))), now: t0) == .sendPong(nonce: 77))
    }

    @Test func pingOnAStreamIsAViolation() {
        var machine = activeServer()
        #expect(isClose(machine.receive(frame(3, .ping(Wire.Ping(nonce: 1))), now: t0), .protocolViolation))
    }

    @Test func keepalivePingsAQuietPeerAndClosesIfItNeverAnswers() {
        var machine = activeServer()
        _ = machine.receive(open(1), now: t0)  // a busy stream: not idle
        #expect(machine.timerFired(now: t0 + .seconds(29)) == .none)
        #expect(machine.timerFired(now: t0 + .seconds(30)) == .sendPing(nonce: 1))
        #expect(machine.timerFired(now: t0 + .seconds(45)) == .none)
        guard case .closeWithError = machine.timerFired(now: t0 + .seconds(50)) else {
            Issue.record("an unanswered Ping must close the connection")
            return
        }
    }

    @Test func pongClearsTheKeepalive() {
        var machine = activeServer()
        _ = machine.receive(open(1), now: t0)
        #expect(machine.timerFired(now: t0 + .seconds(30)) == .sendPing(nonce: 1))
        #expect(machine.receive(frame(0, .pong(Wire.Pong(nonce: 1))), now: t0 + .seconds(31)) == .none)
        #expect(machine.timerFired(now: t0 + .seconds(55)) == .none)
        #expect(machine.timerFired(now: t0 + .seconds(61)) == .sendPing(nonce: 2))
    }

    @Test func idleConnectionCloses() {
        var machine = activeServer {
            $0.idleTimeout = .seconds(60)
            $0.keepaliveInterval = .seconds(1000)
        }
        #expect(machine.timerFired(now: t0 + .seconds(59)) == .none)
        #expect(machine.timerFired(now: t0 + .seconds(60)) == .closeIdle)
    }

    @Test func pingsDoNotKeepAConnectionFromBeingIdle() {
        var machine = activeServer {
            $0.idleTimeout = .seconds(60)
            $0.keepaliveInterval = .seconds(1000)
        }
        for second in stride(from: 10, to: 60, by: 10) {
            _ = machine.receive(frame(0, .ping(Wire.Ping(nonce: 1))), now: t0 + .seconds(Int64(second)))
        }
        #expect(machine.timerFired(now: t0 + .seconds(60)) == .closeIdle)
    }

    @Test func pongsForAPeerThatDoesNotReadAreBounded() {
        var machine = activeServer { $0.maximumQueuedControlFrames = 3 }
        machine.writabilityChanged(isWritable: false)
        for nonce in 1...3 {
            #expect(machine.receive(frame(0, .ping(Wire.Ping(nonce: UInt64(nonce)))), now: t0) == .sendPong(nonce: UInt64(nonce)))
        }
        #expect(isClose(machine.receive(frame(0, .ping(Wire.Ping(nonce: 4))), now: t0), .protocolViolation))
    }

    @Test func writableAgainResetsTheControlFrameCount() {
        var machine = activeServer { $0.maximumQueuedControlFrames = 1 }
        machine.writabilityChanged(isWritable: false)
        _ = machine.receive(frame(0, .ping(Wire.Ping(nonce: 1))), now: t0)
        machine.writabilityChanged(isWritable: true)
        machine.writabilityChanged(isWritable: false)
        #expect(machine.receive(frame(0, .ping(Wire.Ping(nonce: 2))), now: t0) == .sendPong(nonce: 2))
    }

    @Test func goAwayDrainsThenCloses() {
        var machine = activeServer()
        _ = machine.receive(open(1, window: 1), now: t0)
        let goAway = machine.makeGoAway(code: .shuttingDown, reason: "bye")
        #expect(goAway == frame(0, .goAway(Wire.GoAway(lastStreamID: 1, code: .shuttingDown, reason: "bye"))))
        #expect(machine.send(goAway) == .send)
        #expect(machine.phase == .draining)
        guard case .refuseStream(3, .shuttingDown, _) = machine.receive(open(3), now: t0) else {
            Issue.record("new streams are refused while draining")
            return
        }
        #expect(machine.send(event(1, seq: 1)) == .send)
        #expect(machine.send(complete(1, lastSeq: 1)) == .sendAndClose)
        #expect(machine.phase == .closed)
    }

    @Test func goAwayWithNothingOpenClosesAtOnce() {
        var machine = activeServer()
        #expect(machine.send(machine.makeGoAway(code: .shuttingDown, reason: "")) == .sendAndClose)
    }

    @Test func peerErrorClosesTheConnection() {
        var machine = activeServer()
        let error = Wire.ConnectionError(code: .protocolViolation, message: "bad")
        #expect(machine.receive(frame(0, .error(error)), now: t0) == .peerClosed(error))
        #expect(machine.phase == .closed)
        #expect(machine.receive(open(1), now: t0) == .none)
    }
}
