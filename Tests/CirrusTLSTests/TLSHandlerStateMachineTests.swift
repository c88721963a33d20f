import NIOCore
import Testing

@testable import CirrusTLS

/// The handler's life, without OpenSSL or a channel.
@Suite struct TLSHandlerStateMachineTests {
    private func activeMachine() -> TLSHandlerStateMachine {
        var machine = TLSHandlerStateMachine()
        _ = machine.channelActive()
        _ = machine.handshakeCompleted()
        return machine
    }

    @Test func handshakeStartsOnceWhenActive() {
        var machine = TLSHandlerStateMachine()
        let channelActive = machine.channelActive()
        #expect(channelActive == .startHandshake)
        let channelActiveAgain = machine.channelActive()
        #expect(channelActiveAgain == .none)
        #expect(machine.state == .handshaking)
        #expect(!machine.canSend)
        let handshakeCompleted = machine.handshakeCompleted()
        #expect(handshakeCompleted)
        #expect(machine.canSend)
        let handshakeCompletedAgain = machine.handshakeCompleted()
        #expect(!handshakeCompletedAgain)
    }

    @Test func bytesBeforeActivationStartTheHandshake() {
        var machine = TLSHandlerStateMachine()
        let channelRead = machine.channelRead()
        #expect(channelRead == .startHandshakeAndContinue)
        let channelReadAgain = machine.channelRead()
        #expect(channelReadAgain == .continueHandshake)
        let channelActive = machine.channelActive()
        #expect(channelActive == .none)
    }

    @Test func writesAreBufferedUntilClosing() {
        var machine = TLSHandlerStateMachine()
        let writeWhenIdle = machine.write()
        #expect(writeWhenIdle == .buffer)
        _ = machine.channelActive()
        let writeWhenHandshaking = machine.write()
        #expect(writeWhenHandshaking == .buffer)
        _ = machine.handshakeCompleted()
        let writeWhenActive = machine.write()
        #expect(writeWhenActive == .buffer)
        let close = machine.close(mode: .all)
        #expect(close == .sendCloseNotifyAndClose)
        let writeAfterClose = machine.write()
        #expect(writeAfterClose == .fail)
    }

    @Test func closeBeforeTheHandshakeSendsNoCloseNotify() {
        var machine = TLSHandlerStateMachine()
        _ = machine.channelActive()
        let close = machine.close(mode: .all)
        #expect(close == .failPendingAndClose)
        #expect(machine.state == .closed)
        let closeAgain = machine.close(mode: .all)
        #expect(closeAgain == .forward)
    }

    @Test func closingTheInputIsPassedOn() {
        var machine = self.activeMachine()
        let close = machine.close(mode: .input)
        #expect(close == .forward)
        #expect(machine.state == .active)
    }

    @Test func closeNotifyIsAnsweredOnce() {
        var machine = self.activeMachine()
        let closeNotifyReceived = machine.closeNotifyReceived()
        #expect(closeNotifyReceived == .replyAndClose)
        let closeNotifyReceivedAgain = machine.closeNotifyReceived()
        #expect(closeNotifyReceivedAgain == .none)
        let channelRead = machine.channelRead()
        #expect(channelRead == .decrypt)
        let channelInactive = machine.channelInactive()
        #expect(channelInactive == .none)
    }

    @Test func closeNotifyAfterOurCloseNeedsNoAnswer() {
        var machine = self.activeMachine()
        _ = machine.close(mode: .output)
        let channelRead = machine.channelRead()
        #expect(channelRead == .decrypt)
        let closeNotifyReceived = machine.closeNotifyReceived()
        #expect(closeNotifyReceived == .none)
    }

    @Test(arguments: [true, false])
    func eofWithoutCloseNotifyIsUnexpected(duringHandshake: Bool) {
        var machine = TLSHandlerStateMachine()
        _ = machine.channelActive()
        if !duringHandshake {
            _ = machine.handshakeCompleted()
        }
        let channelInactive = machine.channelInactive()
        #expect(channelInactive == .fireUnexpectedEOF(duringHandshake: duringHandshake))
        let channelInactiveAgain = machine.channelInactive()
        #expect(channelInactiveAgain == .none)
    }

    @Test func eofBeforeActivationIsNotAnError() {
        var machine = TLSHandlerStateMachine()
        let channelInactive = machine.channelInactive()
        #expect(channelInactive == .none)
    }

    @Test func failureIsReportedOnce() {
        var machine = self.activeMachine()
        let failed = machine.failed()
        #expect(failed == .reportAndClose)
        let failedAgain = machine.failed()
        #expect(failedAgain == .ignore)
        let channelRead = machine.channelRead()
        #expect(channelRead == .ignore)
        let write = machine.write()
        #expect(write == .fail)
        let channelInactive = machine.channelInactive()
        #expect(channelInactive == .none)
    }

    @Test func removalEndsEverything() {
        var machine = self.activeMachine()
        machine.handlerRemoved()
        let channelRead = machine.channelRead()
        #expect(channelRead == .ignore)
        let failed = machine.failed()
        #expect(failed == .ignore)
    }
}
