import CirrusStore
import CirrusWire
import NIOCore

extension ConnectionHandler {
    // MARK: - Authentication

    /// Authenticates the client that said `hello` (its certificate or bearer token), applies
    /// the `max_frame_bytes` it asked for, admits it under ``PeerLimits`` and answers
    /// `HelloAck`; or closes the connection with the reason.
    func acceptHello(_ hello: Wire.Hello, context: ChannelHandlerContext) {
        guard let identity = self.authenticate(hello) else {
            self.closeWithError(
                code: .notAuthenticated,
                message: "present a client certificate from a trusted CA or a valid bearer token",
                context: context
            )
            return
        }
        // The client's max_frame_bytes binds what the server sends; 0 = no preference.
        var maximumFrameBytes = self.configuration.maximumFrameBytes
        if let requested = hello.limits?.maxFrameBytes, requested > 0 {
            guard requested >= FrameDecoder.minimumNegotiableFrameBytes else {
                self.closeWithError(
                    code: .protocolViolation,
                    message: "Hello.limits.max_frame_bytes \(requested) is below the minimum of "
                        + "\(FrameDecoder.minimumNegotiableFrameBytes) bytes",
                    context: context
                )
                return
            }
            maximumFrameBytes = min(maximumFrameBytes, Int(requested))
        }
        self.encoder?.maximumFrameBytes = maximumFrameBytes
        if let users = self.configuration.users, users.isDisabled(identity.userRecordName) {
            self.logger.info("refusing a connection of disabled user \(identity.userRecordName)")
            self.closeWithError(code: .notAuthenticated, message: "user \(identity.userRecordName) is disabled", context: context)
            return
        }
        if let refusal = self.configuration.peerLimits.admit(user: identity.userRecordName, now: .now()) {
            self.logger.info("refusing a connection of \(identity.userRecordName): \(refusal.message)")
            self.closeWithError(code: .rateLimited, message: refusal.message, context: context)
            return
        }
        self.admittedUser = identity.userRecordName
        self.identity = identity
        self.logger[metadataKey: "user"] = "\(identity.userRecordName)"
        self.configuration.users?.registerInBackground(identity)
        self.peerCertificate = nil  // Only needed to authenticate; idle connections stay small.
        let limits = Wire.Limits(
            maxFrameBytes: UInt32(clamping: maximumFrameBytes),
            maxConcurrentStreams: UInt32(clamping: self.configuration.connection.maximumConcurrentStreams),
            initialStreamWindow: self.configuration.connection.initialStreamWindow,
            pingIntervalMs: UInt32(clamping: self.configuration.connection.keepaliveInterval.nanoseconds / 1_000_000),
            idleTimeoutMs: UInt32(clamping: self.configuration.connection.idleTimeout.nanoseconds / 1_000_000),
            maxItemsPerOperation: UInt32(StorageExecutor.maximumItems)
        )
        let ack = Wire.HelloAck(
            protocolVersion: Wire.protocolVersion,
            serverName: self.configuration.serverName,
            userRecordName: identity.userRecordName,
            limits: limits
        )
        self.send(Wire.Frame(streamID: 0, kind: .helloAck(ack)), context: context)
        self.logger.debug("client \(hello.clientName) \(hello.clientVersion) authenticated as \(identity.userRecordName)")
    }

    private func authenticate(_ hello: Wire.Hello) -> ClientIdentity? {
        if let token = hello.bearerToken {
            if let identity = self.configuration.users?.authenticate(bearerToken: token) {
                return identity
            }
            return self.configuration.bearerTokenDigests[Wire.SHA256.hash(Array(token.utf8))]
                .map(ClientIdentity.init(userRecordName:))
        }
        return self.peerCertificate.flatMap(ClientIdentity.init(certificate:))
    }
}
